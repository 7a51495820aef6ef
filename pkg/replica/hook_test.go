package replica

import (
	"context"
	"sync"

	"github.com/monolith-go/monolith/pkg/zk"
)

// hookClient wraps a zk.Client for fault injection: it keeps each path's latest data watch
// function so a test can deliver what zkfake never sends (NONE, a late DELETED), it can make
// watches "blind" (they see their first state only, as if the client had dropped them), and it
// can run a hook around Get.
type hookClient struct {
	zk.Client
	mu       sync.Mutex
	dataFns  map[string]zk.DataWatchFunc
	blind    func(path string) bool
	afterGet func(path string) // called after the read, before Get returns its (now stale) result
	creates  chan struct{}     // when set, each Create waits for a value
	onExists func(path string) // called before Exists reads
}

func newHookClient(c zk.Client) *hookClient {
	return &hookClient{Client: c, dataFns: map[string]zk.DataWatchFunc{}}
}

func (h *hookClient) isBlind(path string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blind != nil && h.blind(path)
}

func (h *hookClient) DataWatch(path string, fn zk.DataWatchFunc) (zk.Watch, error) {
	h.mu.Lock()
	h.dataFns[path] = fn
	h.mu.Unlock()
	if h.isBlind(path) {
		first := true
		return h.Client.DataWatch(path, func(d []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
			if first {
				first = false
				return fn(d, st, ev)
			}
			return true
		})
	}
	return h.Client.DataWatch(path, fn)
}

func (h *hookClient) ChildrenWatch(path string, fn zk.ChildrenWatchFunc) (zk.Watch, error) {
	if h.isBlind(path) {
		first := true
		return h.Client.ChildrenWatch(path, func(ch []string, ev *zk.WatchEvent) bool {
			if first {
				first = false
				return fn(ch, ev)
			}
			return true
		})
	}
	return h.Client.ChildrenWatch(path, fn)
}

func (h *hookClient) Get(ctx context.Context, path string) ([]byte, zk.Stat, error) {
	data, st, err := h.Client.Get(ctx, path)
	h.mu.Lock()
	hook := h.afterGet
	h.mu.Unlock()
	if hook != nil {
		hook(path)
	}
	return data, st, err
}

func (h *hookClient) Create(ctx context.Context, path string, data []byte, opts zk.CreateOptions) (string, error) {
	h.mu.Lock()
	gate := h.creates
	h.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return h.Client.Create(ctx, path, data, opts)
}

func (h *hookClient) Exists(ctx context.Context, path string) (*zk.Stat, error) {
	h.mu.Lock()
	hook := h.onExists
	h.mu.Unlock()
	if hook != nil {
		hook(path)
	}
	return h.Client.Exists(ctx, path)
}

// deliver calls path's data watch function as the client would.
func (h *hookClient) deliver(path string, data []byte, st *zk.Stat, ev *zk.WatchEvent) bool {
	h.mu.Lock()
	fn := h.dataFns[path]
	h.mu.Unlock()
	return fn(data, st, ev)
}
