package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

const bzid = "gip"

var (
	container   = Container{"default", "asdf"}
	serviceInfo = ContainerServiceInfo{GRPC: str("localhost:8888"), HTTP: str("localhost:8889"),
		Archon: str("localhost:8890"), Agent: str("localhost:8891"), IDC: str("IDC")}
	layoutPath = "/gip/layouts/test_layout/mixed"
)

// setUp is backends_test.py's setUpClass: a backend on a fake ZooKeeper that has reported its
// service info and follows the layout.
func setUp(t *testing.T) (*ZKBackend, *zkfake.Fake, *recorder) {
	t.Helper()
	leakcheck.Check(t)
	b, c := newFake(t, bzid)
	ctx := tctx(t)
	if err := b.ReportServiceInfo(ctx, container, serviceInfo); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.callback); err != nil {
		t.Fatal(err)
	}
	return b, c, rec
}

func sms(subs ...string) []SavedModel {
	out := make([]SavedModel, len(subs))
	for i, s := range subs {
		out[i] = SavedModel{"test_ffm_model", s}
	}
	return out
}

func TestRegisterService(t *testing.T) {
	b, c, _ := setUp(t)
	ctx := tctx(t)
	got, ok, err := b.ServiceInfo(ctx, container)
	if err != nil || !ok || !reflect.DeepEqual(got, serviceInfo) {
		t.Fatalf("ServiceInfo = %+v, %v, %v; want %+v", got, ok, err, serviceInfo)
	}
	st, err := c.Exists(ctx, "/gip/container_service/default:asdf")
	if err != nil || st == nil || st.EphemeralOwner == 0 {
		t.Errorf("service info node: %+v, %v; want an ephemeral node", st, err)
	}
	if _, ok, err := b.ServiceInfo(ctx, Container{"no", "such"}); ok || err != nil {
		t.Errorf("missing container: ok %v, err %v; want not found and no error", ok, err)
	}
	if _, err := c.Set(ctx, "/gip/container_service/default:asdf", []byte("{"), zk.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ServiceInfo(ctx, container); errkind.Of(err) != errkind.Value {
		t.Errorf("bad JSON: err %v, want a Value error", err)
	}
}

func TestLayoutCallback(t *testing.T) {
	b, _, rec := setUp(t)
	ctx := tctx(t)
	if got := rec.last(); rec.count() != 1 || len(got) != 0 {
		t.Fatalf("first call: %d calls, last %v; want one call with an empty layout", rec.count(), got)
	}
	base := t.TempDir()
	basePath := func(sg string) string { return filepath.Join(base, "test_ffm_model/exported_models", sg) }
	for _, sm := range sms("entry", "ps_0", "ps_1", "ps_2") {
		if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str(basePath(sm.SubGraph)), str("latest")}); err != nil {
			t.Fatal(err)
		}
		if err := b.AddToLayout(ctx, layoutPath, sm); err != nil {
			t.Fatal(err)
		}
	}
	want := func(subs ...string) []LayoutEntry {
		var out []LayoutEntry
		for _, sm := range sms(subs...) {
			out = append(out, LayoutEntry{sm, SavedModelDeployConfig{str(basePath(sm.SubGraph)), str("latest")}})
		}
		return out
	}
	if got := rec.last(); !reflect.DeepEqual(got, want("entry", "ps_0", "ps_1", "ps_2")) {
		t.Fatalf("after adding: %v", names(got))
	}
	if err := b.RemoveFromLayout(ctx, layoutPath, SavedModel{"test_ffm_model", "entry"}); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); !reflect.DeepEqual(got, want("ps_0", "ps_1", "ps_2")) {
		t.Fatalf("after removing entry: %v", names(got))
	}
	// One call per change: the initial one, four adds, one removal.
	if rec.count() != 6 {
		t.Errorf("%d callback calls, want 6", rec.count())
	}
	// Removing what is not there changes nothing.
	if err := b.RemoveFromLayout(ctx, layoutPath, SavedModel{"test_ffm_model", "not_there"}); err != nil || rec.count() != 6 {
		t.Errorf("removing a missing child: err %v, %d calls", err, rec.count())
	}
}

func TestSyncAvailableModels(t *testing.T) {
	b, c, _ := setUp(t)
	ctx := tctx(t)
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry", "ps_0", "ps_1")); err != nil {
		t.Fatal(err)
	}
	for _, sg := range []string{"entry", "ps_0", "ps_1"} {
		st, err := c.Exists(ctx, "/gip/binding/test_ffm_model/"+sg+":default:asdf")
		if err != nil || st == nil || st.EphemeralOwner == 0 {
			t.Errorf("binding of %s: %+v, %v; want an ephemeral node", sg, st, err)
		}
	}
	// The set difference: ps_1 goes, ps_2 comes, the others stay untouched.
	before, _, _ := c.Get(ctx, "/gip/binding/test_ffm_model/entry:default:asdf")
	_, st0, _ := c.Get(ctx, "/gip/binding/test_ffm_model/entry:default:asdf")
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry", "ps_0", "ps_2", "ps_0")); err != nil {
		t.Fatal(err)
	}
	got := under(tree(t, c, "/gip"), "/gip/binding/test_ffm_model/")
	wantTree := []string{"/gip/binding/test_ffm_model/entry:default:asdf=", "/gip/binding/test_ffm_model/ps_0:default:asdf=",
		"/gip/binding/test_ffm_model/ps_2:default:asdf="}
	if !slices.Equal(got, wantTree) {
		t.Errorf("bindings %v, want %v", got, wantTree)
	}
	_, st1, _ := c.Get(ctx, "/gip/binding/test_ffm_model/entry:default:asdf")
	if st1.Mzxid != st0.Mzxid || len(before) != 0 {
		t.Errorf("an unchanged binding was written again")
	}
}

func TestServiceMap(t *testing.T) {
	b, _, _ := setUp(t)
	ctx := tctx(t)
	for _, sm := range sms("entry", "ps_0") {
		if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str("/p/" + sm.SubGraph), str("latest")}); err != nil {
			t.Fatal(err)
		}
		if err := b.AddToLayout(ctx, layoutPath, sm); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry", "ps_0")); err != nil {
		t.Fatal(err)
	}
	want := ServiceMap{"test_ffm_model": {"ps_0": {serviceInfo}, "entry": {serviceInfo}}}
	// (backends_test.py's assertTrue(get_service_map(), expected) never compared them.)
	if got := b.ServiceMap(); !reflect.DeepEqual(got, want) {
		t.Errorf("service map %+v, want %+v", got, want)
	}
	// The map is a copy.
	m := b.ServiceMap()
	m["test_ffm_model"]["entry"][0].GRPC = str("changed")
	if got := b.ServiceMap(); !reflect.DeepEqual(got, want) {
		t.Errorf("the service map shares memory with its caller")
	}
	// A model leaving the layout leaves the map; its binding watch stops at the next change and
	// a new one starts when the model comes back.
	for _, sm := range sms("entry", "ps_0") {
		if err := b.RemoveFromLayout(ctx, layoutPath, sm); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.ServiceMap(); len(got) != 0 {
		t.Errorf("service map after emptying the layout: %+v", got)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry")); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, layoutPath, sms("entry")[0]); err != nil {
		t.Fatal(err)
	}
	want = ServiceMap{"test_ffm_model": {"entry": {serviceInfo}}}
	if got := b.ServiceMap(); !reflect.DeepEqual(got, want) {
		t.Errorf("service map after the model came back: %+v, want %+v", got, want)
	}
}

func TestSyncBackend(t *testing.T) {
	b, _, _ := setUp(t)
	ctx := tctx(t)
	if _, _, err := b.SyncTargets("ps_1"); errkind.Of(err) != errkind.Precondition {
		t.Errorf("SyncTargets before SubscribeModel: %v, want a Precondition error", err)
	}
	if err := b.SubscribeModel(ctx, "test_ffm_model"); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("ps_0", "ps_1", "ps_2")); err != nil {
		t.Fatal(err)
	}
	name, targets, err := b.SyncTargets("ps_1")
	if err != nil || name != "test_ffm_model:ps_1" || !slices.Equal(targets, []string{"localhost:8888"}) {
		t.Errorf("SyncTargets(ps_1) = %q, %v, %v", name, targets, err)
	}
	name, targets, err = b.SyncTargets("missing")
	if err != nil || name != "test_ffm_model:missing" || targets == nil || len(targets) != 0 {
		t.Errorf("SyncTargets(missing) = %q, %#v, %v", name, targets, err)
	}
	if err := b.SubscribeModel(ctx, "test_ffm_model"); err != nil {
		t.Errorf("subscribing again to the same model: %v", err)
	}
	if err := b.SubscribeModel(ctx, "other"); errkind.Of(err) != errkind.Precondition {
		t.Errorf("subscribing to a second model: %v, want a Precondition error", err)
	}
	// A layout change does not drop the subscribed model.
	if err := b.DeclSavedModel(ctx, SavedModel{"m2", "entry"}, SavedModelDeployConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, layoutPath, SavedModel{"m2", "entry"}); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("ps_1")); err != nil {
		t.Fatal(err)
	}
	if _, targets, _ := b.SyncTargets("ps_1"); !slices.Equal(targets, []string{"localhost:8888"}) {
		t.Errorf("after a layout change: targets %v", targets)
	}
	if _, targets, _ := b.SyncTargets("ps_0"); len(targets) != 0 {
		t.Errorf("after ps_0 was unbound: targets %v", targets)
	}
}

// Children that are not model:sub_graph, or whose deploy config is missing or unreadable, are
// skipped; the others keep their order.
func TestLayoutSkipsBadChildren(t *testing.T) {
	b, c, rec := setUp(t)
	ctx := tctx(t)
	if err := b.DeclSavedModel(ctx, SavedModel{"m", "a"}, SavedModelDeployConfig{str("/a"), nil}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeclSavedModel(ctx, SavedModel{"m", "c"}, SavedModelDeployConfig{str("/c"), str("latest")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/gip/saved_models/m/bad", []byte("not json"), zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, child := range []string{"m:c", "nocolon", "m:b", "m:bad", "m:a:extra"} {
		if err := c.EnsurePath(ctx, layoutPath+"/"+child); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"m:a=/a/<None>", "m:c=/c/latest"}
	if got := names(rec.last()); !slices.Equal(got, want) {
		t.Errorf("layout %v, want %v", got, want)
	}
}

// A deleted layout node is an empty layout; once re-created it is followed again.
func TestLayoutDeletedAndRecreated(t *testing.T) {
	b, c, rec := setUp(t)
	ctx := tctx(t)
	sm := SavedModel{"m", "entry"}
	if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str("/e"), str("latest")}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, layoutPath, sm); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, layoutPath, zk.DeleteOptions{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(); got == nil || len(got) != 0 {
		t.Fatalf("after deleting the layout: %v, want an empty layout", names(got))
	}
	if err := b.AddToLayout(ctx, layoutPath, sm); err != nil {
		t.Fatal(err)
	}
	if got := names(rec.last()); !slices.Equal(got, []string{"m:entry=/e/latest"}) {
		t.Errorf("after re-creating the layout: %v", got)
	}
	// Registering the same path again keeps the one watch.
	other := newRecorder()
	if err := b.RegisterLayoutCallback(ctx, layoutPath, other.callback); err != nil || other.count() != 0 {
		t.Errorf("second registration: err %v, %d calls; want no new watch", err, other.count())
	}
}

// A callback that returns false stops its watch, and the path can be watched again.
func TestLayoutCallbackStops(t *testing.T) {
	leakcheck.Check(t)
	b, _ := newFake(t, bzid)
	ctx := tctx(t)
	calls := 0
	stopAtSecond := func([]LayoutEntry) bool { calls++; return calls < 2 }
	if err := b.RegisterLayoutCallback(ctx, layoutPath, stopAtSecond); err != nil {
		t.Fatal(err)
	}
	for _, sg := range []string{"a", "b"} {
		if err := b.AddToLayout(ctx, layoutPath, SavedModel{"m", sg}); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("%d calls, want 2 (the watch stops when the callback returns false)", calls)
	}
	rec := newRecorder()
	if err := b.RegisterLayoutCallback(ctx, layoutPath, rec.callback); err != nil || rec.count() != 1 {
		t.Errorf("registering again: err %v, %d calls; want a new watch", err, rec.count())
	}
	if err := b.RegisterLayoutCallback(ctx, layoutPath, nil); errkind.Of(err) != errkind.Value {
		t.Errorf("nil callback: %v, want a Value error", err)
	}
}

// An expired session takes the bindings and the service info with it; they are back as soon as
// the new session is, and the service map follows.
func TestSessionExpiryRestores(t *testing.T) {
	b, c, _ := setUp(t)
	ctx := tctx(t)
	if err := b.DeclSavedModel(ctx, sms("entry")[0], SavedModelDeployConfig{str("/e"), str("latest")}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddToLayout(ctx, layoutPath, sms("entry")[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry", "ps_0")); err != nil {
		t.Fatal(err)
	}
	before := tree(t, c, "/gip")
	wantMap := ServiceMap{"test_ffm_model": {"entry": {serviceInfo}, "ps_0": {serviceInfo}}}
	if err := c.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	// The restore runs in the backend's goroutine once CONNECTED is announced.
	eventually(t, 5*time.Second, "bindings and service info restored", func() bool {
		return slices.Equal(tree(t, c, "/gip"), before) && reflect.DeepEqual(b.ServiceMap(), wantMap)
	})
	for _, p := range []string{"/gip/container_service/default:asdf", "/gip/binding/test_ffm_model/ps_0:default:asdf"} {
		st, err := c.Exists(ctx, p)
		if err != nil || st == nil || st.EphemeralOwner != c.SessionID() {
			t.Errorf("%s: %+v, %v; want an ephemeral node of the new session %x", p, st, err, c.SessionID())
		}
	}
	// The backend goes on as before.
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry")); err != nil {
		t.Fatal(err)
	}
	if got := under(tree(t, c, "/gip"), "/gip/binding/test_ffm_model/"); !slices.Equal(got, []string{"/gip/binding/test_ffm_model/entry:default:asdf="}) {
		t.Errorf("bindings after the restore and a sync: %v", got)
	}
}

// While the session is lost, a sync and a report are recorded and applied on the new session.
func TestSyncWhileLost(t *testing.T) {
	b, c, _ := setUp(t)
	ctx := tctx(t)
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry")); err != nil {
		t.Fatal(err)
	}
	other := Container{"psm;lf;default", "pod-2"}
	var lostErrs []error
	remove := c.AddListener(func(s zk.State) {
		if s != zk.StateLost {
			return
		}
		// The backend's listener ran first: it knows the session is lost.
		lostErrs = append(lostErrs, b.SyncAvailableSavedModels(ctx, container, sms("ps_0", "ps_1")),
			b.ReportServiceInfo(ctx, other, ContainerServiceInfo{GRPC: str("g")}))
	})
	defer remove()
	if err := c.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(lostErrs...); err != nil || len(lostErrs) != 2 {
		t.Fatalf("calls while lost: %v", err)
	}
	want := []string{"/gip/binding/test_ffm_model/ps_0:default:asdf=", "/gip/binding/test_ffm_model/ps_1:default:asdf=",
		"/gip/container_service/default:asdf=" + string(serviceInfo.Serialize()),
		"/gip/container_service/psm;lf;default:pod-2=" + string(ContainerServiceInfo{GRPC: str("g")}.Serialize())}
	eventually(t, 5*time.Second, "restored", func() bool {
		got := append(under(tree(t, c, "/gip"), "/gip/binding/test_ffm_model/"), under(tree(t, c, "/gip"), "/gip/container_service/")...)
		return slices.Equal(got, want)
	})
}

// A binding whose creation failed is created by the next sync of the same set.
func TestFailedBindingRetried(t *testing.T) {
	b, c, _ := setUp(t)
	ctx := tctx(t)
	if err := c.Suspend(); err != nil {
		t.Fatal(err)
	}
	err := b.SyncAvailableSavedModels(ctx, container, sms("entry"))
	if !errors.Is(err, zk.ErrConnectionLoss) {
		t.Fatalf("sync while disconnected: %v, want ErrConnectionLoss", err)
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry")); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Exists(ctx, "/gip/binding/test_ffm_model/entry:default:asdf"); err != nil || st == nil {
		t.Errorf("binding not created by the second sync: %v, %v", st, err)
	}
}

// On a client it does not own, Close deletes the backend's ephemeral nodes and leaves the client
// open; on an owned one it closes the session.
func TestCloseOnSharedClient(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	c := srv.Client()
	defer c.Close()
	ctx := tctx(t)
	b, err := New(c, Config{Bzid: bzid, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReportServiceInfo(ctx, container, serviceInfo); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncAvailableSavedModels(ctx, container, sms("entry")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	got := tree(t, c, "/gip")
	want := []string{"/gip=", "/gip/binding=", "/gip/binding/test_ffm_model=", "/gip/container_service="}
	if !slices.Equal(got, want) {
		t.Errorf("tree after Close %v, want %v", got, want)
	}
	for name, err := range map[string]error{
		"sync":      b.SyncAvailableSavedModels(ctx, container, nil),
		"report":    b.ReportServiceInfo(ctx, container, serviceInfo),
		"subscribe": b.SubscribeModel(ctx, "m"),
		"layout":    b.RegisterLayoutCallback(ctx, layoutPath, newRecorder().callback),
	} {
		if errkind.Of(err) != errkind.Runtime {
			t.Errorf("%s after Close: %v, want a Runtime error", name, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	c := zkfake.New()
	defer c.Close()
	for _, cfg := range []Config{{}, {Bzid: "a/b"}, {Bzid: "x", CallTimeout: -1}} {
		if _, err := New(c, cfg); errkind.Of(err) != errkind.Value {
			t.Errorf("New(%+v): %v, want a Value error", cfg, err)
		}
	}
	if _, err := New(nil, Config{Bzid: "x"}); errkind.Of(err) != errkind.Value {
		t.Errorf("New(nil): %v, want a Value error", err)
	}
}

func TestCtrlOps(t *testing.T) {
	leakcheck.Check(t)
	b, c := newFake(t, bzid)
	ctx := tctx(t)
	if got, err := b.ListSavedModels(ctx, "nope"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ListSavedModels(nope) = %#v, %v", got, err)
	}
	sm := SavedModel{"m", "ps_1"}
	for _, p := range []string{"/v1", "/v2"} { // declaring again overwrites
		if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str(p), str("latest_once")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeclSavedModel(ctx, SavedModel{"m", "entry"}, SavedModelDeployConfig{}); err != nil {
		t.Fatal(err)
	}
	got, err := b.ListSavedModels(ctx, "m")
	if err != nil || !slices.Equal(got, []SavedModel{{"m", "entry"}, {"m", "ps_1"}}) {
		t.Errorf("ListSavedModels(m) = %v, %v", got, err)
	}
	data, st, err := c.Get(ctx, "/gip/saved_models/m/ps_1")
	if err != nil || string(data) != `{"model_base_path": "/v2", "version_policy": "latest_once"}` || st.EphemeralOwner != 0 {
		t.Errorf("deploy config node: %s, %+v, %v", data, st, err)
	}
	for i := 0; i < 2; i++ { // adding twice is fine
		if err := b.AddToLayout(ctx, "/gip/layouts/l", sm); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, "/gip/layouts/l/m:ps_1/child", nil, zk.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveFromLayout(ctx, "/gip/layouts/l", sm); !errors.Is(err, zk.ErrNotEmpty) {
		t.Errorf("removing a child that has children: %v, want ErrNotEmpty", err)
	}
	if err := c.Delete(ctx, "/gip/layouts/l/m:ps_1/child", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // removing twice is fine
		if err := b.RemoveFromLayout(ctx, "/gip/layouts/l", sm); err != nil {
			t.Fatal(err)
		}
	}
	if got := tree(t, c, "/gip/layouts"); !slices.Equal(got, []string{"/gip/layouts=", "/gip/layouts/l="}) {
		t.Errorf("layouts %v", got)
	}
	if err := b.AddToLayout(ctx, "relative", sm); !errors.Is(err, zk.ErrInvalidPath) {
		t.Errorf("relative layout path: %v, want ErrInvalidPath", err)
	}
}

// BzidInfo has the reference's structure, and its JSON indented by two spaces is what the
// reference's json.dumps(bzid_info(), indent=2) prints for the same tree (generated with the
// reference's bzid_info over this tree, without the malformed binding, on which it raises).
func TestBzidInfo(t *testing.T) {
	leakcheck.Check(t)
	b, c := newFake(t, bzid)
	ctx := tctx(t)
	if info, err := b.BzidInfo(ctx); err != nil || len(info.Models)+len(info.Containers)+len(info.Layouts) != 0 {
		t.Fatalf("empty bzid: %+v, %v", info, err)
	}
	for path, data := range map[string]string{
		"/gip/saved_models/m1/entry":   `{"model_base_path": "/m/entry", "version_policy": "latest"}`,
		"/gip/saved_models/m1/ps_0":    `{"model_base_path": "/m/é", "version_policy": "latest_once"}`,
		"/gip/binding/m1/entry:c;l:1":  "",
		"/gip/binding/m1/entry:c;l:0":  "",
		"/gip/binding/m2/ps_0:x:y":     "",
		"/gip/binding/m3":              "",
		"/gip/binding/m3x/malformed":   "",
		"/gip/container_service/c;l:0": `{"grpc": "h:1", "http": null, "archon": null, "agent": null, "idc": "\u00e9", "debug_info": null}`,
		"/gip/layouts/L1/m1:entry":     "",
		"/gip/layouts/L2":              "",
	} {
		if _, err := c.Create(ctx, path, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	info, err := b.BzidInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m1 := info.Models["m1"]
	if m1.SubGraphsTotal == nil || *m1.SubGraphsTotal != 2 || m1.SubGraphsAvailable != 1 ||
		!slices.Equal(m1.SubGraphs["entry"].Bindings, []string{"c;l:0", "c;l:1"}) || m1.SubGraphs["ps_0"].Bindings != nil {
		t.Errorf("m1: %+v", m1)
	}
	if m2 := info.Models["m2"]; m2.SubGraphsTotal != nil || m2.SubGraphs["ps_0"].DeployConfig != nil {
		t.Errorf("m2 (bindings only): %+v", m2)
	}
	if _, ok := info.Models["m3"]; ok {
		t.Errorf("m3 has no bindings and no saved models, yet is listed")
	}
	raw, err := info.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	if out.String()+"\n" != bzidInfoPrinted {
		t.Errorf("bzid_info JSON:\n%s\nwant:\n%s", out.String(), bzidInfoPrinted)
	}
}

// bzidInfoPrinted is what the reference prints for TestBzidInfo's tree.
const bzidInfoPrinted = `{
  "model_info": {
    "m1": {
      "entry": {
        "deploy_config": "{\"model_base_path\": \"/m/entry\", \"version_policy\": \"latest\"}",
        "bindings": [
          "c;l:0",
          "c;l:1"
        ]
      },
      "ps_0": {
        "deploy_config": "{\"model_base_path\": \"/m/\u00e9\", \"version_policy\": \"latest_once\"}"
      },
      "sub_graphs_available": 1,
      "sub_graphs_total": 2
    },
    "m2": {
      "ps_0": {
        "bindings": [
          "x:y"
        ]
      },
      "sub_graphs_available": 1
    }
  },
  "container_info": {
    "c;l": {
      "0": {
        "service_info": "{\"grpc\": \"h:1\", \"http\": null, \"archon\": null, \"agent\": null, \"idc\": \"\\u00e9\", \"debug_info\": null}",
        "saved_models": [
          "m1:entry"
        ]
      },
      "1": {
        "saved_models": [
          "m1:entry"
        ]
      }
    },
    "x": {
      "y": {
        "saved_models": [
          "m2:ps_0"
        ]
      }
    }
  },
  "layout_info": {
    "L1": [
      "m1:entry"
    ],
    "L2": []
  }
}
`

// The deploy configs of a layout's children are followed: a change, appearance or removal of
// one re-runs the callback; the configs of children that left the layout are not followed.
func TestLayoutFollowsDeployConfigs(t *testing.T) {
	b, c, rec := setUp(t)
	ctx := tctx(t)
	decl := func(sg, path string) {
		t.Helper()
		if err := b.DeclSavedModel(ctx, SavedModel{"m", sg}, SavedModelDeployConfig{str(path), str("latest")}); err != nil {
			t.Fatal(err)
		}
	}
	decl("a", "/a")
	for _, sg := range []string{"a", "b"} {
		if err := b.AddToLayout(ctx, layoutPath, SavedModel{"m", sg}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		what   string
		change func()
		want   []string
		calls  int // new callback calls
	}{
		{"before", func() {}, []string{"m:a=/a/latest"}, 0},
		{"b declared", func() { decl("b", "/b") }, []string{"m:a=/a/latest", "m:b=/b/latest"}, 1},
		{"a changed", func() { decl("a", "/a2") }, []string{"m:a=/a2/latest", "m:b=/b/latest"}, 1},
		{"a written unchanged", func() { decl("a", "/a2") }, []string{"m:a=/a2/latest", "m:b=/b/latest"}, 0},
		{"b's config deleted", func() {
			if err := c.Delete(ctx, "/gip/saved_models/m/b", zk.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []string{"m:a=/a2/latest"}, 1},
		{"a left the layout", func() {
			if err := b.RemoveFromLayout(ctx, layoutPath, SavedModel{"m", "a"}); err != nil {
				t.Fatal(err)
			}
		}, []string{}, 1},
		{"a changed outside the layout", func() { decl("a", "/a3") }, []string{}, 0},
	}
	for _, st := range steps {
		before := rec.count()
		st.change()
		if got := names(rec.last()); !slices.Equal(got, st.want) || rec.count()-before != st.calls {
			t.Errorf("%s: layout %v after %d new calls; want %v after %d", st.what, got, rec.count()-before, st.want, st.calls)
		}
	}
}

// A callback may change its own layout and configs: the changes are delivered after it returns,
// one call at a time.
func TestLayoutCallbackReentrant(t *testing.T) {
	leakcheck.Check(t)
	b, _ := newFake(t, bzid)
	ctx := tctx(t)
	var got [][]string
	active := 0
	cb := func(entries []LayoutEntry) bool {
		active++
		defer func() { active-- }()
		if active > 1 {
			t.Errorf("callback called while running")
		}
		got = append(got, names(entries))
		switch len(got) {
		case 1: // the initial empty layout: declare and publish from inside
			if err := b.DeclSavedModel(ctx, SavedModel{"m", "a"}, SavedModelDeployConfig{str("/a"), nil}); err != nil {
				t.Error(err)
			}
			if err := b.AddToLayout(ctx, layoutPath, SavedModel{"m", "a"}); err != nil {
				t.Error(err)
			}
		case 2: // change the config of a child
			if err := b.DeclSavedModel(ctx, SavedModel{"m", "a"}, SavedModelDeployConfig{str("/a2"), nil}); err != nil {
				t.Error(err)
			}
		}
		return true
	}
	done := make(chan error, 1)
	go func() { done <- b.RegisterLayoutCallback(ctx, layoutPath, cb) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: RegisterLayoutCallback did not return")
	}
	want := [][]string{{}, {"m:a=/a/<None>"}, {"m:a=/a2/<None>"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}
