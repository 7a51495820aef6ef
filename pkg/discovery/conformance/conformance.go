// Package conformance is the one test suite every discovery.ServiceDiscovery passes. A Subject
// describes an implementation: how to make instances of one cluster, which replicas to register,
// and the few ways the implementations differ on purpose (a static cluster, a registration that
// does nothing, a query that lags behind a watch).
package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Subject is one implementation under test.
type Subject struct {
	// New returns a new instance; every instance one Subject makes sees the same cluster. The
	// suite closes it (t.Cleanup may close it again).
	New func(t *testing.T) discovery.ServiceDiscovery
	// Members are the replicas the suite registers, server type -> index -> address. For a static
	// cluster they are the cluster's own replicas.
	Members map[string]map[int]string
	// Static: the environment fixes the cluster: Query shows the members before any registration.
	Static bool
	// DeregisterHides: Deregister takes the replica out of Query until it registers again (false
	// where registration calls do nothing).
	DeregisterHides bool
	// Moved returns another address for a member, which Register must accept and Query then show
	// (nil where the cluster fixes addresses).
	Moved func(name string, index int, addr string) string
	// ForeignAddrKind, where the cluster fixes addresses (Moved is nil), is Register's error kind
	// for an address the cluster does not give the member; Unknown: accepted, and Query unchanged.
	ForeignAddrKind errkind.Kind
	// CloseWithdraws: once an instance closes, the others stop seeing what it registered.
	CloseWithdraws bool
	// UnknownNameKind is Query's error kind for a server type that is not one of the job's; Unknown
	// means no error and an empty map.
	UnknownNameKind errkind.Kind
	// Lag bounds how long Query may trail a change (watches); 0 means Query is current at once.
	Lag time.Duration
}

// callTimeout bounds each discovery call the suite makes.
const callTimeout = time.Minute

// Run runs the suite on s.
func Run(t *testing.T, s Subject) {
	t.Run("RegisterThenQuery", func(t *testing.T) { testRegisterQuery(t, s) })
	t.Run("QueryUnknownServerType", func(t *testing.T) { testUnknown(t, s) })
	t.Run("QueryResultIsACopy", func(t *testing.T) { testCopy(t, s) })
	t.Run("DeregisterThenRegisterAgain", func(t *testing.T) { testDeregister(t, s) })
	t.Run("RegisterAtAnotherAddress", func(t *testing.T) { testMove(t, s) })
	t.Run("PeerSeesRegistrations", func(t *testing.T) { testPeer(t, s) })
	t.Run("ConcurrentUse", func(t *testing.T) { testConcurrent(t, s) })
	t.Run("Close", func(t *testing.T) { testClose(t, s) })
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, s Subject) discovery.ServiceDiscovery {
	t.Helper()
	d := s.New(t)
	t.Cleanup(func() { d.Close() })
	return d
}

// names returns the members' server types, sorted.
func names(m map[string]map[int]string) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func registerAll(t *testing.T, d discovery.ServiceDiscovery, members map[string]map[int]string) {
	t.Helper()
	ctx := ctxFor(t)
	for _, name := range names(members) {
		for idx, addr := range members[name] {
			if err := d.Register(ctx, name, idx, addr); err != nil {
				t.Fatalf("Register(%s, %d, %s): %v", name, idx, addr, err)
			}
		}
	}
}

// expect waits (up to s.Lag, at once when 0) until Query(name) is want.
func expect(t *testing.T, s Subject, d discovery.ServiceDiscovery, name string, want map[int]string, why string) {
	t.Helper()
	ctx := ctxFor(t)
	deadline := time.Now().Add(s.Lag)
	for {
		got, err := d.Query(ctx, name)
		if err != nil {
			t.Fatalf("%s: Query(%s): %v", why, name, err)
		}
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Query(%s) = %v, want %v (waited %v)", why, name, got, want, s.Lag)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func without(m map[int]string, idx int) map[int]string {
	out := maps.Clone(m)
	delete(out, idx)
	return out
}

// firstMember returns a member, the same on every call: the first server type's lowest index.
func firstMember(s Subject) (string, int, string) {
	name := names(s.Members)[0]
	idxs := make([]int, 0, len(s.Members[name]))
	for i := range s.Members[name] {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	return name, idxs[0], s.Members[name][idxs[0]]
}

func testRegisterQuery(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	if s.Static {
		for _, name := range names(s.Members) {
			expect(t, s, d, name, s.Members[name], "static cluster before any registration")
		}
	} else {
		for _, name := range names(s.Members) {
			expect(t, s, d, name, map[int]string{}, "before any registration")
		}
	}
	registerAll(t, d, s.Members)
	for _, name := range names(s.Members) {
		expect(t, s, d, name, s.Members[name], "after registering every member")
	}
}

func testUnknown(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	registerAll(t, d, s.Members)
	got, err := d.Query(ctxFor(t), "no_such_server_type")
	if s.UnknownNameKind == errkind.Unknown {
		if err != nil || len(got) != 0 || got == nil {
			t.Fatalf("Query(unknown) = %v, %v; want an empty map and no error", got, err)
		}
		return
	}
	if err == nil || errkind.Of(err) != s.UnknownNameKind {
		t.Fatalf("Query(unknown) = %v, %v; want an error of kind %v", got, err, s.UnknownNameKind)
	}
}

func testCopy(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	registerAll(t, d, s.Members)
	name, idx, addr := firstMember(s)
	expect(t, s, d, name, s.Members[name], "after registering")
	got, err := d.Query(ctxFor(t), name)
	if err != nil {
		t.Fatal(err)
	}
	got[idx] = "mutated:1"
	got[9999] = "added:1"
	again, err := d.Query(ctxFor(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if again[idx] != addr || len(again) != len(s.Members[name]) {
		t.Fatalf("changing a Query result changed the discovery: now %v, want %v", again, s.Members[name])
	}
}

func testDeregister(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	registerAll(t, d, s.Members)
	name, idx, addr := firstMember(s)
	expect(t, s, d, name, s.Members[name], "after registering")
	if err := d.Deregister(ctxFor(t), name, idx, addr); err != nil {
		t.Fatalf("Deregister(%s, %d, %s): %v", name, idx, addr, err)
	}
	want := s.Members[name]
	if s.DeregisterHides {
		want = without(want, idx)
	}
	expect(t, s, d, name, want, "after deregistering one member")
	for _, other := range names(s.Members) {
		if other != name {
			expect(t, s, d, other, s.Members[other], "another server type after deregistering")
		}
	}
	if err := d.Register(ctxFor(t), name, idx, addr); err != nil {
		t.Fatalf("Register again: %v", err)
	}
	expect(t, s, d, name, s.Members[name], "after registering the member again")
}

// testMove registers a member again at another address: it moves there, or, where the cluster
// fixes addresses, the registration is refused or changes nothing.
func testMove(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	registerAll(t, d, s.Members)
	name, idx, addr := firstMember(s)
	if s.Moved == nil {
		err := d.Register(ctxFor(t), name, idx, "127.0.0.1:1")
		switch {
		case s.ForeignAddrKind == errkind.Unknown && err != nil:
			t.Fatalf("Register(%s, %d) at an address outside the cluster: %v, want it accepted", name, idx, err)
		case s.ForeignAddrKind != errkind.Unknown && errkind.Of(err) != s.ForeignAddrKind:
			t.Fatalf("Register(%s, %d) at an address outside the cluster: %v, want an error of kind %v", name, idx, err, s.ForeignAddrKind)
		}
		expect(t, s, d, name, s.Members[name], "after registering a member at an address outside the cluster")
		return
	}
	moved := s.Moved(name, idx, addr)
	if err := d.Register(ctxFor(t), name, idx, moved); err != nil {
		t.Fatalf("Register(%s, %d, %s) again at a new address: %v", name, idx, moved, err)
	}
	want := maps.Clone(s.Members[name])
	want[idx] = moved
	expect(t, s, d, name, want, "after registering a member at a new address")
	if err := d.Deregister(ctxFor(t), name, idx, moved); err != nil {
		t.Fatalf("Deregister the moved member: %v", err)
	}
	expect(t, s, d, name, without(want, idx), "after deregistering the moved member")
}

func testPeer(t *testing.T, s Subject) {
	leakcheck.Check(t)
	a := open(t, s)
	b := open(t, s)
	registerAll(t, a, s.Members)
	for _, name := range names(s.Members) {
		expect(t, s, b, name, s.Members[name], "another instance after the first registered")
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, name := range names(s.Members) {
		want := s.Members[name]
		if s.CloseWithdraws {
			want = map[int]string{}
		}
		expect(t, s, b, name, want, "another instance after the first closed")
	}
}

// testConcurrent registers, deregisters and queries from several goroutines at once (run with
// -race); afterwards every member is registered again and visible.
func testConcurrent(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	ctx := ctxFor(t)
	type member struct {
		name string
		idx  int
		addr string
	}
	var all []member
	for _, name := range names(s.Members) {
		for idx, addr := range s.Members[name] {
			all = append(all, member{name, idx, addr})
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(all)+8)
	for _, m := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 3; round++ {
				if err := d.Register(ctx, m.name, m.idx, m.addr); err != nil {
					errs <- fmt.Errorf("register %s.%d: %w", m.name, m.idx, err)
					return
				}
				if err := d.Deregister(ctx, m.name, m.idx, m.addr); err != nil {
					errs <- fmt.Errorf("deregister %s.%d: %w", m.name, m.idx, err)
					return
				}
			}
			if err := d.Register(ctx, m.name, m.idx, m.addr); err != nil {
				errs <- fmt.Errorf("register %s.%d: %w", m.name, m.idx, err)
			}
		}()
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 10; round++ {
				for _, name := range names(s.Members) {
					if _, err := d.Query(ctx, name); err != nil {
						errs <- fmt.Errorf("query %s: %w", name, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, name := range names(s.Members) {
		expect(t, s, d, name, s.Members[name], "after the concurrent calls")
	}
}

func testClose(t *testing.T, s Subject) {
	leakcheck.Check(t)
	d := open(t, s)
	registerAll(t, d, s.Members)
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	name, idx, addr := firstMember(s)
	ctx := ctxFor(t)
	if _, err := d.Query(ctx, name); !errors.Is(err, discovery.ErrClosed) {
		t.Errorf("Query after Close: %v, want ErrClosed", err)
	}
	if err := d.Register(ctx, name, idx, addr); !errors.Is(err, discovery.ErrClosed) {
		t.Errorf("Register after Close: %v, want ErrClosed", err)
	}
	if err := d.Deregister(ctx, name, idx, addr); !errors.Is(err, discovery.ErrClosed) {
		t.Errorf("Deregister after Close: %v, want ErrClosed", err)
	}
}
