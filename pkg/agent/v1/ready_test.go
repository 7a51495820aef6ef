package agentv1

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestReady: agent v1 is ready only between a completed Start and Stop, while its ZooKeeper
// session is connected and its serving processes run.
func TestReady(t *testing.T) {
	tests := []struct {
		name string
		// act puts the started agent into the state under test.
		act  func(t *testing.T, a *Agent, client *zkfake.Fake)
		want string // "" for ready, else a substring of the only reason
	}{
		{"serving", func(*testing.T, *Agent, *zkfake.Fake) {}, ""},
		{"zookeeper suspended", func(t *testing.T, _ *Agent, c *zkfake.Fake) {
			if err := c.Suspend(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Resume() })
		}, "zookeeper: SUSPENDED"},
		{"a serving process exited", func(t *testing.T, a *Agent, _ *zkfake.Fake) {
			if err := syscall.Kill(nodePids(a)[PS], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, "serving processes down: "},
		{"stopped", func(_ *testing.T, a *Agent, _ *zkfake.Fake) { a.Stop() }, "agent v1 stopped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			noChildren(t)
			client := zkfake.New()
			t.Cleanup(func() { client.Close() })
			conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("mixed") })
			a, err := New(conf, agentOptions(t, client))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Stop)
			if got := a.Ready(context.Background()); !slices.Equal(got, []string{"agent v1 not started"}) {
				t.Fatalf("before Start: %q", got)
			}
			if err := a.Start(tctx(t, 60*time.Second)); err != nil {
				t.Fatal(err)
			}
			if got := a.Ready(context.Background()); len(got) != 0 {
				t.Fatalf("not ready after Start: %q", got)
			}
			tc.act(t, a, client)
			var got []string
			waitFor(t, 10*time.Second, "Ready to say "+tc.want, func() bool {
				got = a.Ready(context.Background())
				if tc.want == "" {
					return len(got) == 0
				}
				return len(got) == 1 && strings.Contains(got[0], tc.want)
			})
		})
	}
}
