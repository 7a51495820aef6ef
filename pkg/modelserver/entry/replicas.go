package entry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentsvc"
)

// Replicas says where the replicas of a model's PS shards are.
type Replicas interface {
	// Addrs returns the gRPC addresses of the replicas serving "<model>:ps_<shard>", in the order
	// to try them; an error (a gRPC status) when there is none.
	Addrs(ctx context.Context, model string, shard int) ([]string, error)
	// Failed reports that a call to addr failed (the addresses may be stale).
	Failed(addr string)
}

// psKeys are the keys under which an AgentService HeartBeat may list a PS shard: agent v3's saved
// model names ("<model>:ps_<i>"), Monolith's API version 1 ("<model>:ps:<i>") and version 0 (agent
// v1's "ps:<i>", one model per deployment).
func psKeys(model string, shard int) []string {
	i := strconv.Itoa(shard)
	return []string{model + ":ps_" + i, model + ":ps:" + i, "ps:" + i}
}

// StaticReplicas are fixed addresses, by "<model>:ps_<i>" (tests, or a deployment without an
// agent), tried in their order.
type StaticReplicas map[string][]string

// Addrs implements Replicas.
func (s StaticReplicas) Addrs(_ context.Context, model string, shard int) ([]string, error) {
	for _, k := range psKeys(model, shard) {
		if a := s[k]; len(a) > 0 {
			return a, nil
		}
	}
	return nil, status.Errorf(codes.Unavailable, "no replica of %s:ps_%d configured", model, shard)
}

// Failed implements Replicas; static addresses do not change.
func (StaticReplicas) Failed(string) {}

// Defaults of AgentOptions.
const (
	// DefaultHeartbeatInterval is how often Monolith's entry asks its agent (AgentHeartbeat).
	DefaultHeartbeatInterval = 15 * time.Second
	// DefaultMinRefresh bounds how often missing shards or failures make it ask sooner.
	DefaultMinRefresh = 200 * time.Millisecond
	// DefaultAgentTimeout bounds one HeartBeat (Monolith's entry: 5 s).
	DefaultAgentTimeout = 5 * time.Second
)

// AgentOptions configure AgentReplicas.
type AgentOptions struct {
	// Addr is the agent's AgentService ("host:port").
	Addr string
	// Interval between HeartBeats (default DefaultHeartbeatInterval).
	Interval time.Duration
	// MinRefresh is the least time between two HeartBeats asked for by a missing shard or a failed
	// replica (default DefaultMinRefresh).
	MinRefresh time.Duration
	// Timeout bounds one HeartBeat (default DefaultAgentTimeout).
	Timeout time.Duration
	Logger  *slog.Logger
	// DialOptions are added to the connection to the agent (TLS credentials: pkg/tlsconfig).
	DialOptions []grpc.DialOption
}

// AgentReplicas finds the PS replicas as Monolith's entry does (AgentHeartbeat): it asks the
// agent's AgentService for its HeartBeat of server type PS every Interval and keeps the address
// table. A shard missing from the table, or a replica failing, makes it ask again sooner (at most
// every MinRefresh), so a new deployment's first requests and a replica that went away do not wait
// for the next beat. HeartBeat rather than GetReplicas: agent v3 answers only HeartBeat (its
// GetReplicas is "not implement for agent v3", as the reference's).
type AgentReplicas struct {
	opts   AgentOptions
	client *agentsvc.Client
	log    *slog.Logger

	refreshMu sync.Mutex // one HeartBeat at a time
	mu        sync.Mutex
	table     map[string][]string
	last      time.Time // of the last HeartBeat (answered or not)
	lastErr   error

	next atomic.Uint64 // rotates the replicas over the requests

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// NewAgentReplicas starts asking the agent at opts.Addr; Close stops it.
func NewAgentReplicas(opts AgentOptions) (*AgentReplicas, error) {
	if opts.Interval <= 0 {
		opts.Interval = DefaultHeartbeatInterval
	}
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultAgentTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := agentsvc.Dial(opts.Addr, agentsvc.ClientOptions{Timeout: opts.Timeout, DialOptions: opts.DialOptions})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &AgentReplicas{opts: opts, client: client, log: log, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go a.loop(ctx)
	return a, nil
}

func (a *AgentReplicas) loop(ctx context.Context) {
	defer close(a.done)
	t := time.NewTicker(a.opts.Interval)
	defer t.Stop()
	a.refresh(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.refresh(ctx)
		case <-a.kick:
			a.refreshSoon(ctx)
		}
	}
}

// refreshSoon refreshes unless the last HeartBeat is younger than MinRefresh; then it waits until
// it is not.
func (a *AgentReplicas) refreshSoon(ctx context.Context) {
	a.mu.Lock()
	wait := a.opts.MinRefresh - time.Since(a.last)
	a.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	a.refresh(ctx)
}

// refresh asks the agent for its HeartBeat and keeps the answer; a failed HeartBeat keeps the
// table it had (the replicas probably still serve).
func (a *AgentReplicas) refresh(ctx context.Context) {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	resp, err := a.client.HeartBeat(ctx, agentpb.ServerType_PS)
	if err != nil && ctx.Err() != nil {
		return // the caller gave up (its request ended): no word of the agent
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = time.Now()
	if err != nil {
		if a.lastErr == nil || a.lastErr.Error() != err.Error() {
			a.log.Warn("agent heartbeat failed; keeping the PS replicas known", "agent", a.opts.Addr, "err", err)
		}
		a.lastErr = err
		return
	}
	table := map[string][]string{}
	for k, l := range resp.GetAddresses() {
		if addrs := l.GetAddress(); len(addrs) > 0 {
			table[k] = slices.Clone(addrs)
		}
	}
	if !maps.EqualFunc(table, a.table, slices.Equal) {
		a.log.Info("PS replicas", "agent", a.opts.Addr, "replicas", table)
	}
	a.table, a.lastErr = table, nil
}

// lookup returns the shard's replicas, rotated by one more at each call so that the requests
// spread over them.
func (a *AgentReplicas) lookup(model string, shard int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range psKeys(model, shard) {
		if addrs := a.table[k]; len(addrs) > 0 {
			r := int(a.next.Add(1) % uint64(len(addrs)))
			return append(slices.Clone(addrs[r:]), addrs[:r]...)
		}
	}
	return nil
}

// Addrs implements Replicas: from the table (rotated: the requests spread over the replicas), else after a HeartBeat (at most one per MinRefresh),
// else UNAVAILABLE naming the agent and what it answered.
func (a *AgentReplicas) Addrs(ctx context.Context, model string, shard int) ([]string, error) {
	if addrs := a.lookup(model, shard); addrs != nil {
		return addrs, nil
	}
	a.mu.Lock()
	stale := time.Since(a.last) >= a.opts.MinRefresh
	a.mu.Unlock()
	if stale {
		a.refresh(ctx)
		if addrs := a.lookup(model, shard); addrs != nil {
			return addrs, nil
		}
	} else {
		a.Failed("")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastErr != nil {
		return nil, status.Errorf(codes.Unavailable, "no replica of %s:ps_%d known: the agent at %s: %v", model, shard, a.opts.Addr, a.lastErr)
	}
	return nil, status.Errorf(codes.Unavailable, "no replica of %s:ps_%d: the agent at %s lists %s", model, shard, a.opts.Addr, fmt.Sprint(slices.Sorted(maps.Keys(a.table))))
}

// Failed implements Replicas: the next HeartBeat comes sooner.
func (a *AgentReplicas) Failed(string) {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Close stops the HeartBeats and closes the connection.
func (a *AgentReplicas) Close() error {
	a.cancel()
	<-a.done
	return a.client.Close()
}

// LazyReplicas are the AgentReplicas that New makes when an entry first asks for replicas, so
// that a model server without entries never asks the agent (nor needs its address); a failed New
// is tried again on the next ask. After Close, asks fail with Stopped.
type LazyReplicas struct {
	New     func() (*AgentReplicas, error)
	Stopped error

	mu     sync.Mutex
	r      *AgentReplicas
	closed bool
}

func (l *LazyReplicas) get() (*AgentReplicas, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, l.Stopped
	}
	if l.r == nil {
		r, err := l.New()
		if err != nil {
			return nil, err
		}
		l.r = r
	}
	return l.r, nil
}

// Addrs implements Replicas.
func (l *LazyReplicas) Addrs(ctx context.Context, model string, shard int) ([]string, error) {
	r, err := l.get()
	if err != nil {
		return nil, err
	}
	return r.Addrs(ctx, model, shard)
}

// Failed implements Replicas.
func (l *LazyReplicas) Failed(addr string) {
	if r, err := l.get(); err == nil {
		r.Failed(addr)
	}
}

// Close stops the AgentReplicas, if made.
func (l *LazyReplicas) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.r != nil {
		l.r.Close()
	}
}
