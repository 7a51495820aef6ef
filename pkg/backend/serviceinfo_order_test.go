package backend

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestServiceInfoAfterBinding (issue 21 item 1b): the reader of the bindings must not depend on
// the order its peers write in. A binding whose container has no service info yet is left out of
// the service map, and the map gets the container as soon as its service info appears (the
// reference, and this port before the fix, waited for the next change of the bindings; a Python
// peer re-reports its service info only every 60 s).
func TestServiceInfoAfterBinding(t *testing.T) {
	// Each rig gives a reader backend of bzid and a writer client on the same ZooKeeper.
	srv := startZK(t)
	rigs := []struct {
		name string
		make func(t *testing.T, bzid string) (*ZKBackend, zk.Client)
	}{
		{"fake", func(t *testing.T, bzid string) (*ZKBackend, zk.Client) {
			s := zkfake.NewServer()
			rc, wc := s.Client(), s.Client()
			b, err := New(rc, Config{Bzid: bzid, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close(); rc.Close(); wc.Close() })
			return b, wc
		}},
		{"real", func(t *testing.T, bzid string) (*ZKBackend, zk.Client) {
			return openReal(t, srv, bzid), connectReal(t, srv)
		}},
	}
	pod2 := Container{"psm;lf;default", "pod-2"}
	info2 := ContainerServiceInfo{GRPC: str("10.0.0.2:1"), Archon: str("10.0.0.2:2")}
	type step func(t *testing.T, ctx context.Context, bzid string, w zk.Client)
	binding := func(model, sub string) step {
		return func(t *testing.T, ctx context.Context, bzid string, w zk.Client) {
			t.Helper()
			p := "/" + bzid + "/binding/" + model + "/" + sub + ":" + pod2.String()
			if _, err := w.Create(ctx, p, nil, zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	unbind := func(model, sub string) step {
		return func(t *testing.T, ctx context.Context, bzid string, w zk.Client) {
			t.Helper()
			if err := w.Delete(ctx, "/"+bzid+"/binding/"+model+"/"+sub+":"+pod2.String(), zk.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	report := func(t *testing.T, ctx context.Context, bzid string, w zk.Client) {
		t.Helper()
		p := "/" + bzid + "/container_service/" + pod2.String()
		if _, err := w.Create(ctx, p, info2.Serialize(), zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		models []string // followed by the reader (its layout's models)
		before []step   // written before the service info; the map must not list pod-2 after them
		want   ServiceMap
	}{
		{"one binding", []string{"m"}, []step{binding("m", "entry")},
			ServiceMap{"m": {"entry": {info2}}}},
		{"every sub-graph of a model", []string{"m"}, []step{binding("m", "entry"), binding("m", "ps_0")},
			ServiceMap{"m": {"entry": {info2}, "ps_0": {info2}}}},
		{"two models", []string{"m", "n"}, []step{binding("m", "ps_0"), binding("n", "entry")},
			ServiceMap{"m": {"ps_0": {info2}}, "n": {"entry": {info2}}}},
		{"binding gone before the service info came", []string{"m"}, []step{binding("m", "entry"), unbind("m", "entry")},
			ServiceMap{"m": {}}},
	}
	for _, rig := range rigs {
		t.Run(rig.name, func(t *testing.T) {
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					leakcheck.Check(t)
					bzid := "gip_order_" + rig.name + string(rune('a'+i))
					b, w := rig.make(t, bzid)
					ctx := tctx(t)
					layout := "/" + bzid + "/layouts/l"
					for _, m := range tc.models {
						sm := SavedModel{m, "entry"}
						if err := b.DeclSavedModel(ctx, sm, SavedModelDeployConfig{str("/p/" + m), str("latest")}); err != nil {
							t.Fatal(err)
						}
						if err := b.AddToLayout(ctx, layout, sm); err != nil {
							t.Fatal(err)
						}
					}
					if err := b.RegisterLayoutCallback(ctx, layout, func([]LayoutEntry) bool { return true }); err != nil {
						t.Fatal(err)
					}
					for _, s := range tc.before {
						s(t, ctx, bzid, w)
					}
					settle(t, b)
					empty := ServiceMap{}
					for _, m := range tc.models {
						empty[m] = map[string][]ContainerServiceInfo{}
					}
					if got := b.ServiceMap(); !reflect.DeepEqual(got, empty) {
						t.Fatalf("service map before the service info: %+v, want %+v", got, empty)
					}
					report(t, ctx, bzid, w)
					// Settle covers the re-evaluation: once it returns, the map is current.
					settle(t, b)
					if got := b.ServiceMap(); !reflect.DeepEqual(got, tc.want) {
						t.Errorf("service map after the service info appeared: %+v, want %+v", got, tc.want)
					}
					b.mu.Lock()
					waits := len(b.waits)
					b.mu.Unlock()
					if waits != 0 {
						t.Errorf("%d service-info watches left after the service info appeared", waits)
					}
				})
			}
		})
	}
}

// TestServiceInfoWaitEndsWithModel: a model that leaves the layout stops waiting for the service
// infos its bindings named, and Close ends the waits of the others.
func TestServiceInfoWaitEndsWithModel(t *testing.T) {
	leakcheck.Check(t)
	s := zkfake.NewServer()
	rc, wc := s.Client(), s.Client()
	defer rc.Close()
	defer wc.Close()
	b, err := New(rc, Config{Bzid: bzid, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []string{"m", "n"} {
		if err := b.DeclSavedModel(ctx, SavedModel{m, "entry"}, SavedModelDeployConfig{str("/p"), str("latest")}); err != nil {
			t.Fatal(err)
		}
		if err := b.AddToLayout(ctx, layoutPath, SavedModel{m, "entry"}); err != nil {
			t.Fatal(err)
		}
		for _, pod := range []string{"pod-" + m, "pod-shared"} {
			if _, err := wc.Create(ctx, "/gip/binding/"+m+"/entry:c:"+pod, nil, zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.RegisterLayoutCallback(ctx, layoutPath, func([]LayoutEntry) bool { return true }); err != nil {
		t.Fatal(err)
	}
	waiting := func() map[string][]string {
		b.mu.Lock()
		defer b.mu.Unlock()
		out := map[string][]string{}
		for p, sw := range b.waits {
			for m := range sw.models {
				out[p] = append(out[p], m)
			}
		}
		return out
	}
	shared := "/gip/container_service/c:pod-shared"
	if got := waiting(); len(got) != 3 || len(got[shared]) != 2 {
		t.Fatalf("waits %v: want pod-m, pod-n, and pod-shared for both models", got)
	}
	// n leaves the layout; its binding watch notices at its next call.
	if err := b.RemoveFromLayout(ctx, layoutPath, SavedModel{"n", "entry"}); err != nil {
		t.Fatal(err)
	}
	if err := wc.Delete(ctx, "/gip/binding/n/entry:c:pod-n", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"/gip/container_service/c:pod-m": {"m"}, shared: {"m"}}
	if got := waiting(); !reflect.DeepEqual(got, want) {
		t.Errorf("waits after n left: %v, want %v", got, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := waiting(); len(got) != 0 {
		t.Errorf("waits after Close: %v", got)
	}
}
