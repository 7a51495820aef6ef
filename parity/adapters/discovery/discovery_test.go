package discovery

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestPyError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want any
	}{
		{"none", nil, nil},
		{"bare assert", fmt.Errorf("register: %w", errkind.New(errkind.Precondition, "mlp: port 9999 is not 9101")),
			map[string]string{"type": "AssertionError", "message": ""}},
		{"KeyError on the (name, index) key", fmt.Errorf("x: %w", &discovery.NotRegisteredError{Name: "worker", Index: 5}),
			map[string]string{"type": "KeyError", "message": "('worker', 5)"}},
		{"other kinds keep their message", errkind.New(errkind.Value, "Invalid addr: x"),
			map[string]string{"type": "ValueError", "message": "Invalid addr: x"}},
		{"an error without kind cannot pass for an exception", errors.New("boom"),
			map[string]string{"type": "errkind.Unknown", "message": "boom"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := pyError(tc.err); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("pyError = %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestClusterOf(t *testing.T) {
	tree := map[string]string{
		"/monolith": "", "/monolith/job1": "", "/monolith/job1/ps.0": "127.0.0.1:1000", "/monolith/job1/ps.1": "",
		"/monolith/job1/a.b.2": "127.0.0.1:3002", "/monolith/job1/garbage": "x", "/monolith/job2/ps.0": "127.0.0.1:9",
		"/monolith/job1/ps.0/child": "y",
	}
	want := map[string]map[int]string{"ps": {0: "127.0.0.1:1000"}, "a.b": {2: "127.0.0.1:3002"}}
	got := clusterOf(tree, "job1")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("clusterOf = %v, want %v", got, want)
	}
	if !sameCluster(got, map[string]map[int]string{"ps": {0: "127.0.0.1:1000"}, "a.b": {2: "127.0.0.1:3002"}, "worker": {}}) {
		t.Fatal("a server type without replicas must count as absent")
	}
	if sameCluster(got, map[string]map[int]string{"ps": {0: "127.0.0.1:1000"}}) {
		t.Fatal("different maps compared equal")
	}
}
