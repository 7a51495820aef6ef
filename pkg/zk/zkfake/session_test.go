package zkfake

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
)

func TestEphemeralLifetime(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, c *Fake)
	}{
		{"close", func(t *testing.T, c *Fake) { must(t, c.Close()) }},
		{"session expiry", func(t *testing.T, c *Fake) { must(t, c.ExpireSession()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := NewServer()
			a, b := client(t, srv), client(t, srv)
			mustCreate(t, a, "/svc/a1", "x", zk.CreateOptions{MakePath: true, Ephemeral: true})
			mustCreate(t, a, "/svc/a2", "y", zk.CreateOptions{Ephemeral: true})
			mustCreate(t, a, "/svc/keep", "", zk.CreateOptions{})
			mustCreate(t, b, "/svc/b1", "", zk.CreateOptions{Ephemeral: true})
			st, _ := b.Exists(bg, "/svc/a1")
			if st == nil || st.EphemeralOwner != a.SessionID() || a.SessionID() == b.SessionID() {
				t.Fatalf("ephemeral owner %v, sessions %#x %#x", st, a.SessionID(), b.SessionID())
			}
			var r recorder
			_, err := b.ChildrenWatch("/svc", r.children("svc"))
			must(t, err)
			_, err = b.DataWatch("/svc/a1", r.data("a1"))
			must(t, err)
			r.take()
			oldSession := a.SessionID()

			tc.end(t, a)
			// Oldest first: a1 then a2.
			wantCalls(t, &r, `a1 DELETED data="x" absent`, "svc CHILD [a2 b1 keep]", "svc CHILD [b1 keep]")
			kids, err := b.Children(bg, "/svc")
			must(t, err)
			if !slices.Equal(kids, []string{"b1", "keep"}) {
				t.Fatalf("children after the session ended: %v", kids)
			}
			if tc.name == "session expiry" {
				if a.SessionID() == oldSession {
					t.Fatal("ExpireSession kept the session id")
				}
				// The client goes on with a new session.
				got := mustCreate(t, a, "/svc/a1", "", zk.CreateOptions{Ephemeral: true})
				if st, _ := a.Exists(bg, got); st.EphemeralOwner != a.SessionID() {
					t.Fatalf("new ephemeral owner %#x, want %#x", st.EphemeralOwner, a.SessionID())
				}
			}
		})
	}
}

func TestCallsAfterClose(t *testing.T) {
	c := New()
	mustCreate(t, c, "/n", "", zk.CreateOptions{})
	calls := 0
	w, err := c.DataWatch("/n", func([]byte, *zk.Stat, *zk.WatchEvent) bool { calls++; return true })
	must(t, err)
	removed := false
	c.AddListener(func(zk.State) { removed = true })
	must(t, c.Close())
	must(t, c.Close()) // again: nil
	select {
	case <-w.Done():
	default:
		t.Fatal("watch not stopped by Close")
	}
	if removed {
		t.Fatal("Close called a listener")
	}
	if c.State() != zk.StateLost {
		t.Fatalf("State after Close = %v", c.State())
	}
	ops := map[string]func() error{
		"create":   func() error { _, err := c.Create(bg, "/x", nil, zk.CreateOptions{}); return err },
		"get":      func() error { _, _, err := c.Get(bg, "/n"); return err },
		"set":      func() error { _, err := c.Set(bg, "/n", nil, zk.AnyVersion); return err },
		"delete":   func() error { return c.Delete(bg, "/n", zk.DeleteOptions{}) },
		"exists":   func() error { _, err := c.Exists(bg, "/n"); return err },
		"children": func() error { _, err := c.Children(bg, "/"); return err },
		"ensure":   func() error { return c.EnsurePath(bg, "/n") },
		"data watch": func() error {
			_, err := c.DataWatch("/n", func([]byte, *zk.Stat, *zk.WatchEvent) bool { return true })
			return err
		},
		"children watch": func() error {
			_, err := c.ChildrenWatch("/n", func([]string, *zk.WatchEvent) bool { return true })
			return err
		},
		"election": func() error { return c.Election("/e", "me").Run(bg, func(context.Context) {}) },
		"expire":   c.ExpireSession,
		"suspend":  c.Suspend,
		"resume":   c.Resume,
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) { wantErr(t, op(), zk.ErrClosed) })
	}
	// The tree lives on for the server's other clients.
	other := c.Server().Client()
	defer other.Close()
	if st, _ := other.Exists(bg, "/n"); st == nil {
		t.Fatal("persistent node gone with the client")
	}
	if calls != 1 {
		t.Fatalf("closed client's watch called %d times, want 1 (the first call)", calls)
	}
	_, err = other.Set(bg, "/n", []byte("after"), zk.AnyVersion)
	must(t, err)
	if calls != 1 {
		t.Fatal("closed client's watch called after Close")
	}
}

func TestListeners(t *testing.T) {
	c := newClient(t)
	var got []zk.State
	var during []string
	remove := c.AddListener(func(s zk.State) {
		got = append(got, s)
		_, err := c.Exists(bg, "/")
		during = append(during, s.String()+":"+errName(err)+":"+c.State().String())
	})
	var second []zk.State
	removeSecond := c.AddListener(func(s zk.State) { second = append(second, s) })

	must(t, c.ExpireSession())
	must(t, c.Suspend())
	_, err := c.Exists(bg, "/")
	wantErr(t, err, zk.ErrConnectionLoss)
	must(t, c.Resume())
	removeSecond()
	removeSecond() // idempotent
	must(t, c.Suspend())
	remove()
	must(t, c.Resume())

	want := []zk.State{zk.StateLost, zk.StateConnected, zk.StateSuspended, zk.StateConnected, zk.StateSuspended}
	if !slices.Equal(got, want) {
		t.Fatalf("listener got %v, want %v", got, want)
	}
	if !slices.Equal(second, want[:4]) {
		t.Fatalf("second listener got %v, want %v", second, want[:4])
	}
	wantDuring := []string{
		"LOST:SessionExpired:LOST", "CONNECTED:nil:CONNECTED",
		"SUSPENDED:ConnectionLoss:SUSPENDED", "CONNECTED:nil:CONNECTED",
		"SUSPENDED:ConnectionLoss:SUSPENDED",
	}
	if !slices.Equal(during, wantDuring) {
		t.Fatalf("calls from listeners: %v, want %v", during, wantDuring)
	}
	if c.State() != zk.StateConnected {
		t.Fatalf("State = %v", c.State())
	}
	c.AddListener(nil)() // a nil listener is ignored
}

func errName(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{zk.ErrSessionExpired, "SessionExpired"}, {zk.ErrConnectionLoss, "ConnectionLoss"}} {
		if err != nil && errors.Is(err, e.err) {
			return e.name
		}
	}
	if err != nil {
		return err.Error()
	}
	return "nil"
}

// TestRetryOverSuspend: zk.Retry rides out a dropped connection.
func TestRetryOverSuspend(t *testing.T) {
	c := newClient(t)
	must(t, c.Suspend())
	tries := 0
	err := zk.Retry(bg, zk.RetryPolicy{MaxTries: 3, Delay: time.Millisecond}, func(ctx context.Context) error {
		tries++
		_, err := c.Create(ctx, "/r", nil, zk.CreateOptions{})
		if tries == 1 {
			must(t, c.Resume())
		}
		return err
	})
	if err != nil || tries != 2 {
		t.Fatalf("Retry = %v after %d tries, want success after 2", err, tries)
	}
	must(t, c.Suspend())
	err = zk.Retry(bg, zk.RetryPolicy{MaxTries: 3, Delay: time.Millisecond}, func(ctx context.Context) error {
		_, err := c.Create(ctx, "/r2", nil, zk.CreateOptions{})
		return err
	})
	wantErr(t, err, zk.ErrConnectionLoss)
	must(t, c.Resume())
}
