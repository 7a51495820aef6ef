package agentv3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agentctl"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLatestOncePins: latest_once is the newest version present when the model is first seen,
// kept for the agent's life; with no version yet it waits and resolves once one appears.
func TestLatestOncePins(t *testing.T) {
	type step struct {
		mkdir   []string // version directories created before the step
		base    string   // "" is the test's base path
		want    int64
		noVer   bool // want ErrNoVersion
		fresh   bool
		comment string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"newest present, then stays", []step{
			{mkdir: []string{"3", "12", "temp-99"}, want: 12, fresh: true},
			{mkdir: []string{"13"}, want: 12, comment: "a newer version does not move it"},
		}},
		{"no version yet: waits, then loads", []step{
			{noVer: true},
			{mkdir: []string{"temp-1"}, noVer: true, comment: "an exporter's temp directory is no version"},
			{mkdir: []string{"5"}, want: 5, fresh: true},
			{mkdir: []string{"6"}, want: 5},
		}},
		{"no base path yet", []step{
			{base: "missing", noVer: true},
			{mkdir: []string{"missing/1"}, base: "missing", want: 1, fresh: true},
		}},
		{"another base path is resolved again", []step{
			{mkdir: []string{"2"}, want: 2, fresh: true},
			{mkdir: []string{"other/7"}, base: "other", want: 7, fresh: true},
			{mkdir: []string{"8"}, want: 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var p latestOncePins
			for i, s := range tc.steps {
				for _, d := range s.mkdir {
					mkdirs(t, filepath.Join(root, d))
				}
				base := root
				if s.base != "" {
					base = filepath.Join(root, s.base)
				}
				v, fresh, err := p.resolve("m:ps_0", base)
				if s.noVer {
					if !errors.Is(err, modelconfig.ErrNoVersion) {
						t.Fatalf("step %d: %v, %v; want ErrNoVersion", i, v, err)
					}
					continue
				}
				if err != nil || v != s.want || fresh != s.fresh {
					t.Fatalf("step %d (%s): %d, fresh %v, %v; want %d, fresh %v", i, s.comment, v, fresh, err, s.want, s.fresh)
				}
			}
		})
	}
}

// specificVersion is the specific version of model name in a model server config (-1 when it has
// none).
func specificVersion(t *testing.T, text, name string) int64 {
	t.Helper()
	var cfg servingconfig.ModelServerConfig
	if err := prototext.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, mc := range cfg.GetModelConfigList().GetConfig() {
		if mc.GetName() == name {
			if vs := mc.GetModelVersionPolicy().GetSpecific().GetVersions(); len(vs) == 1 {
				return vs[0]
			}
		}
	}
	return -1
}

// TestLatestOnceWaitsThenLoads: a latest_once saved model published before any version exists
// waits (shown in /status with the reason, the rest of the layout loads), loads the first version
// that appears, and stays on it when newer versions appear and the layout changes.
func TestLatestOnceWaitsThenLoads(t *testing.T) {
	leakcheck.Check(t)
	m := agentstatus.NewMetrics()
	a, ctl := fakeAgent(t, nil, nil, func(o *Options) {
		o.Metrics, o.LatestOnceRecheckInterval = m, 10*time.Millisecond
	})
	base := t.TempDir()
	declareAt := func(sub, policy string) {
		data := fmt.Sprintf(`{"model_base_path": %q, "version_policy": %q}`, filepath.Join(base, sub), policy)
		if _, err := ctl.Create(context.Background(), "/gip/saved_models/m/"+sub, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	declareAt("entry", "latest")
	declareAt("ps_0", "latest_once")
	declareAt("ps_1", "latest_once")
	mkdirs(t, filepath.Join(base, "entry", "1"), filepath.Join(base, "ps_1", "100"))
	publish(t, ctl, "m", "entry", "ps_0", "ps_1")
	settle(t, a)
	if got, _ := a.TFS().ListSavedModels(); !slices.Equal(got, []string{"m:entry", "m:ps_1"}) {
		t.Errorf("loaded %v, want m:entry and m:ps_1 while m:ps_0 has no version", got)
	}
	rep := a.Status(context.Background())
	var ps0 agentstatus.LayoutEntry
	for _, e := range rep.Layout.Entries {
		if e.SavedModel == "m:ps_0" {
			ps0 = e
		}
	}
	if rep.Layout.Error != "" || !strings.Contains(ps0.Error, "version_policy latest_once: no version directory") ||
		!strings.Contains(ps0.Error, "/gip/saved_models/m/ps_0") {
		t.Errorf("layout error %q, m:ps_0 %+v", rep.Layout.Error, ps0)
	}
	if body := scrape(t, m); !strings.Contains(body, "monolith_agent_layout_entries_skipped_total 0\n") {
		t.Error("a model waiting for a version is counted as a bad deploy config")
	}

	// The first version appears: the re-check loads it, without any ZooKeeper event.
	mkdirs(t, filepath.Join(base, "ps_0", "1634786523"))
	eventually(t, "m:ps_0 to load", func() bool {
		got, _ := a.TFS().ListSavedModels()
		return slices.Equal(got, []string{"m:entry", "m:ps_0", "m:ps_1"})
	})
	text, _ := a.TFS().ModelConfigText()
	if v := specificVersion(t, text, "m:ps_0"); v != 1634786523 {
		t.Errorf("m:ps_0 version %d, want 1634786523", v)
	}
	eventually(t, "m:ps_0's error to clear", func() bool {
		for _, e := range a.Status(context.Background()).Layout.Entries {
			if e.Error != "" {
				return false
			}
		}
		return true
	})

	// Newer versions and a layout change: both latest_once models stay on their versions.
	mkdirs(t, filepath.Join(base, "ps_0", "1634790000"), filepath.Join(base, "ps_1", "200"))
	declareAt("ps_2", "latest")
	publish(t, ctl, "m", "ps_2")
	settle(t, a)
	text, _ = a.TFS().ModelConfigText()
	if v0, v1 := specificVersion(t, text, "m:ps_0"), specificVersion(t, text, "m:ps_1"); v0 != 1634786523 || v1 != 100 {
		t.Errorf("versions after newer ones appeared: m:ps_0 %d, m:ps_1 %d; want 1634786523 and 100\n%s", v0, v1, text)
	}
}

// exportModel writes what model export leaves for agentctl decl: {base}/entry/{version} whose
// saved_model.pb calls model's PS sub-graphs, and {base}/ps_i/{version}.
func exportModel(t *testing.T, base, model, version string, numPS int) {
	t.Helper()
	node := &tfframework.NodeDef{Name: "remote_ps_0", Op: agentctl.RemotePredictOp,
		Attr: map[string]*tfframework.AttrValue{"model_name": {Value: &tfframework.AttrValue_S{S: []byte(model + ":ps_0")}}}}
	sm := &tfprotobuf.SavedModel{SavedModelSchemaVersion: 1,
		MetaGraphs: []*tfprotobuf.MetaGraphDef{{GraphDef: &tfframework.GraphDef{Node: []*tfframework.NodeDef{node}}}}}
	data, err := proto.Marshal(sm)
	if err != nil {
		t.Fatal(err)
	}
	mkdirs(t, filepath.Join(base, "entry", version))
	if err := os.WriteFile(filepath.Join(base, "entry", version, "saved_model.pb"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range numPS {
		mkdirs(t, filepath.Join(base, fmt.Sprintf("ps_%d", i), version))
	}
}

// TestDeclPubServe is the operator's flow on a real ZooKeeper: agentctl decl (latest for the
// entry, latest_once for the PS sub-graphs, as the reference declares them) and pub, then agent
// v3 with fake_tfs as TF Serving serves every sub-graph: all AVAILABLE and advertised, the PS ones
// on the exported version. (The layout used to be refused whole: "saved model m:ps_0:
// latest_once".)
func TestDeclPubServe(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	ctx := tctx(t)
	ctl, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	be, err := backend.New(ctl, backend.Config{Bzid: "gip", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	export := filepath.Join(t.TempDir(), "saved_model")
	const version = "1634786523"
	exportModel(t, export, "test_ffm_model", version, 2)
	for _, o := range []agentctl.Options{
		{Cmd: "decl", ExportBase: export},
		{Cmd: agentctl.ActionPub, ModelName: "test_ffm_model:*", Layout: "l"},
	} {
		opts := agentctl.DefaultOptions()
		opts.Bzid, opts.Cmd, opts.ExportBase, opts.ModelName, opts.Layout = "gip", o.Cmd, o.ExportBase, o.ModelName, o.Layout
		if err := agentctl.Run(ctx, be, opts, io.Discard); err != nil {
			t.Fatalf("agentctl %s: %v", o.Cmd, err)
		}
	}

	dir := t.TempDir()
	conf := testConfig(t, nil, func(f *utilsspec.AgentConfig) { f.ZKServers, f.LayoutPattern = ptr(srv.Addr()), ptr("l") })
	a, err := New(conf, Options{TFSBinary: faketfsbin.Path(t), TFSDir: dir, TFSLog: filepath.Join(dir, "tfs.log"), Host: "127.0.0.1",
		ModelConfigDir: dir, Logger: quiet, ReloadBackoff: 5 * time.Millisecond, ReloadBackoffMax: 50 * time.Millisecond,
		PendingSyncInterval: 20 * time.Millisecond, TFSStopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	want := []string{"test_ffm_model:entry", "test_ffm_model:ps_0", "test_ffm_model:ps_1"}
	eventually(t, "every sub-graph AVAILABLE and advertised", func() bool {
		rep := a.Status(ctx)
		if len(rep.Models) != len(want) || !slices.Equal(rep.Bound, want) {
			return false
		}
		for _, m := range rep.Models {
			if m.State != "AVAILABLE" {
				return false
			}
		}
		return true
	})
	rep := a.Status(ctx)
	for _, m := range rep.Models {
		if strings.Contains(m.Name, ":ps_") && fmt.Sprint(m.Version) != version {
			t.Errorf("%s serves version %d, want %s", m.Name, m.Version, version)
		}
	}
	if rep.Layout.Error != "" {
		t.Errorf("layout error %s", rep.Layout.Error)
	}
	for _, e := range rep.Layout.Entries {
		if e.Error != "" || !e.Loaded {
			t.Errorf("layout entry %+v", e)
		}
	}
}
