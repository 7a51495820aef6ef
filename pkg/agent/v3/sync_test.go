package agentv3

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// scriptedTFS is the fake wrapper whose configured models go through script (one state per
// status call that lists them) before they are AVAILABLE.
type scriptedTFS struct {
	*tfs.FakeWrapper
	script []servingapis.ModelVersionStatus_State

	mu    sync.Mutex
	calls map[string]int
}

func (s *scriptedTFS) ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	out, err := s.FakeWrapper.ListSavedModelsStatus(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, st := range out {
		if i := s.calls[name]; i < len(s.script) {
			st.State = s.script[i]
		}
		s.calls[name]++
	}
	return out, nil
}

// TestPendingSync: a configured model in any state but AVAILABLE keeps the sync on its short
// interval, so it is advertised as soon as TF Serving serves it. A model unloaded and published
// again at once still shows its old version's UNLOADING or END: with only UNKNOWN, START and
// LOADING counted as pending, it waited for the next full sync interval.
func TestPendingSync(t *testing.T) {
	const (
		unknown   = servingapis.ModelVersionStatus_UNKNOWN
		start     = servingapis.ModelVersionStatus_START
		loading   = servingapis.ModelVersionStatus_LOADING
		unloading = servingapis.ModelVersionStatus_UNLOADING
		end       = servingapis.ModelVersionStatus_END
	)
	tests := []struct {
		name   string
		script []servingapis.ModelVersionStatus_State
	}{
		{"loading", []servingapis.ModelVersionStatus_State{unknown, start, loading}},
		{"old version unloading (re-published)", []servingapis.ModelVersionStatus_State{unloading, end, start, loading}},
		{"old version ended (re-published)", []servingapis.ModelVersionStatus_State{end}},
		{"old version unloading, then nothing", []servingapis.ModelVersionStatus_State{unloading}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			a, ctl := fakeAgent(t, nil, nil, func(o *Options) {
				// Only the pending interval can advertise the model within the test's time.
				o.SyncInterval, o.PendingSyncInterval = time.Hour, 5*time.Millisecond
				o.TFS = func(file string) (tfs.Process, error) {
					return &scriptedTFS{FakeWrapper: &tfs.FakeWrapper{ModelConfigFile: file}, script: tc.script, calls: map[string]int{}}, nil
				}
			})
			declare(t, ctl, "m", ptr("latest"), "entry")
			publish(t, ctl, "m", "entry")
			// Not through Status, which would ask TF Serving too and use up the script.
			eventually(t, "m:entry to be advertised", func() bool {
				a.mu.Lock()
				defer a.mu.Unlock()
				return slices.Equal(a.bound, []string{"m:entry"})
			})
		})
	}
}
