package agentv3

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// statusFailingTFS is the fake wrapper whose model status calls fail while fail is set (TF
// Serving up but not answering).
type statusFailingTFS struct {
	*tfs.FakeWrapper
	fail atomic.Bool
}

func (s *statusFailingTFS) ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	if s.fail.Load() {
		return nil, errors.New("connection refused")
	}
	return s.FakeWrapper.ListSavedModelsStatus(ctx)
}

// TestReady: /readyz of agent v3 in each state it can be in: ready only with ZooKeeper connected,
// the layout applied and accepted by TF Serving, TF Serving answering, and every saved model the
// filters pass served (TestFailedLoadsReported: one with no AVAILABLE version).
func TestReady(t *testing.T) {
	tests := []struct {
		name    string
		filters []string
		// reloadFails makes every reload carrying models fail.
		reloadFails bool
		// act puts the running agent into the state under test.
		act func(t *testing.T, a *Agent, proc *statusFailingTFS)
		// want are the reasons (substrings, one per reason, in order); none: ready.
		want []string
	}{
		{name: "all good", act: func(*testing.T, *Agent, *statusFailingTFS) {}},
		{name: "zookeeper not connected", act: func(t *testing.T, a *Agent, _ *statusFailingTFS) {
			c := a.opts.ZK.(*zkfake.Fake)
			if err := c.Suspend(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Resume() }) // so Stop can remove the agent's nodes
		}, want: []string{"zookeeper: SUSPENDED"}},
		{name: "layout not applied", filters: []string{"entry; True", "ps_{i}; 10 // i"},
			act: func(t *testing.T, a *Agent, _ *statusFailingTFS) {
				publish(t, a.opts.ZK, "m", "ps_0") // the filter fails on ps_0
				settle(t, a)
			}, want: []string{"layout /gip/layout: not applied: ", "integer division or modulo by zero"}},
		{name: "a saved model the filters pass is skipped", act: func(t *testing.T, a *Agent, _ *statusFailingTFS) {
			declare(t, a.opts.ZK, "n", ptr("lastest"), "entry") // a bad deploy config: not served
			publish(t, a.opts.ZK, "n", "entry")
			settle(t, a)
		}, want: []string{`saved model n:entry: not in TF Serving's config: saved model n:entry (/gip/saved_models/n/entry): version_policy "lastest"`}},
		{name: "tf serving status fails", act: func(_ *testing.T, _ *Agent, proc *statusFailingTFS) { proc.fail.Store(true) },
			want: []string{"tf serving: model status: connection refused"}},
		{name: "tf serving refuses the config", reloadFails: true, act: func(*testing.T, *Agent, *statusFailingTFS) {},
			want: []string{"tf serving: the layout's model server config is not accepted yet (", "attempts, last: connection refused)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			proc := &statusFailingTFS{}
			fails := 0
			if tc.reloadFails {
				fails = 1 << 30
			}
			a, ctl := fakeAgent(t, nil, func(f *utilsspec.AgentConfig) { f.LayoutFilters = tc.filters }, func(o *Options) {
				o.TFS = func(file string) (tfs.Process, error) {
					proc.FakeWrapper = &tfs.FakeWrapper{ModelConfigFile: file}
					return proc, nil
				}
				o.Reloader, o.ReloadBackoff, o.ReloadBackoffMax = &countingReloader{fails: fails}, time.Millisecond, 5*time.Millisecond
			})
			declare(t, ctl, "m", ptr("latest"), "entry", "ps_0", "ps_1")
			publish(t, ctl, "m", "entry", "ps_1")
			settle(t, a)
			if !tc.reloadFails {
				eventually(t, "the agent to be ready", func() bool { return len(a.Ready(context.Background())) == 0 })
			}
			tc.act(t, a, proc)
			var got []string
			deadline := time.Now().Add(15 * time.Second)
			for got = a.Ready(context.Background()); !matchReasons(got, tc.want); got = a.Ready(context.Background()) {
				if time.Now().After(deadline) {
					t.Fatalf("Ready = %q, want reasons containing %q", got, tc.want)
				}
				time.Sleep(5 * time.Millisecond)
			}

			// /readyz says the same, with its status code.
			rec := httptest.NewRecorder()
			agentstatus.NewHandler(a, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			var rd agentstatus.Readiness
			if err := json.Unmarshal(rec.Body.Bytes(), &rd); err != nil {
				t.Fatalf("/readyz: %v: %s", err, rec.Body)
			}
			wantCode := 200
			if len(tc.want) > 0 {
				wantCode = 503
			}
			if rec.Code != wantCode || rd.Ready != (len(tc.want) == 0) || !matchReasons(rd.Reasons, tc.want) {
				t.Errorf("/readyz = %d %s, want %d with %q", rec.Code, rec.Body, wantCode, tc.want)
			}
		})
	}
}

// matchReasons: every substring of want is in the reasons, in order, and there are reasons
// exactly when want has some.
func matchReasons(got, want []string) bool {
	if (len(got) == 0) != (len(want) == 0) {
		return false
	}
	rest := strings.Join(got, "\n")
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			return false
		}
		rest = rest[i+len(w):]
	}
	return true
}

// TestReadyLifecycle: an agent is not ready before Start, nor after Stop.
func TestReadyLifecycle(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	c := srv.Client()
	defer c.Close()
	a, err := New(testConfig(t, nil, nil), Options{ZK: c, Host: "127.0.0.1", ModelConfigDir: t.TempDir(), Logger: quiet,
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Ready(context.Background()); !slices.Equal(got, []string{"agent v3 not started"}) {
		t.Errorf("before Start: %q", got)
	}
	if err := a.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent to be ready", func() bool { return len(a.Ready(context.Background())) == 0 })
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := a.Ready(context.Background()); !slices.Equal(got, []string{"agent v3 stopped"}) {
		t.Errorf("after Stop: %q", got)
	}
}
