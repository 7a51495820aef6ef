package entry

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestLazyReplicas: nothing is made until an entry asks; a failed New is tried again on the next
// ask; once made, the replicas answer; after Close, asks fail with Stopped.
func TestLazyReplicas(t *testing.T) {
	a := startAgent(t, map[string][]string{"m:ps_0": {"127.0.0.1:1"}})
	ctx := context.Background()
	stopped := errors.New("stopped")
	made, fail := 0, true
	l := &LazyReplicas{
		New: func() (*AgentReplicas, error) {
			made++
			if fail {
				return nil, errors.New("no agent yet")
			}
			return NewAgentReplicas(AgentOptions{Addr: a.addr, Interval: time.Hour})
		},
		Stopped: stopped,
	}
	l.Failed("127.0.0.1:1") // a failure report asks New too, and fails quietly
	if _, err := l.Addrs(ctx, "m", 0); err == nil || err.Error() != "no agent yet" || made != 2 {
		t.Fatalf("Addrs = %v after %d New calls, want New's error on the second", err, made)
	}
	fail = false
	got, err := l.Addrs(ctx, "m", 0)
	if err != nil || !slices.Equal(got, []string{"127.0.0.1:1"}) || made != 3 {
		t.Fatalf("Addrs = %v, %v after %d New calls, want the agent's replica on the third", got, err, made)
	}
	if _, err := l.Addrs(ctx, "m", 0); err != nil || made != 3 {
		t.Fatalf("Addrs = %v after %d New calls, want the replicas made once", err, made)
	}
	l.Close()
	if _, err := l.Addrs(ctx, "m", 0); !errors.Is(err, stopped) || made != 3 {
		t.Fatalf("Addrs after Close = %v (%d New calls), want Stopped", err, made)
	}
}
