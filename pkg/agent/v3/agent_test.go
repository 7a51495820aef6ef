package agentv3

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// rig is one way of running agent_v3_test.py's scenario: the agent, and the operator's ZooKeeper
// client that declares saved models and edits the layout.
type rig struct {
	agent *Agent
	ctl   zk.Client
	// real says TF Serving is a process that loads models over time (fake_tfs), so the scenario
	// waits for AVAILABLE before syncing; the fake wrapper reports every configured model
	// AVAILABLE at once.
	real bool
}

// fakeRig is the reference test's setup: zkfake for ZooKeeper and the fake TF Serving wrapper.
func fakeRig(t *testing.T) rig {
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	t.Cleanup(func() { agentZK.Close(); ctl.Close() })
	conf := testConfig(t, nil, nil)
	a, err := New(conf, Options{
		ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: t.TempDir(), Logger: quiet,
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return rig{agent: a, ctl: ctl}
}

// realRig runs the same scenario on a real ZooKeeper server (the agent opens its own session
// from zk_servers) with cmd/fake_tfs as TF Serving, a real process started with the command line
// the agent builds for tensorflow_model_server.
func realRig(t *testing.T, srv *zktest.Server) rig {
	bin := faketfsbin.Path(t)
	dir := t.TempDir()
	conf := testConfig(t, nil, func(f *utilsspec.AgentConfig) { f.ZKServers = ptr(srv.Addr()) })
	a, err := New(conf, Options{
		TFSBinary: bin, TFSDir: dir, TFSLog: filepath.Join(dir, "tfs.log"), Host: "127.0.0.1",
		ModelConfigDir: dir, Logger: quiet, ReloadBackoff: 5 * time.Millisecond, ReloadBackoffMax: 50 * time.Millisecond,
		TFSStopGrace: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctl, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	return rig{agent: a, ctl: ctl, real: true}
}

func TestAgentV3(t *testing.T) {
	zkSrv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	rigs := []struct {
		name string
		make func(t *testing.T) rig
	}{
		{"FakeZKFakeTFS", fakeRig},
		{"RealZKFakeTFSProcess", func(t *testing.T) rig { return realRig(t, zkSrv) }},
	}
	for _, r := range rigs {
		t.Run(r.name, func(t *testing.T) {
			leakcheck.Check(t)
			testScenario(t, r.make(t))
		})
	}
}

func settle(t *testing.T, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Backend().Settle(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitServed waits until TF Serving's config lists exactly want and, on a real TF Serving, every
// one of them is AVAILABLE.
func waitServed(t *testing.T, r rig, want []string) {
	t.Helper()
	eventually(t, fmt.Sprintf("TF Serving to serve %v", want), func() bool {
		names, err := r.agent.TFS().ListSavedModels()
		if err != nil || !slices.Equal(names, want) {
			return false
		}
		if !r.real {
			return true
		}
		st, err := r.agent.TFS().ListSavedModelsStatus(context.Background())
		if err != nil {
			return false
		}
		for _, n := range want {
			if st[n].GetState() != servingapis.ModelVersionStatus_AVAILABLE {
				return false
			}
		}
		return true
	})
}

// testScenario is agent_v3_test.py: test_service_info and test_publish_models, then Stop.
func testScenario(t *testing.T, r rig) {
	ctx := tctx(t)
	a := r.agent
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			a.Stop(context.Background())
		}
	})
	base := t.TempDir()
	for _, sub := range []string{"entry", "ps_0", "ps_1", "ps_2"} {
		cfg := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(base, "test_ffm_model/exported_models", sub))
		if _, err := r.ctl.Create(ctx, "/gip/saved_models/test_ffm_model/"+sub, []byte(cfg), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}

	// test_service_info
	info, ok, err := a.Backend().ServiceInfo(ctx, a.Container())
	if err != nil || !ok || !reflect.DeepEqual(info, a.ServiceInfo()) {
		t.Fatalf("service info = %+v, %v, %v; want %+v", info, ok, err, a.ServiceInfo())
	}
	wantDebug := `{"layout_path": "/gip/layout", "layout_filters": []}`
	if got := *a.ServiceInfo().DebugInfo; got != wantDebug {
		t.Errorf("debug_info = %s, want %s", got, wantDebug)
	}
	if got, want := *a.ServiceInfo().GRPC, fmt.Sprintf("127.0.0.1:%d", *a.conf.TFSPortGRPC); got != want {
		t.Errorf("grpc = %s, want %s", got, want)
	}

	// test_publish_models
	if names, err := a.TFS().ListSavedModels(); err != nil || len(names) != 0 {
		t.Fatalf("saved models before publishing = %v, %v", names, err)
	}
	for _, c := range []string{"test_ffm_model:entry", "test_ffm_model:ps_0"} {
		if err := r.ctl.EnsurePath(ctx, "/gip/layout/"+c); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, a)
	waitServed(t, r, []string{"test_ffm_model:entry", "test_ffm_model:ps_0"})
	text, err := a.TFS().ModelConfigText()
	if err != nil {
		t.Fatal(err)
	}
	if want := modelConfigText(base, "entry", "ps_0"); text != want {
		t.Errorf("model config file:\n%s\nwant:\n%s", text, want)
	}
	if err := a.SyncAvailableSavedModels(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	self := []backend.ContainerServiceInfo{a.ServiceInfo()}
	if got, want := a.Backend().ServiceMap(), (backend.ServiceMap{"test_ffm_model": {"entry": self, "ps_0": self}}); !reflect.DeepEqual(got, want) {
		t.Errorf("service map = %+v, want %+v", got, want)
	}
	addr := *a.ServiceInfo().Archon
	if r.real && a.TFS().(interface{ GRPCRemoteOp() bool }).GRPCRemoteOp() {
		addr = *a.ServiceInfo().GRPC
	}
	if got, want := a.AddrsMap(), map[string][]string{"test_ffm_model:entry": {addr}, "test_ffm_model:ps_0": {addr}}; !reflect.DeepEqual(got, want) {
		t.Errorf("addrs map = %v, want %v", got, want)
	}

	// unload one model
	if err := r.ctl.Delete(ctx, "/gip/layout/test_ffm_model:ps_0", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	waitServed(t, r, []string{"test_ffm_model:entry"})
	if err := a.SyncAvailableSavedModels(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	if got, want := a.Backend().ServiceMap(), (backend.ServiceMap{"test_ffm_model": {"entry": self}}); !reflect.DeepEqual(got, want) {
		t.Errorf("service map = %+v, want %+v", got, want)
	}

	// The status report sees the same.
	rep := a.Status(ctx)
	if !rep.Agent.Running || rep.ZooKeeper.State != "CONNECTED" || !slices.Equal(rep.Bound, []string{"test_ffm_model:entry"}) ||
		len(rep.Models) != 1 || rep.Models[0].Name != "test_ffm_model:entry" || rep.Models[0].State != "AVAILABLE" ||
		len(rep.Layout.Entries) != 1 || !rep.Layout.Entries[0].Loaded {
		js, _ := json.MarshalIndent(rep, "", "  ")
		t.Errorf("status:\n%s", js)
	}
	if r.real && (rep.LastReload == nil || !rep.LastReload.OK || rep.LastReload.Models != 1) {
		t.Errorf("last reload = %+v", rep.LastReload)
	}
	if err := a.Healthy(); err != nil {
		t.Errorf("healthy: %v", err)
	}

	// Stop: the bindings and the service info go with the agent.
	file := a.ModelConfigFile()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if err := a.Healthy(); err == nil {
		t.Error("healthy after Stop")
	}
	eventually(t, "bindings and service info to go", func() bool {
		b, _ := r.ctl.Children(ctx, "/gip/binding/test_ffm_model/entry")
		s, _ := r.ctl.Exists(ctx, "/gip/container_service/"+a.Container().String())
		return len(b) == 0 && s == nil
	})
	if _, err := os.Stat(file); err == nil {
		t.Errorf("model config file %s left behind", file)
	}
}

// modelConfigText is what Python's text_format.MessageToString writes for the layout's models.
func modelConfigText(base string, subs ...string) string {
	s := "model_config_list {\n"
	for _, sub := range subs {
		s += fmt.Sprintf("  config {\n    name: \"test_ffm_model:%s\"\n    base_path: \"%s\"\n    model_platform: \"tensorflow\"\n"+
			"    model_version_policy {\n      latest {\n        num_versions: 1\n      }\n    }\n  }\n",
			sub, filepath.Join(base, "test_ffm_model/exported_models", sub))
	}
	return s + "}\n"
}
