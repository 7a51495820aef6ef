package discovery

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv/mlpenv"
)

// DefaultPSPortTimeout is how long an MLP Query("ps") waits for each PS to accept connections (the
// reference's 3600 s).
const DefaultPSPortTimeout = time.Hour

// MLPDiscovery is the MLP discovery (MLPServiceDiscovery): the cluster is the MLP environment's,
// fixed for the job's life. Deregister hides a replica from Query until it registers again; both
// check that the replica exists and that addr is where the environment puts it.
type MLPDiscovery struct {
	// PSPortTimeout bounds Query("ps")'s wait for each PS's port (DefaultPSPortTimeout when 0).
	PSPortTimeout time.Duration

	mu      sync.Mutex
	env     *mlpenv.Env // nil once closed
	filters map[string]bool
}

var _ ServiceDiscovery = (*MLPDiscovery)(nil)

// NewMLP returns the discovery of env's cluster.
func NewMLP(env *mlpenv.Env) *MLPDiscovery {
	return &MLPDiscovery{env: env, filters: map[string]bool{}}
}

// Addr is this process's address, "host:port" from the environment.
func (d *MLPDiscovery) Addr() (string, error) {
	env, err := d.current()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%d", env.Host, env.Port), nil
}

// ServerType is this process's role in lower case.
func (d *MLPDiscovery) ServerType() (string, error) {
	env, err := d.current()
	if err != nil {
		return "", err
	}
	return strings.ToLower(env.Role), nil
}

// Index is this process's replica index.
func (d *MLPDiscovery) Index() (int, error) {
	env, err := d.current()
	if err != nil {
		return 0, err
	}
	return env.Index, nil
}

func (d *MLPDiscovery) current() (*mlpenv.Env, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.env == nil {
		return nil, ErrClosed
	}
	return d.env, nil
}

func filterKey(name string, index int) string {
	return fmt.Sprintf("%s:%d", strings.ToLower(name), index)
}

// check is the reference's _check: name is a role of the job, index one of its replicas, and addr
// has the replica's port and a host that is the replica's (primary host), this machine's, this
// machine's non-primary host or a local name. A failure is an error of kind Precondition (the
// reference asserted).
func check(env *mlpenv.Env, name string, index int, addr string) error {
	role := strings.ToUpper(name)
	if _, ok := env.AllRoles[role]; !ok {
		return errkind.New(errkind.Precondition, "mlp: %q is not a role of this job", name)
	}
	n, err := env.NumReplicas(name)
	if err != nil {
		return err
	}
	if index < 0 || index >= n {
		return errkind.New(errkind.Precondition, "mlp: %s has %d replicas, no index %d", name, n, index)
	}
	want, ok, err := env.ReplicaAddr(name, index, true)
	if err != nil {
		return err
	}
	if !ok {
		return errkind.New(errkind.Precondition, "mlp: the environment gives %s.%d no address", name, index)
	}
	wantHost, wantPort, err := splitAddr(want)
	if err != nil {
		return errkind.New(errkind.Precondition, "mlp: the environment's address of %s.%d: %w", name, index, err)
	}
	host, port, err := splitAddr(addr)
	if err != nil {
		return err
	}
	allowed := []string{"local", "localhost", "127.0.0.1", "0.0.0.0", wantHost, env.Host}
	if h, ok := env.ReplicaHost("", mlpenv.NoIndex, false); ok {
		allowed = append(allowed, h)
	}
	hostOK := false
	for _, a := range allowed {
		hostOK = hostOK || host == a
	}
	if !hostOK {
		return errkind.New(errkind.Precondition, "mlp: %s.%d: host %s is neither the environment's %s nor this machine's", name, index, host, wantHost)
	}
	if port != wantPort {
		return errkind.New(errkind.Precondition, "mlp: %s.%d: port %s is not the environment's %s", name, index, port, wantPort)
	}
	return nil
}

// AddrError is an address without a colon, so without a port. Its kind is Value: the reference's
// unpacking of addr.split(':') into host and port raised ValueError.
type AddrError struct{ Addr string }

func (e *AddrError) Error() string { return fmt.Sprintf("mlp: address %q has no port", e.Addr) }

// Unwrap gives the error its kind.
func (e *AddrError) Unwrap() error { return errValue }

var errValue = errkind.New(errkind.Value, "bad address")

// splitAddr splits "host:port" at its last colon, so an IPv6 host ("fdbd::2:9001") keeps its
// colons (the reference split at every colon and failed on them).
func splitAddr(addr string) (host, port string, err error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", "", &AddrError{Addr: addr}
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:], nil
}

// Register makes replica index of name visible to Query again, after checking it.
func (d *MLPDiscovery) Register(_ context.Context, name string, index int, addr string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.env == nil {
		return ErrClosed
	}
	if err := check(d.env, name, index, addr); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	delete(d.filters, filterKey(name, index))
	return nil
}

// Deregister hides replica index of name from Query, after checking it.
func (d *MLPDiscovery) Deregister(_ context.Context, name string, index int, addr string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.env == nil {
		return ErrClosed
	}
	if err := check(d.env, name, index, addr); err != nil {
		return fmt.Errorf("deregister: %w", err)
	}
	d.filters[filterKey(name, index)] = true
	return nil
}

// DeregisterAll hides every replica of every role.
func (d *MLPDiscovery) DeregisterAll() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.env == nil {
		return ErrClosed
	}
	for role, n := range d.env.AllRoles {
		for i := 0; i < n; i++ {
			d.filters[filterKey(role, i)] = true
		}
	}
	return nil
}

// Query returns name's visible replicas. For "ps" it first waits until each listed PS accepts
// connections (PSPortTimeout each, and ctx); one that does not is an error of kind Runtime.
func (d *MLPDiscovery) Query(ctx context.Context, name string) (map[int]string, error) {
	return d.QueryWith(ctx, name, false)
}

// QueryWith is Query; skipPortCheck leaves out the PS port check.
func (d *MLPDiscovery) QueryWith(ctx context.Context, name string, skipPortCheck bool) (map[int]string, error) {
	if name == "" {
		return nil, errkind.New(errkind.Precondition, "mlp query: empty server type")
	}
	d.mu.Lock()
	env := d.env
	if env == nil {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	result, err := d.visibleLocked(name)
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if strings.ToLower(name) == "ps" && !skipPortCheck {
		timeout := d.PSPortTimeout
		if timeout <= 0 {
			timeout = DefaultPSPortTimeout
		}
		for idx, addr := range result {
			host, port, err := splitAddr(addr)
			if err != nil {
				return nil, err
			}
			p, err := strconv.Atoi(port)
			if err != nil {
				return nil, errkind.New(errkind.Value, "mlp query: ps.%d address %q: bad port", idx, addr)
			}
			if !mlpenv.CheckPort(ctx, host, p, timeout) {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("mlp query: ps.%d %s: %w", idx, addr, ctx.Err())
				}
				return nil, errkind.New(errkind.Runtime, "mlp query: ps.%d %s connect error!", idx, addr)
			}
		}
	}
	return result, nil
}

func (d *MLPDiscovery) visibleLocked(name string) (map[int]string, error) {
	n, err := d.env.NumReplicas(name)
	if err != nil {
		return nil, err
	}
	result := map[int]string{}
	for idx := 0; idx < n; idx++ {
		addr, ok, err := d.env.ReplicaAddr(name, idx, true)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errkind.New(errkind.Precondition, "mlp query: the environment gives %s.%d no address", name, idx)
		}
		if !d.filters[filterKey(name, idx)] {
			result[idx] = addr
		}
	}
	return result, nil
}

// QueryAll returns the visible replicas of the job's ps, worker and chief roles, by lower-case role,
// without the PS port check.
func (d *MLPDiscovery) QueryAll(ctx context.Context) (map[string]map[int]string, error) {
	env, err := d.current()
	if err != nil {
		return nil, err
	}
	out := map[string]map[int]string{}
	for role := range env.AllRoles {
		name := strings.ToLower(role)
		if name != "ps" && name != "worker" && name != "chief" {
			continue
		}
		m, err := d.QueryWith(ctx, name, true)
		if err != nil {
			return nil, err
		}
		out[name] = m
	}
	return out, nil
}

// Close forgets the environment and the filters.
func (d *MLPDiscovery) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.env = nil
	d.filters = map[string]bool{}
	return nil
}
