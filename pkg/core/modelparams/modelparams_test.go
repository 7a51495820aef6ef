package modelparams

import (
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

type taskParams struct{ Name string }

// A model's params implement the interface with their own Task.
type myModel struct{}

func (myModel) Task() (taskParams, error) { return taskParams{Name: "ctr"}, nil }

func TestSingleTaskModelParams(t *testing.T) {
	for _, c := range []struct {
		name string
		m    SingleTaskModelParams[taskParams]
		want string
		kind errkind.Kind
	}{
		{"implementation", myModel{}, "ctr", errkind.Unknown},
		{"func", TaskFunc[taskParams](func() (taskParams, error) { return taskParams{Name: "cvr"}, nil }), "cvr", errkind.Unknown},
		// The base class's task() raises NotImplementedError('Abstract method').
		{"abstract", TaskFunc[taskParams](nil), "", errkind.Runtime},
	} {
		p, err := c.m.Task()
		if p.Name != c.want || errkind.Of(err) != c.kind {
			t.Errorf("%s: %+v %v", c.name, p, err)
		}
		if err != nil && err.Error() != "Abstract method" {
			t.Errorf("%s: message %q", c.name, err)
		}
	}
}
