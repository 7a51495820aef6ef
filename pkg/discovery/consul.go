package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/discovery/consul"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Consul defaults of the reference.
const (
	// DefaultConsulRetryTime is the pause between removing a stale registration and looking again.
	DefaultConsulRetryTime = 3 * time.Second
	// DefaultConsulPoll is the pause between two lookups while waiting for a registration to show
	// (_RETRY_MAX_BACKOFF_SECS), and the bound of the random pause between socket retries.
	DefaultConsulPoll = 5 * time.Second
	// DefaultConsulPolls is how many times Register looks again before it concludes the machine is
	// blacklisted: max(2, 180 s / 5 s).
	DefaultConsulPolls = 36
	// DefaultConsulSocketTries is how many times a request failing on the socket is sent.
	DefaultConsulSocketTries = 5
	// ConsulLookupTimeout bounds a lookup (the reference's timeout=15).
	ConsulLookupTimeout = 15 * time.Second
)

// ConsulOptions configure NewConsul; zero durations and counts take the defaults above.
type ConsulOptions struct {
	// ConsulID is the service name every server of the job registers under (the job's psm).
	ConsulID string
	// Client is the agent client; its TTL loops stop when the discovery closes.
	Client *consul.Client
	// RetryTime, Poll, Polls, SocketTries: see the defaults.
	RetryTime, Poll time.Duration
	Polls           int
	SocketTries     int
	// Logger gets the discovery's log (slog.Default() when nil).
	Logger *slog.Logger
}

// ConsulDiscovery is the Consul discovery (ConsulServiceDiscovery): every server of the job is a
// service named ConsulID on its port, tagged index, name (the server type) and ip.
type ConsulDiscovery struct {
	id          string
	client      *consul.Client
	retryTime   time.Duration
	poll        time.Duration
	polls       int
	socketTries int
	log         *slog.Logger

	mu     sync.Mutex
	closed bool
}

var _ ServiceDiscovery = (*ConsulDiscovery)(nil)

// NewConsul returns the discovery of the services named opts.ConsulID (which must not be empty).
func NewConsul(opts ConsulOptions) (*ConsulDiscovery, error) {
	if opts.ConsulID == "" {
		return nil, errkind.New(errkind.Value, "consul discovery: empty consul id (psm)")
	}
	if opts.Client == nil {
		return nil, errkind.New(errkind.Value, "consul discovery: no client")
	}
	d := &ConsulDiscovery{id: opts.ConsulID, client: opts.Client, retryTime: opts.RetryTime, poll: opts.Poll,
		polls: opts.Polls, socketTries: opts.SocketTries}
	if d.retryTime <= 0 {
		d.retryTime = DefaultConsulRetryTime
	}
	if d.poll <= 0 {
		d.poll = DefaultConsulPoll
	}
	if d.polls <= 0 {
		d.polls = DefaultConsulPolls
	}
	if d.socketTries <= 0 {
		d.socketTries = DefaultConsulSocketTries
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	d.log = log.With("component", "consul_discovery", "consul_id", opts.ConsulID)
	return d, nil
}

// ErrBlacklisted is Register's error when the registration never shows in lookups.
var ErrBlacklisted = errkind.New(errkind.Runtime, "this machine is blacklisted by consul")

func (d *ConsulDiscovery) usable() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return nil
}

// withSocketRetry is the reference's retry_with_socket_error: a request failing on the way is sent
// again, up to socketTries times in all, after a random pause of up to poll.
func (d *ConsulDiscovery) withSocketRetry(ctx context.Context, call func() error) error {
	for try := 1; ; try++ {
		err := call()
		if err == nil || !consul.IsTransport(err) || try >= d.socketTries {
			return err
		}
		pause := time.Duration(rand.Float64() * float64(d.poll))
		d.log.Warn("consul request failed on the socket; retrying", "try", try, "pause", pause, "err", err)
		if err := sleepCtx(ctx, pause); err != nil {
			return fmt.Errorf("%w (retry stopped: %w)", err, ctx.Err())
		}
	}
}

// sleepCtx waits d or until ctx ends (returning ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// hostPort splits "host:port" into exactly two parts, as the reference (an IPv6 address is
// refused); a bad address is an error of kind Value.
func hostPort(addr string) (string, int, error) {
	parts := strings.Split(addr, ":")
	if len(parts) != 2 {
		return "", 0, errkind.New(errkind.Value, "Invalid addr: %s", addr)
	}
	port, err := pyint.Atoi(parts[1])
	if err != nil {
		return "", 0, errkind.New(errkind.Value, "Invalid addr: %s: %w", addr, err)
	}
	return parts[0], port, nil
}

// Register first removes a registration of the same name and index found in a lookup (looking
// again every RetryTime until it is gone, bounded by ctx), then registers addr, then waits until a
// lookup shows it: after Polls more lookups Poll apart it gives up with ErrBlacklisted.
func (d *ConsulDiscovery) Register(ctx context.Context, name string, index int, addr string) error {
	if err := d.usable(); err != nil {
		return err
	}
	host, port, err := hostPort(addr)
	if err != nil {
		return err
	}
	for {
		current, err := d.Query(ctx, name)
		if err != nil {
			return fmt.Errorf("consul discovery: register %s.%d: %w", name, index, err)
		}
		old, ok := current[index]
		if !ok {
			break
		}
		d.log.Info("removing a previous registration", "server_type", name, "index", index, "addr", old)
		if err := d.Deregister(ctx, name, index, old); err != nil {
			return fmt.Errorf("consul discovery: register %s.%d: remove the previous %s: %w", name, index, old, err)
		}
		if err := sleepCtx(ctx, d.retryTime); err != nil {
			return fmt.Errorf("consul discovery: register %s.%d: %w", name, index, err)
		}
	}
	tags := []consul.Tag{{Key: "index", Value: strconv.Itoa(index)}, {Key: "name", Value: name}, {Key: "ip", Value: host}}
	err = d.withSocketRetry(ctx, func() error {
		return d.client.Register(ctx, d.id, port, consul.RegisterOptions{Tags: tags})
	})
	if err != nil {
		return fmt.Errorf("consul discovery: register %s.%d: %w", name, index, err)
	}
	for polls := 0; ; polls++ {
		current, err := d.Query(ctx, name)
		if err != nil {
			return fmt.Errorf("consul discovery: register %s.%d: %w", name, index, err)
		}
		if _, ok := current[index]; ok {
			return nil
		}
		if polls >= d.polls {
			return fmt.Errorf("consul discovery: register %s.%d: not in lookups after %d tries: %w", name, index, polls+1, ErrBlacklisted)
		}
		if err := sleepCtx(ctx, d.poll); err != nil {
			return fmt.Errorf("consul discovery: register %s.%d: waiting to show: %w", name, index, err)
		}
	}
}

// Deregister removes the service of addr's port (name and index are not part of its id).
func (d *ConsulDiscovery) Deregister(ctx context.Context, name string, index int, addr string) error {
	if err := d.usable(); err != nil {
		return err
	}
	_, port, err := hostPort(addr)
	if err != nil {
		return err
	}
	err = d.withSocketRetry(ctx, func() error { return d.client.Deregister(ctx, d.id, port) })
	if err != nil {
		return fmt.Errorf("consul discovery: deregister %s.%d: %w", name, index, err)
	}
	return nil
}

// QueryAll looks the job's services up and groups them: server type -> index -> "ip:port". An
// element without the name, index or ip tags (not registered by a discovery) is skipped with a
// warning, where the reference raised KeyError.
func (d *ConsulDiscovery) QueryAll(ctx context.Context) (map[string]map[int]string, error) {
	if err := d.usable(); err != nil {
		return nil, err
	}
	var services []consul.Service
	err := d.withSocketRetry(ctx, func() error {
		var err error
		services, err = d.client.Lookup(ctx, d.id, ConsulLookupTimeout)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("consul discovery: lookup: %w", err)
	}
	out := map[string]map[int]string{}
	for _, s := range services {
		name, okName := s.Tags["name"]
		ip, okIP := s.Tags["ip"]
		rawIndex, okIndex := s.Tags["index"]
		if !okName || !okIP || !okIndex {
			d.log.Warn("ignoring a service without name, index and ip tags", "tags", s.Tags, "port", s.Port)
			continue
		}
		index, err := pyint.Atoi(rawIndex)
		if err != nil {
			return nil, errkind.New(errkind.Value, "consul discovery: service %s.%s: bad index tag: %w", name, rawIndex, err)
		}
		if out[name] == nil {
			out[name] = map[int]string{}
		}
		out[name][index] = fmt.Sprintf("%s:%d", ip, s.Port)
	}
	return out, nil
}

// Query returns the replicas of name (empty when none).
func (d *ConsulDiscovery) Query(ctx context.Context, name string) (map[int]string, error) {
	all, err := d.QueryAll(ctx)
	if err != nil {
		return nil, err
	}
	return copyMap(all[name]), nil
}

// Close stops the client's TTL check loops. The services stay registered (the reference never
// deregistered on close); their checks go critical after the TTL.
func (d *ConsulDiscovery) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	return d.client.Close()
}

// DeregisterAll removes every service of consulID the agent's lookup lists (the reference's
// deregister_all).
func DeregisterAll(ctx context.Context, client *consul.Client, consulID string) error {
	d, err := NewConsul(ConsulOptions{ConsulID: consulID, Client: client})
	if err != nil {
		return err
	}
	all, err := d.QueryAll(ctx)
	if err != nil {
		return err
	}
	for name, addrs := range all {
		for idx, addr := range addrs {
			if err := d.Deregister(ctx, name, idx, addr); err != nil {
				return err
			}
		}
	}
	return nil
}
