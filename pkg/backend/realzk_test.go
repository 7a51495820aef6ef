package backend

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// realSessionTimeout is short so that an expired session is noticed quickly; the server's tick
// of 200 ms allows sessions of 400 ms to 4 s.
const realSessionTimeout = 2 * time.Second

func startZK(t testing.TB) *zktest.Server {
	return zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
}

func openReal(t testing.TB, srv *zktest.Server, bzid string) *ZKBackend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Open(ctx, Config{Bzid: bzid, Logger: quiet},
		zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: realSessionTimeout, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func connectReal(t testing.TB, srv *zktest.Server) *zkreal.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: realSessionTimeout, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func settle(t testing.TB, b *ZKBackend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRealZooKeeper runs the backend against one real ZooKeeper server shared by its subtests.
func TestRealZooKeeper(t *testing.T) {
	srv := startZK(t)
	t.Run("Basic", func(t *testing.T) { testRealBasic(t, srv) })
	t.Run("SessionExpiry", func(t *testing.T) { testRealSessionExpiry(t, srv) })
	t.Run("StaleEphemeralTakenOver", func(t *testing.T) { testRealStaleEphemeral(t, srv) })
	t.Run("ConfigChanges", func(t *testing.T) { testRealConfigChanges(t, srv) })
}

// testRealBasic is backends_test.py's scenario on a real server: watches fire asynchronously, and
// Settle waits for them.
func testRealBasic(t *testing.T, srv *zktest.Server) {
	leakcheck.Check(t)
	b := openReal(t, srv, "gip_basic")
	ctx := tctx(t)
	layout := "/gip_basic/layouts/test_layout/mixed"
	if err := b.ReportServiceInfo(ctx, container, serviceInfo); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := b.RegisterLayoutCallback(ctx, layout, rec.callback); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.ServiceInfo(ctx, container); err != nil || !ok || !reflect.DeepEqual(got, serviceInfo) {
		t.Fatalf("ServiceInfo = %+v, %v, %v", got, ok, err)
	}
	for _, sm := range sms("entry", "ps_0", "ps_1", "ps_2") {
		if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str("/p/" + sm.SubGraph), str("latest")}); err != nil {
			t.Fatal(err)
		}
		if err := b.AddToLayout(ctx, layout, sm); err != nil {
			t.Fatal(err)
		}
		settle(t, b)
	}
	want := []string{"test_ffm_model:entry=/p/entry/latest", "test_ffm_model:ps_0=/p/ps_0/latest",
		"test_ffm_model:ps_1=/p/ps_1/latest", "test_ffm_model:ps_2=/p/ps_2/latest"}
	if got := names(rec.last()); !slices.Equal(got, want) || rec.count() != 5 {
		t.Fatalf("layout %v after %d calls, want %v after 5", got, rec.count(), want)
	}
	if err := b.RemoveFromLayout(ctx, layout, sms("entry")[0]); err != nil {
		t.Fatal(err)
	}
	settle(t, b)
	if got := names(rec.last()); !slices.Equal(got, want[1:]) {
		t.Fatalf("layout after removing entry: %v", got)
	}
	if err := b.SubscribeModel(ctx, "test_ffm_model"); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("ps_0", "ps_1", "ps_2")); err != nil {
		t.Fatal(err)
	}
	settle(t, b)
	wantMap := ServiceMap{"test_ffm_model": {"ps_0": {serviceInfo}, "ps_1": {serviceInfo}, "ps_2": {serviceInfo}}}
	if got := b.ServiceMap(); !reflect.DeepEqual(got, wantMap) {
		t.Errorf("service map %+v, want %+v", got, wantMap)
	}
	if name, targets, err := b.SyncTargets("ps_1"); err != nil || name != "test_ffm_model:ps_1" || !slices.Equal(targets, []string{"localhost:8888"}) {
		t.Errorf("SyncTargets(ps_1) = %q, %v, %v", name, targets, err)
	}
}

// testRealSessionExpiry kills the backend's session: its bindings and service info come back
// (owned by the new session) within twice the session timeout, and the watches deliver what
// changed meanwhile.
func testRealSessionExpiry(t *testing.T, srv *zktest.Server) {
	leakcheck.Check(t)
	b := openReal(t, srv, "gip_expiry")
	other := connectReal(t, srv)
	ctx := tctx(t)
	layout := "/gip_expiry/layouts/l"
	for _, sm := range sms("entry", "ps_0") {
		if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str("/p/" + sm.SubGraph), str("latest")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ReportServiceInfo(ctx, container, serviceInfo); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, layout, sms("entry")[0]); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := b.RegisterLayoutCallback(ctx, layout, rec.callback); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry", "ps_0")); err != nil {
		t.Fatal(err)
	}
	settle(t, b)

	client := b.Client().(*zkreal.Client)
	var mu sync.Mutex
	var newSession time.Time // when the new session was announced
	remove := client.AddListener(func(s zk.State) {
		mu.Lock()
		defer mu.Unlock()
		if s == zk.StateConnected && newSession.IsZero() {
			newSession = time.Now()
		}
	})
	defer remove()
	oldID, passwd := client.SessionID()
	if err := srv.ExpireSession(oldID, passwd); err != nil {
		t.Fatal(err)
	}
	expired := time.Now()
	// While the backend has no session, another agent comes up and the layout grows.
	pod2 := Container{"psm;lf;default", "pod-2"}
	info2 := ContainerServiceInfo{GRPC: str("10.0.0.2:1")}
	if _, err := other.Create(ctx, "/gip_expiry/container_service/"+pod2.String(), info2.Serialize(), zk.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(ctx, "/gip_expiry/binding/test_ffm_model/entry:"+pod2.String(), nil, zk.CreateOptions{Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	if err := other.EnsurePath(ctx, layout+"/test_ffm_model:ps_0"); err != nil {
		t.Fatal(err)
	}

	wantMap := ServiceMap{"test_ffm_model": {"entry": {serviceInfo, info2}, "ps_0": {serviceInfo}}}
	wantLayout := []string{"test_ffm_model:entry=/p/entry/latest", "test_ffm_model:ps_0=/p/ps_0/latest"}
	mine := []string{"/gip_expiry/container_service/default:asdf", "/gip_expiry/binding/test_ffm_model/entry:default:asdf",
		"/gip_expiry/binding/test_ffm_model/ps_0:default:asdf"}
	took := eventually(t, 2*realSessionTimeout, "bindings, service info and watches back after the expiry", func() bool {
		id, _ := client.SessionID()
		if id == oldID {
			return false
		}
		for _, p := range mine {
			st, err := other.Exists(ctx, p)
			if err != nil || st == nil || st.EphemeralOwner != id {
				return false
			}
		}
		return slices.Equal(names(rec.last()), wantLayout) && reflect.DeepEqual(b.ServiceMap(), wantMap)
	})
	mu.Lock()
	t.Logf("back %v after the expiry, %v after the new session was announced (%v polling)",
		time.Since(expired), time.Since(newSession), took)
	mu.Unlock()
	// And it goes on: a sync on the new session.
	if err := b.SyncAvailableSavedModels(ctx, container, sms("ps_0")); err != nil {
		t.Fatal(err)
	}
	if st, err := other.Exists(ctx, mine[1]); err != nil || st != nil {
		t.Errorf("entry binding after the sync: %+v, %v; want it gone", st, err)
	}
	// Let the binding callbacks finish before Close cancels their reads: a zkreal read whose
	// context ends mid-call races with the call goroutine it abandons.
	settle(t, b)
}

// testRealStaleEphemeral: a binding node left by a session that has not expired yet (a restarted
// agent's previous run) is taken over, so it does not vanish when that session ends.
func testRealStaleEphemeral(t *testing.T, srv *zktest.Server) {
	leakcheck.Check(t)
	ctx := tctx(t)
	stale, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: realSessionTimeout, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	path := "/gip_stale/binding/test_ffm_model/entry:default:asdf"
	if _, err := stale.Create(ctx, path, nil, zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
		t.Fatal(err)
	}
	b := openReal(t, srv, "gip_stale")
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry")); err != nil {
		t.Fatal(err)
	}
	stale.Close()
	id, _ := b.Client().(*zkreal.Client).SessionID()
	st, err := b.Client().Exists(ctx, path)
	if err != nil || st == nil || st.EphemeralOwner != id {
		t.Errorf("binding after the stale session ended: %+v, %v; want it owned by %x", st, err, id)
	}
}

// testRealConfigChanges: on a real server, changes of the layout and of its deploy configs by
// another client reach the callback, never concurrently, and the last call has the final state.
func testRealConfigChanges(t *testing.T, srv *zktest.Server) {
	leakcheck.Check(t)
	b := openReal(t, srv, "gip_cfg")
	other := connectReal(t, srv)
	ctx := tctx(t)
	layout := "/gip_cfg/layouts/l"
	var mu sync.Mutex
	active, overlaps := 0, 0
	var last []string
	cb := func(entries []LayoutEntry) bool {
		mu.Lock()
		active++
		if active > 1 {
			overlaps++
		}
		mu.Unlock()
		time.Sleep(time.Millisecond) // widen the window for an overlap
		mu.Lock()
		active--
		last = names(entries)
		mu.Unlock()
		return true
	}
	if err := b.RegisterLayoutCallback(ctx, layout, cb); err != nil {
		t.Fatal(err)
	}
	cfg := func(sg string, v int) []byte {
		return SavedModelDeployConfig{str(fmt.Sprintf("/%s/v%d", sg, v)), str("latest")}.Serialize()
	}
	for i := range 5 {
		sg := fmt.Sprintf("ps_%d", i)
		if _, err := other.Create(ctx, "/gip_cfg/saved_models/m/"+sg, cfg(sg, 0), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
		if err := other.EnsurePath(ctx, layout+"/m:"+sg); err != nil {
			t.Fatal(err)
		}
	}
	for v := 1; v <= 3; v++ {
		for i := range 5 {
			sg := fmt.Sprintf("ps_%d", i)
			if _, err := other.Set(ctx, "/gip_cfg/saved_models/m/"+sg, cfg(sg, v), zk.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle(t, b)
	mu.Lock()
	defer mu.Unlock()
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("m:ps_%d=/ps_%d/v3/latest", i, i))
	}
	if !slices.Equal(last, want) || overlaps != 0 {
		t.Errorf("last layout %v with %d overlapping calls; want %v and none", last, overlaps, want)
	}
}
