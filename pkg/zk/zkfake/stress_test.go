package zkfake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk"
)

// TestConcurrentUseAndClose hammers one tree from several clients (with -race), closes them while
// they work, and checks that every call either succeeds, fails with a ZooKeeper error, or fails
// with ErrClosed (or ErrSessionExpired during ExpireSession), and that nothing keeps running afterwards.
func TestConcurrentUseAndClose(t *testing.T) {
	leakcheck.Check(t)
	srv := NewServer()
	const workers = 6
	clients := make([]*Fake, workers)
	for i := range clients {
		clients[i] = srv.Client()
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range clients {
		wg.Go(func() {
			<-start
			for j := 0; ; j++ {
				p := fmt.Sprintf("/s/%d/n%d", i%3, j%5)
				var err error
				switch j % 6 {
				case 0:
					_, err = c.Create(bg, p, []byte("x"), zk.CreateOptions{MakePath: true, Ephemeral: j%4 == 0})
				case 1:
					_, err = c.Set(bg, p, []byte("y"), zk.AnyVersion)
				case 2:
					err = c.Delete(bg, zk.Parent(p), zk.DeleteOptions{Recursive: true})
				case 3:
					var w zk.Watch
					w, err = c.ChildrenWatch(zk.Parent(p), func(kids []string, _ *zk.WatchEvent) bool {
						_, _ = c.Exists(bg, p) // calls back into the client
						return len(kids) < 3
					})
					if err == nil && j%2 == 0 {
						w.Stop()
					}
				case 4:
					_, err = c.DataWatch(p, func(_ []byte, st *zk.Stat, _ *zk.WatchEvent) bool { return st != nil })
				case 5:
					_, err = c.Children(bg, "/s")
				}
				if errors.Is(err, zk.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) &&
					!errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoChildrenForEphemerals) &&
					!errors.Is(err, zk.ErrSessionExpired) { // while ExpireSession's listeners run
					t.Errorf("unexpected error: %v", err)
					return
				}
			}
		})
	}
	// An election running throughout.
	elected := make(chan struct{})
	wg.Go(func() {
		err := clients[0].Election("/s/leader", "x").Run(bg, func(ctx context.Context) {
			close(elected)
			<-ctx.Done()
		})
		// ExpireSession below takes the leader's node away.
		if !errors.Is(err, zk.ErrSessionExpired) {
			t.Errorf("election Run = %v, want ErrSessionExpired", err)
		}
	})
	close(start)
	<-elected
	for _, c := range clients {
		if err := c.ExpireSession(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients {
		must(t, c.Close())
	}
	wg.Wait()
	srv.mu.Lock()
	left := len(srv.dataWatches) + len(srv.childWatches)
	srv.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d watched paths still registered after every client closed", left)
	}
}
