package zkfake

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// leader runs an election in a goroutine; its fn reports when it is elected and holds the
// leadership until release is closed or its context ends.
type leader struct {
	elected  chan struct{}
	release  chan struct{}
	fnCtxErr chan error // fn's context cause when fn returned
	result   chan error
}

func runLeader(e zk.Election, ctx context.Context) *leader {
	l := &leader{
		elected:  make(chan struct{}),
		release:  make(chan struct{}),
		fnCtxErr: make(chan error, 1),
		result:   make(chan error, 1),
	}
	go func() {
		l.result <- e.Run(ctx, func(ctx context.Context) {
			close(l.elected)
			select {
			case <-l.release:
			case <-ctx.Done():
			}
			l.fnCtxErr <- context.Cause(ctx)
		})
	}()
	return l
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

func notYet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s too early", what)
	case <-time.After(30 * time.Millisecond):
	}
}

func result(t *testing.T, l *leader) error {
	t.Helper()
	select {
	case err := <-l.result:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// contenders lists the election's nodes.
func contenders(t *testing.T, c *Fake, path string) []string {
	t.Helper()
	kids, err := c.Children(bg, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	must(t, err)
	return kids
}

func TestElectionTwoClients(t *testing.T) {
	leakcheck.Check(t)
	srv := NewServer()
	a, b := srv.Client(), srv.Client()

	la := runLeader(a.Election("/bzid/election", "pod-a"), bg)
	waitFor(t, la.elected, "a is elected")
	lb := runLeader(b.Election("/bzid/election", "pod-b"), bg)
	eventually(t, "b queued", func() bool { return len(contenders(t, a, "/bzid/election")) == 2 })
	notYet(t, lb.elected, "b elected while a leads")

	// Nodes are named as kazoo's Lock names them and hold the identifier.
	kids := contenders(t, a, "/bzid/election")
	for _, k := range kids {
		if !strings.Contains(k, "__lock__000000000") {
			t.Fatalf("contender node %q not named like kazoo's", k)
		}
	}
	ids := map[string]bool{}
	for _, k := range kids {
		data, st, err := a.Get(bg, "/bzid/election/"+k)
		must(t, err)
		ids[string(data)] = true
		if st.EphemeralOwner == 0 {
			t.Fatalf("contender %s is not ephemeral", k)
		}
	}
	if !ids["pod-a"] || !ids["pod-b"] {
		t.Fatalf("identifiers stored: %v", ids)
	}

	close(la.release)
	wantErr(t, result(t, la), nil)
	waitFor(t, lb.elected, "b is elected after a's fn returned")
	close(lb.release)
	wantErr(t, result(t, lb), nil)
	if n := len(contenders(t, a, "/bzid/election")); n != 0 {
		t.Fatalf("%d contender nodes left", n)
	}
	must(t, a.Close())
	must(t, b.Close())
}

func TestElectionMutualExclusion(t *testing.T) {
	srv := NewServer()
	var mu sync.Mutex
	running, maxRunning, runs := 0, 0, 0
	var wg sync.WaitGroup
	for i := range 5 {
		c := client(t, srv)
		e := c.Election("/e", string(rune('a'+i)))
		wg.Go(func() {
			for range 3 {
				err := e.Run(bg, func(context.Context) {
					mu.Lock()
					running++
					runs++
					maxRunning = max(maxRunning, running)
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					running--
					mu.Unlock()
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if maxRunning != 1 || runs != 15 {
		t.Fatalf("max leaders at once %d (want 1), runs %d (want 15)", maxRunning, runs)
	}
}

func TestElectionEnds(t *testing.T) {
	tests := []struct {
		name string
		// end stops the waiting contender w (its client wc) or the leader l (client lc).
		end         func(t *testing.T, lc, wc *Fake, le, we zk.Election, cancelWaiter context.CancelFunc)
		leaderErr   error // nil: Run returns nil
		leaderCause error // fn's context cause, nil when fn returned on release
		waiterErr   error
		waiterWins  bool
	}{
		{
			name: "cancel the waiter",
			end: func(t *testing.T, _, _ *Fake, _, we zk.Election, _ context.CancelFunc) {
				we.Cancel()
			},
		},
		{
			name: "waiter's context ends",
			end: func(t *testing.T, _, _ *Fake, _, _ zk.Election, cancel context.CancelFunc) {
				cancel()
			},
			waiterErr: context.Canceled,
		},
		{
			name: "waiter's client closes",
			end: func(t *testing.T, _, wc *Fake, _, _ zk.Election, _ context.CancelFunc) {
				must(t, wc.Close())
			},
			waiterErr: zk.ErrClosed,
		},
		{
			name: "waiter's session expires",
			end: func(t *testing.T, _, wc *Fake, _, _ zk.Election, _ context.CancelFunc) {
				must(t, wc.ExpireSession())
			},
			waiterErr: zk.ErrSessionExpired,
		},
		{
			name: "cancel the leader",
			end: func(t *testing.T, _, _ *Fake, le, _ zk.Election, _ context.CancelFunc) {
				le.Cancel()
			},
			leaderCause: errors.New("canceled"),
			waiterWins:  true,
		},
		{
			name: "leader's session expires",
			end: func(t *testing.T, lc, _ *Fake, _, _ zk.Election, _ context.CancelFunc) {
				must(t, lc.ExpireSession())
			},
			leaderErr:   zk.ErrSessionExpired,
			leaderCause: zk.ErrSessionExpired,
			waiterWins:  true,
		},
		{
			name: "leader's client closes",
			end: func(t *testing.T, lc, _ *Fake, _, _ zk.Election, _ context.CancelFunc) {
				must(t, lc.Close())
			},
			leaderErr:   zk.ErrClosed,
			leaderCause: zk.ErrClosed,
			waiterWins:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			srv := NewServer()
			lc, wc := srv.Client(), srv.Client()
			le, we := lc.Election("/e", "leader"), wc.Election("/e", "waiter")
			l := runLeader(le, bg)
			waitFor(t, l.elected, "leader elected")
			wctx, cancelWaiter := context.WithCancel(bg)
			defer cancelWaiter()
			w := runLeader(we, wctx)
			eventually(t, "waiter queued", func() bool { return len(contenders(t, lc, "/e")) == 2 })

			tc.end(t, lc, wc, le, we, cancelWaiter)

			if tc.waiterWins {
				cause := <-l.fnCtxErr
				if tc.leaderCause == nil && cause != nil || tc.leaderCause != nil && cause == nil {
					t.Fatalf("leader fn's context cause = %v, want %v", cause, tc.leaderCause)
				}
				if errors.Is(tc.leaderCause, zk.ErrSessionExpired) || errors.Is(tc.leaderCause, zk.ErrClosed) {
					wantErr(t, cause, tc.leaderCause)
				}
				wantErr(t, result(t, l), tc.leaderErr)
				waitFor(t, w.elected, "waiter elected")
				close(w.release)
				wantErr(t, result(t, w), nil)
			} else {
				err := result(t, w)
				wantErr(t, err, tc.waiterErr)
				select {
				case <-w.elected:
					t.Fatal("waiter's fn ran")
				default:
				}
				close(l.release)
				wantErr(t, result(t, l), nil)
			}
			_ = lc.Close()
			_ = wc.Close()
			probe := srv.Client()
			if kids := contenders(t, probe, "/e"); len(kids) != 0 {
				t.Fatalf("contender nodes left: %v", kids)
			}
			_ = probe.Close()
		})
	}
}

func TestElectionMisuse(t *testing.T) {
	c := newClient(t)
	e := c.Election("/e", "x")
	err := e.Run(bg, nil)
	if errkind.Of(err) != errkind.Value {
		t.Fatalf("Run(nil fn) = %v, want a Value error", err)
	}
	wantErr(t, c.Election("e", "x").Run(bg, func(context.Context) {}), zk.ErrInvalidPath)

	l := runLeader(e, bg)
	waitFor(t, l.elected, "elected")
	err = e.Run(bg, func(context.Context) { t.Error("second concurrent Run ran") })
	if err == nil || errkind.Of(err) != errkind.Runtime {
		t.Fatalf("concurrent Run = %v, want a Runtime error", err)
	}
	e.Cancel() // ends the first Run
	wantErr(t, result(t, l), nil)
	e.Cancel() // no Run: no effect
	// The Election can run again.
	ran := false
	must(t, e.Run(bg, func(context.Context) { ran = true }))
	if !ran {
		t.Fatal("second Run did not run fn")
	}
	// A done context before the election.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	wantErr(t, e.Run(ctx, func(context.Context) { t.Error("ran with a done context") }), context.Canceled)
}
