package zkreal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/monolith-go/monolith/internal/syncbuf"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

const sessionTimeout = 4 * time.Second

func connect(t testing.TB, srv *zktest.Server, opts Options) *Client {
	t.Helper()
	opts.Servers = []string{srv.Addr()}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = sessionTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// stateLog records listener calls.
type stateLog struct {
	mu     sync.Mutex
	states []zk.State
}

func (l *stateLog) add(s zk.State) { l.mu.Lock(); l.states = append(l.states, s); l.mu.Unlock() }
func (l *stateLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, s := range l.states {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, ",")
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, within)
	return 0
}

// latest keeps the last value a watch delivered.
type latest struct {
	mu     sync.Mutex
	val    string
	events []string
}

func (l *latest) set(v string, ev *zk.WatchEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.val = v
	name := "first"
	if ev != nil {
		name = ev.Type.String()
	}
	l.events = append(l.events, name)
}

func (l *latest) get() (string, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.val, append([]string(nil), l.events...)
}

// TestSessionExpiry: after the session expires, listeners see LOST then CONNECTED, every watch
// delivers the current state again, and owned ephemeral nodes exist again, within 2x the session
// timeout; changes after that keep flowing.
func TestSessionExpiry(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	var logs syncbuf.Buffer
	c := connect(t, srv, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	other := connect(t, srv, Options{})
	ctx := tctx(t)
	var states stateLog
	c.AddListener(states.add)

	if err := c.RegisterEphemeral(ctx, "/svc/replica-1", []byte("addr")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(ctx, "/cfg", []byte("v1"), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var data, kids latest
	dw, err := c.DataWatch("/cfg", func(d []byte, st *zk.Stat, ev *zk.WatchEvent) bool { data.set(string(d), ev); return true })
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Stop()
	cw, err := c.ChildrenWatch("/svc", func(ch []string, ev *zk.WatchEvent) bool { kids.set(fmt.Sprint(ch), ev); return true })
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Stop()

	oldID, passwd := c.SessionID()
	if err := srv.ExpireSession(oldID, passwd); err != nil {
		t.Fatal(err)
	}
	// While the session is gone another writer changes the watched node.
	if _, err := other.Set(ctx, "/cfg", []byte("v2"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 2*sessionTimeout, "recovered from expiry", func() bool {
		id, _ := c.SessionID()
		st, err := other.Exists(ctx, "/svc/replica-1")
		v, _ := data.get()
		k, _ := kids.get()
		return id != oldID && err == nil && st != nil && st.EphemeralOwner == id && v == "v2" && k == "[replica-1]" &&
			strings.HasSuffix(states.String(), "LOST,CONNECTED")
	})
	t.Logf("recovered %v after the expiry; states %s", took, states.String())
	// Losing the session is a warning; the new session is information.
	for _, want := range []string{`"level":"WARN","msg":"zookeeper connection state","state":"LOST"`,
		`"level":"INFO","msg":"zookeeper connection state","state":"CONNECTED"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if _, evs := data.get(); !contains(evs, "NONE") {
		t.Errorf("data watch events %v: want a NONE re-arm delivery", evs)
	}
	// New changes are delivered on the new session.
	if _, err := other.Set(ctx, "/cfg", []byte("v3"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "change after recovery", func() bool { v, _ := data.get(); return v == "v3" })
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestServerRestart: the client reconnects after a restart shorter than the session timeout and
// keeps its session (and so its ephemeral nodes): SUSPENDED then CONNECTED, no LOST.
func TestServerRestart(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{SessionTimeout: 10 * time.Second})
	ctx := tctx(t)
	var states stateLog
	c.AddListener(states.add)
	if _, err := c.Create(ctx, "/eph", nil, zk.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	id, _ := c.SessionID()
	srv.Restart()
	eventually(t, 15*time.Second, "reconnected", func() bool { return states.String() == "SUSPENDED,CONNECTED" })
	if id2, _ := c.SessionID(); id2 != id {
		t.Fatalf("session changed across a short restart: %x -> %x", id, id2)
	}
	if st, err := c.Exists(ctx, "/eph"); err != nil || st == nil {
		t.Fatalf("ephemeral node lost across a restart: %v %v", st, err)
	}
}

// TestReadsRetryWritesReportAmbiguity: while the server is down reads fail with ErrConnectionLoss
// after bounded retries; a write says its outcome is unknown.
func TestReadsRetryWritesReportAmbiguity(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{SessionTimeout: 10 * time.Second,
		ReadRetry: zk.RetryPolicy{MaxTries: 2, Delay: 50 * time.Millisecond}})
	ctx := tctx(t)
	if _, err := c.Create(ctx, "/n", []byte("x"), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if _, _, err := c.Get(ctx, "/n"); !errors.Is(err, zk.ErrConnectionLoss) || !strings.Contains(err.Error(), "gave up after 2 tries") {
		t.Errorf("read while down: %v", err)
	}
	if _, err := c.Set(ctx, "/n", []byte("y"), zk.AnyVersion); !errors.Is(err, zk.ErrConnectionLoss) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("write while down: %v", err)
	}
	srv.Start()
	eventually(t, 15*time.Second, "reconnect", func() bool { return c.State() == zk.StateConnected })
	if d, _, err := c.Get(ctx, "/n"); err != nil || string(d) != "x" {
		t.Fatalf("read after restart: %q %v", d, err)
	}
}

// TestEphemeralOwnership: registering a path held by another session replaces the node, so it
// belongs to (and dies with) the registering session.
func TestEphemeralOwnership(t *testing.T) {
	srv := zktest.Start(t)
	a := connect(t, srv, Options{})
	b := connect(t, srv, Options{})
	ctx := tctx(t)
	if _, err := a.Create(ctx, "/r", []byte("a"), zk.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.RegisterEphemeral(ctx, "/r", []byte("b")); err != nil {
		t.Fatal(err)
	}
	data, st, err := a.Get(ctx, "/r")
	bid, _ := b.SessionID()
	if err != nil || string(data) != "b" || st.EphemeralOwner != bid {
		t.Fatalf("node after register: %q owner %x (b is %x) %v", data, st.EphemeralOwner, bid, err)
	}
	// Registering again on the owning session just updates the data.
	if err := b.RegisterEphemeral(ctx, "/r", []byte("b2")); err != nil {
		t.Fatal(err)
	}
	if err := b.Unregister(ctx, "/r"); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Exists(ctx, "/r"); err != nil || st != nil {
		t.Fatalf("unregistered node still there: %v %v", st, err)
	}
}

func TestChroot(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{Chroot: "/monolith/test"})
	plain := connect(t, srv, Options{})
	ctx := tctx(t)
	p, err := c.Create(ctx, "/a/seq-", nil, zk.CreateOptions{MakePath: true, Sequence: true})
	if err != nil {
		t.Fatal(err)
	}
	if p != "/a/seq-0000000000" {
		t.Fatalf("created %q", p)
	}
	if st, err := plain.Exists(ctx, "/monolith/test/a/seq-0000000000"); err != nil || st == nil {
		t.Fatalf("not under the chroot: %v %v", st, err)
	}
	kids, err := c.Children(ctx, "/")
	if err != nil || fmt.Sprint(kids) != "[a]" {
		t.Fatalf("children of chroot root: %v %v", kids, err)
	}
}

// TestNoGoroutineLeak: Close stops every goroutine the client started (watches included).
func TestNoGoroutineLeak(t *testing.T) {
	srv := zktest.Start(t)
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		c := connect(t, srv, Options{})
		ctx := tctx(t)
		c.RegisterEphemeral(ctx, fmt.Sprintf("/leak/%d", i), nil)
		w, err := c.DataWatch("/leak", func([]byte, *zk.Stat, *zk.WatchEvent) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		_ = w
		if _, err := c.ChildrenWatch("/leak", func([]string, *zk.WatchEvent) bool { return true }); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	eventually(t, 5*time.Second, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= before })
}

func TestContextDeadline(t *testing.T) {
	srv := zktest.Start(t)
	c := connect(t, srv, Options{SessionTimeout: 10 * time.Second})
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Create(ctx, "/x", nil, zk.CreateOptions{})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("create with a 200ms deadline on a stopped server: %v after %v", err, time.Since(start))
	}
	srv.Start()
}

// TestDigestAuthSurvivesNewSession: credentials are re-sent on every connection, so a node only the
// authenticated user may read stays readable after the session expires and a new one starts.
func TestDigestAuthSurvivesNewSession(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	acl := gozk.DigestACL(gozk.PermAll, "agent", "secret")
	c := connect(t, srv, Options{Auth: []Auth{{Scheme: "digest", Data: []byte("agent:secret")}}, ACL: acl})
	anon := connect(t, srv, Options{})
	ctx := tctx(t)
	if _, err := c.Create(ctx, "/private", []byte("p"), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := anon.Get(ctx, "/private"); err == nil {
		t.Fatal("an unauthenticated client read a digest-protected node")
	}
	id, passwd := c.SessionID()
	if err := srv.ExpireSession(id, passwd); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*sessionTimeout, "new session", func() bool {
		nid, _ := c.SessionID()
		return nid != id && c.State() == zk.StateConnected
	})
	if d, _, err := c.Get(ctx, "/private"); err != nil || string(d) != "p" {
		t.Fatalf("read after a new session: %q %v", d, err)
	}
}

// TestOwnedRestoredInRegistrationOrder: on every new session the owned nodes come back one at a
// time in the order they were first registered (a service info before the bindings that name
// it), whatever their paths; registering a node again changes its data, not its place; a node
// unregistered and registered again goes last.
func TestOwnedRestoredInRegistrationOrder(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	c := connect(t, srv, Options{})
	other := connect(t, srv, Options{})
	ctx := tctx(t)
	register := func(path, data string) {
		t.Helper()
		if err := c.RegisterEphemeral(ctx, path, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	// Paths neither sorted nor reverse sorted, in more than one parent, so that neither path
	// order nor map order passes by chance (10! orders).
	paths := []string{"/bz/container_service/c1", "/bz/binding/m/ps_3:c1", "/bz/binding/m/entry:c1",
		"/bz/binding/n/ps_0:c1", "/bz/binding/m/ps_0:c1", "/a/x", "/z/y", "/bz/binding/m/ps_1:c1",
		"/bz/binding/n/entry:c1", "/m/q"}
	for _, p := range paths {
		register(p, "v1")
	}
	register(paths[0], "v2") // a new report of the service info keeps its place
	if err := c.Unregister(ctx, paths[5]); err != nil {
		t.Fatal(err)
	}
	register(paths[5], "again") // back, last
	want := append(append(append([]string(nil), paths[:5]...), paths[6:]...), paths[5])
	wantData := map[string]string{paths[0]: "v2", paths[5]: "again"}

	for round := range 2 {
		oldID, passwd := c.SessionID()
		if err := srv.ExpireSession(oldID, passwd); err != nil {
			t.Fatal(err)
		}
		var czxids []int64
		eventually(t, 2*sessionTimeout, fmt.Sprintf("round %d: owned nodes back", round), func() bool {
			id, _ := c.SessionID()
			czxids = czxids[:0]
			for _, p := range want {
				data, st, err := other.Get(ctx, p)
				if err != nil || id == oldID || st.EphemeralOwner != id {
					return false
				}
				if w, ok := wantData[p]; !ok && string(data) != "v1" || ok && string(data) != w {
					t.Fatalf("round %d: %s holds %q", round, p, data)
				}
				czxids = append(czxids, st.Czxid)
			}
			return true
		})
		for i := 1; i < len(czxids); i++ {
			if czxids[i] <= czxids[i-1] {
				t.Fatalf("round %d: %s (czxid %d) was re-created before %s (czxid %d); want registration order %v",
					round, want[i], czxids[i], want[i-1], czxids[i-1], want)
			}
		}
	}
}
