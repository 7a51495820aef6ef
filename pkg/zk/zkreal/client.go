package zkreal

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkwire"
)

// Auth is a credential added to every connection (e.g. scheme "digest", data "user:password").
type Auth struct {
	Scheme string
	Data   []byte
}

// Options configure Connect.
type Options struct {
	// Servers are host:port addresses.
	Servers []string
	// SessionTimeout is the requested session timeout (default 10 s; the server may adjust it).
	SessionTimeout time.Duration
	// Chroot, when set, is prepended to every path (it is created if missing).
	Chroot string
	// Auth is sent on every new connection.
	Auth []Auth
	// ACL for created nodes (default: world, all permissions).
	ACL []gozk.ACL
	// ReadRetry bounds the retries of idempotent reads on connection loss.
	ReadRetry zk.RetryPolicy
	// Logger receives the library's log and this package's; default slog.Default().
	Logger *slog.Logger
	// WatchWorkers bounds the goroutines that re-arm fired watches and call their functions
	// (default 16). They exist only while watches fire: an idle watch costs no goroutine.
	WatchWorkers int
	// ConnectTimeout bounds Connect's wait for the first session (DefaultConnectTimeout when
	// zero, no bound but ctx's when negative): Connect then fails with ErrConnectTimeout, naming
	// the servers, the time waited and the failed attempts.
	ConnectTimeout time.Duration
	// ConnectWarnInterval is the least time between two WARN lines about failed connection
	// attempts, initial or after a lost connection (DefaultConnectWarnInterval when zero); each
	// line counts the attempts since the previous one.
	ConnectWarnInterval time.Duration
}

// defaultWatchWorkers: enough to keep a burst of re-arms (every watch after a new session)
// pipelined on the connection, few enough to stay cheap.
const defaultWatchWorkers = 16

// Client is a zk.Client on a real ZooKeeper ensemble.
type Client struct {
	conn   *gozk.Conn
	opts   Options
	log    *slog.Logger
	creds  *credentials
	chroot string

	events  *eventQueue
	fails   *connectFailures
	closing chan struct{}
	wg      sync.WaitGroup

	mu        sync.Mutex
	state     zk.State
	gen       uint64        // incremented on each new session
	seq       uint64        // incremented whenever genCh is replaced
	genCh     chan struct{} // closed (and replaced) when the state or gen changes
	lost      bool          // LOST was emitted and no new session is up yet
	listeners map[int]func(zk.State)
	nextID    int
	owned     map[string]*ownedNode // registered ephemeral nodes, by chroot-relative path
	ownedSeq  uint64                // registrations so far: orders the re-creation
	closed    bool

	closeOnce sync.Once

	// Watches (watch.go), guarded by wmu. wmu may be taken before mu, never after it.
	wmu      sync.Mutex
	wIndex   map[string]*watch // server path -> armed watches (linked by watch.next)
	wQueue   []*watch          // fired watches waiting for a worker
	wParked  map[*watch]uint64 // watches waiting for the connection or a new session -> gen when parked
	wExpGen  uint64            // generation of the latest session known to have expired
	wWorkers int               // running workers
	wClosed  bool              // Close has begun: no new worker
	wWG      sync.WaitGroup    // the workers
}

var _ zk.Client = (*Client)(nil)

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(format string, args ...any) {
	a.l.Debug(fmt.Sprintf(format, args...), "component", "go-zookeeper")
}

// Connect opens a session and waits until it is established (or ctx ends).
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Servers) == 0 {
		return nil, errkind.New(errkind.Value, "zkreal: no servers given")
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.ACL == nil {
		opts.ACL = gozk.WorldACL(gozk.PermAll)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.WatchWorkers <= 0 {
		opts.WatchWorkers = defaultWatchWorkers
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.ConnectWarnInterval <= 0 {
		opts.ConnectWarnInterval = DefaultConnectWarnInterval
	}
	chroot := strings.TrimSuffix(opts.Chroot, "/")
	if chroot != "" {
		if err := zk.ValidatePath(chroot); err != nil {
			return nil, fmt.Errorf("zkreal: chroot: %w", err)
		}
	}
	c := &Client{
		opts: opts, log: opts.Logger, creds: &credentials{}, chroot: chroot,
		events: newEventQueue(), closing: make(chan struct{}), genCh: make(chan struct{}),
		listeners: map[int]func(zk.State){}, owned: map[string]*ownedNode{},
		wIndex: map[string]*watch{}, wParked: map[*watch]uint64{},
		fails: &connectFailures{log: opts.Logger.With("component", "zookeeper"), interval: opts.ConnectWarnInterval},
	}
	sniff := zkwire.SniffingDialer(c.creds.set, handshakeTimeout(opts.SessionTimeout))
	conn, _, err := gozk.Connect(opts.Servers, opts.SessionTimeout,
		gozk.WithLogger(slogAdapter{opts.Logger}),
		gozk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			nc, err := sniff(network, address, timeout)
			if err != nil {
				c.fails.fail(address, err)
			}
			return nc, err
		}),
		// The callback runs on the library's connection goroutines: it must never block, so it
		// only appends session states to an unbounded queue that the dispatcher drains, and
		// moves fired watches to the workers' queue.
		gozk.WithEventCallback(func(ev gozk.Event) {
			if ev.Type == gozk.EventSession {
				c.events.push(ev)
			} else {
				c.onWatchEvent(ev)
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("zkreal: connect: %w", err)
	}
	c.conn = conn
	c.wg.Add(1)
	go c.dispatch()
	if err := c.waitFirstSession(ctx); err != nil {
		c.Close()
		return nil, err
	}
	for _, a := range opts.Auth {
		// The library keeps the credentials and re-sends them on every new connection.
		if err := c.conn.AddAuth(a.Scheme, a.Data); err != nil {
			c.Close()
			return nil, fmt.Errorf("zkreal: add auth %s: %w", a.Scheme, err)
		}
	}
	if chroot != "" {
		if err := c.ensureFull(ctx, chroot); err != nil {
			c.Close()
			return nil, fmt.Errorf("zkreal: create chroot %s: %w", chroot, err)
		}
	}
	return c, nil
}

// waitFirstSession waits for the first session, for at most ConnectTimeout.
func (c *Client) waitFirstSession(ctx context.Context) error {
	began := time.Now()
	wait := ctx
	if c.opts.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, c.opts.ConnectTimeout)
		defer cancel()
	}
	err := c.waitConnected(wait)
	if err == nil {
		return nil
	}
	servers := strings.Join(c.opts.Servers, ",")
	failed, last := c.fails.summary()
	waited := time.Since(began).Round(time.Millisecond)
	if ctx.Err() == nil && wait.Err() != nil {
		err = ErrConnectTimeout
	}
	if last != nil {
		return fmt.Errorf("zkreal: connect to %s: %w (waited %v, %d connection attempts failed, the last with: %v)", servers, err, waited, failed, last)
	}
	return fmt.Errorf("zkreal: connect to %s: %w (waited %v, no connection attempt failed)", servers, err, waited)
}

// SessionID returns the current session id and password.
func (c *Client) SessionID() (int64, []byte) { return c.creds.get() }

// waitConnected blocks until the state is CONNECTED.
func (c *Client) waitConnected(ctx context.Context) error {
	for {
		c.mu.Lock()
		st, ch, closed := c.state, c.genCh, c.closed
		c.mu.Unlock()
		if closed {
			return zk.ErrClosed
		}
		if st == zk.StateConnected {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closing:
			return zk.ErrClosed
		}
	}
}

// waitStateChange blocks until the state has changed since seq (see stateSeq) and is CONNECTED;
// false when the client closes.
func (c *Client) waitStateChange(seq uint64) bool {
	for {
		c.mu.Lock()
		st, s, ch := c.state, c.seq, c.genCh
		c.mu.Unlock()
		if st == zk.StateConnected && s != seq {
			return true
		}
		select {
		case <-ch:
		case <-c.closing:
			return false
		}
	}
}

// stateSeq returns the state sequence number and the session generation.
func (c *Client) stateSeq() (seq, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq, c.gen
}

func (c *Client) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// dispatch turns library session states into CONNECTED / SUSPENDED / LOST, in order, and
// re-establishes owned ephemeral nodes on every new session before announcing it.
func (c *Client) dispatch() {
	defer c.wg.Done()
	var sessionID int64
	handshaking := false // a connection is up and has no session yet
	for {
		ev, ok := c.events.pop(c.closing)
		if !ok {
			return
		}
		switch ev.State {
		case gozk.StateConnected:
			handshaking = true
		case gozk.StateExpired:
			handshaking = false // an attempt that worked: it found the session gone
		case gozk.StateDisconnected:
			if handshaking && !c.isClosed() {
				c.fails.fail(ev.Server, errNoHandshake)
			}
			handshaking = false
		case gozk.StateHasSession:
			handshaking = false
			c.fails.connected(ev.Server)
		}
		switch ev.State {
		case gozk.StateHasSession:
			id := c.conn.SessionID()
			c.mu.Lock()
			newSession := sessionID == 0 || id != sessionID || c.lost
			c.mu.Unlock()
			if newSession && sessionID != 0 {
				c.setState(zk.StateLost, false) // the library switched sessions without an Expired event
			}
			if newSession {
				sessionID = id
				c.restoreOwned()
			}
			c.setState(zk.StateConnected, newSession)
		case gozk.StateDisconnected:
			c.setState(zk.StateSuspended, false)
		case gozk.StateExpired:
			c.setState(zk.StateLost, false)
		}
	}
}

// setState records st and calls the listeners when it changes. newSession bumps the generation
// so re-arming watches know a new session is up.
func (c *Client) setState(st zk.State, newSession bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	changed := st != c.state
	if st == zk.StateSuspended && (c.state == zk.StateLost || c.state == 0) {
		changed = false // nothing to suspend
	}
	if !changed && !newSession {
		c.mu.Unlock()
		return
	}
	if changed {
		c.state = st
	}
	if st == zk.StateLost {
		c.lost = true
	}
	if newSession {
		c.gen++
		c.lost = false
	}
	c.seq++
	close(c.genCh)
	c.genCh = make(chan struct{})
	var ls []func(zk.State)
	if changed {
		for _, id := range slices.Sorted(maps.Keys(c.listeners)) {
			ls = append(ls, c.listeners[id])
		}
	}
	c.mu.Unlock()
	if changed {
		// Losing the connection or the session is what an operator must notice.
		level := slog.LevelInfo
		if st != zk.StateConnected {
			level = slog.LevelWarn
		}
		c.log.Log(context.Background(), level, "zookeeper connection state", "state", st.String())
	}
	if st == zk.StateConnected {
		c.wakeParked()
	}
	for _, l := range ls {
		l(st)
	}
}

// AddListener implements zk.Client.
func (c *Client) AddListener(fn func(zk.State)) (remove func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextID
	c.nextID++
	c.listeners[id] = fn
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.listeners, id)
	}
}

// State implements zk.Client.
func (c *Client) State() zk.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return zk.StateLost
	}
	return c.state
}

// Close implements zk.Client: the session ends (its ephemeral nodes go), every watch ends and
// every goroutine of the client stops before Close returns (a watch whose first call is still
// running in DataWatch's caller ends when that call returns).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.closing)
		c.wmu.Lock()
		c.wClosed = true
		c.wmu.Unlock()
		if c.conn != nil {
			c.conn.Close()
		}
		c.wg.Wait()
		c.wWG.Wait()
		c.endWatches()
	})
	return nil
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// eventQueue is an unbounded FIFO of session events.
type eventQueue struct {
	mu    sync.Mutex
	items []gozk.Event
	ready chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{ready: make(chan struct{}, 1)} }

func (q *eventQueue) push(s gozk.Event) {
	q.mu.Lock()
	q.items = append(q.items, s)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *eventQueue) pop(stop <-chan struct{}) (gozk.Event, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			s := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return s, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-stop:
			return gozk.Event{}, false
		}
	}
}

// handshakeTimeout bounds the wait for a server's answer to a new connection: a third of the
// session timeout, between 1 and 5 seconds (go-zookeeper alone would wait about 7 timeouts).
func handshakeTimeout(session time.Duration) time.Duration {
	return min(max(session/3, time.Second), 5*time.Second)
}
