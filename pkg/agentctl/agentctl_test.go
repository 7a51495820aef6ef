package agentctl

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// savedModelPB is a minimal saved_model.pb: one meta graph whose graph has the given nodes, each
// {op, model_name attribute ("" for none)}.
func savedModelPB(t *testing.T, nodes ...[2]string) []byte {
	t.Helper()
	graph := &tfframework.GraphDef{}
	for i, n := range nodes {
		node := &tfframework.NodeDef{Name: "node_" + string(rune('a'+i)), Op: n[0]}
		if n[1] != "" {
			node.Attr = map[string]*tfframework.AttrValue{
				"model_name":              {Value: &tfframework.AttrValue_S{S: []byte(n[1])}},
				"max_rpc_deadline_millis": {Value: &tfframework.AttrValue_I{I: 3000}},
			}
		}
		graph.Node = append(graph.Node, node)
	}
	sm := &tfprotobuf.SavedModel{SavedModelSchemaVersion: 1, MetaGraphs: []*tfprotobuf.MetaGraphDef{{GraphDef: graph}}}
	data, err := proto.Marshal(sm)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// exportDir builds what model_export's testdata/saved_model holds: an entry graph calling
// test_ffm_model's PS sub-graphs, and ps_0..ps_4; plus a stray file and an exporter's temp
// directory, which are neither sub-graphs nor versions.
func exportDir(t *testing.T) string {
	t.Helper()
	base := filepath.Join(t.TempDir(), "saved_model")
	writeFile(t, filepath.Join(base, "entry", "1634786523", "saved_model.pb"), savedModelPB(t,
		[2]string{"Placeholder", ""}, [2]string{RemotePredictOp, "test_ffm_model:ps_0"}, [2]string{RemotePredictOp, "other:ps_1"}))
	if err := os.MkdirAll(filepath.Join(base, "entry", "temp-1634786999"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		writeFile(t, filepath.Join(base, "ps_"+string(rune('0'+i)), "1634786523", "saved_model.pb"), savedModelPB(t))
	}
	writeFile(t, filepath.Join(base, "README"), []byte("not a sub-graph"))
	return base
}

func newBackend(t *testing.T) (*backend.ZKBackend, *zkfake.Fake) {
	t.Helper()
	c := zkfake.New()
	b, err := backend.New(c, backend.Config{Bzid: "gip", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(); c.Close() })
	return b, c
}

func TestFindModelName(t *testing.T) {
	base := exportDir(t)
	name, found, err := FindModelName(base)
	if err != nil || !found || name != "test_ffm_model" {
		t.Errorf("FindModelName = %q, %v, %v; want test_ffm_model", name, found, err)
	}

	noRemote := filepath.Join(t.TempDir(), "x")
	writeFile(t, filepath.Join(noRemote, "entry", "1", "saved_model.pb"), savedModelPB(t, [2]string{"MatMul", ""}))
	// The newest version is read: version 10 has the remote predict node, 9 does not.
	newest := filepath.Join(t.TempDir(), "y")
	writeFile(t, filepath.Join(newest, "entry", "9", "saved_model.pb"), savedModelPB(t))
	writeFile(t, filepath.Join(newest, "entry", "10", "saved_model.pb"), savedModelPB(t, [2]string{RemotePredictOp, "new_model"}))
	noMeta := filepath.Join(t.TempDir(), "z")
	data, _ := proto.Marshal(&tfprotobuf.SavedModel{SavedModelSchemaVersion: 1})
	writeFile(t, filepath.Join(noMeta, "entry", "1", "saved_model.pb"), data)
	garbage := filepath.Join(t.TempDir(), "g")
	writeFile(t, filepath.Join(garbage, "entry", "1", "saved_model.pb"), []byte("\xff\xff\xff"))
	noVersion := filepath.Join(t.TempDir(), "n")
	if err := os.MkdirAll(filepath.Join(noVersion, "entry", "temp-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base  string
		name  string
		found bool
		kind  errkind.Kind // Unknown: no error
	}{
		{noRemote, "", false, errkind.Unknown},
		{newest, "new_model", true, errkind.Unknown},
		{noMeta, "", false, errkind.Value},
		{garbage, "", false, errkind.Value},
		{noVersion, "", false, errkind.NotFound},
		{filepath.Join(t.TempDir(), "missing"), "", false, errkind.NotFound},
	} {
		name, found, err := FindModelName(tc.base)
		if name != tc.name || found != tc.found || errkind.Of(err) != tc.kind || (tc.kind != errkind.Unknown) != (err != nil) {
			t.Errorf("FindModelName(%s) = %q, %v, %v (kind %v); want %q, %v, kind %v", filepath.Base(tc.base), name, found, err,
				errkind.Of(err), tc.name, tc.found, tc.kind)
		}
	}
}

func sms(subs ...string) []backend.SavedModel {
	var out []backend.SavedModel
	for _, s := range subs {
		out = append(out, backend.SavedModel{ModelName: "test_ffm_model", SubGraph: s})
	}
	return out
}

// agent_controller_test.py's test_decl_saved_models.
func TestDeclSavedModels(t *testing.T) {
	bd, c := newBackend(t)
	ctx := tctx(t)
	base := exportDir(t)
	name, err := DeclareSavedModel(ctx, bd, base, "test_ffm_model", true, ArchEntryPS)
	if err != nil || name != "test_ffm_model" {
		t.Fatalf("DeclareSavedModel = %q, %v", name, err)
	}
	got, err := bd.ListSavedModels(ctx, "test_ffm_model")
	if err != nil || !slices.Equal(got, sms("entry", "ps_0", "ps_1", "ps_2", "ps_3", "ps_4")) {
		t.Fatalf("ListSavedModels = %v, %v", got, err)
	}
	for sg, policy := range map[string]string{"entry": "latest", "ps_3": "latest_once"} {
		data, _, err := c.Get(ctx, "/gip/saved_models/test_ffm_model/"+sg)
		want := `{"model_base_path": "` + base + "/" + sg + `", "version_policy": "` + policy + `"}`
		if err != nil || string(data) != want {
			t.Errorf("%s: %s, %v; want %s", sg, data, err, want)
		}
	}
	// The name comes from the export when none is given; a different one is used (and logged).
	if name, err := DeclareSavedModel(ctx, bd, base, "", true, ArchEntryPS); err != nil || name != "test_ffm_model" {
		t.Errorf("without a name: %q, %v", name, err)
	}
	if name, err := DeclareSavedModel(ctx, bd, base, "renamed", false, ArchEntryPS); err != nil || name != "renamed" {
		t.Errorf("with another name: %q, %v", name, err)
	}
}

func TestDeclareErrors(t *testing.T) {
	bd, _ := newBackend(t)
	ctx := tctx(t)
	base := exportDir(t)
	noRemote := filepath.Join(t.TempDir(), "x")
	writeFile(t, filepath.Join(noRemote, "entry", "1", "saved_model.pb"), savedModelPB(t))
	if _, err := DeclareSavedModel(ctx, bd, base, "", false, ArchEntryPS); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what, base, model, arch string
		overwrite               bool
		kind                    errkind.Kind
	}{
		{"declared, no overwrite", base, "test_ffm_model", ArchEntryPS, false, errkind.Precondition},
		{"other arch", base, "", "entry_dense", true, errkind.Precondition},
		{"no name anywhere", noRemote, "", ArchEntryPS, true, errkind.Precondition},
		{"no export", filepath.Join(t.TempDir(), "none"), "m", ArchEntryPS, true, errkind.NotFound},
	} {
		if _, err := DeclareSavedModel(ctx, bd, tc.base, tc.model, tc.overwrite, tc.arch); errkind.Of(err) != tc.kind {
			t.Errorf("%s: %v (kind %v), want kind %v", tc.what, err, errkind.Of(err), tc.kind)
		}
	}
}

func layoutInfo(t *testing.T, bd backend.CtrlBackend, layout string) []string {
	t.Helper()
	info, err := bd.BzidInfo(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.Layouts[layout]
}

// agent_controller_test.py's test_pub.
func TestPub(t *testing.T) {
	bd, _ := newBackend(t)
	ctx := tctx(t)
	if _, err := DeclareSavedModel(ctx, bd, exportDir(t), "test_ffm_model", true, ArchEntryPS); err != nil {
		t.Fatal(err)
	}
	const layout = "/gip/layouts/test_layout1"
	for _, step := range []struct {
		pattern, action string
		want            []string
	}{
		{"test_ffm_model:entry", ActionPub, []string{"test_ffm_model:entry"}},
		{"test_ffm_model:ps_*", ActionPub, []string{"test_ffm_model:entry", "test_ffm_model:ps_0", "test_ffm_model:ps_1",
			"test_ffm_model:ps_2", "test_ffm_model:ps_3", "test_ffm_model:ps_4"}},
		{"test_ffm_model:ps_*", ActionUnpub, []string{"test_ffm_model:entry"}},
		{"test_ffm_model:entry", ActionUnpub, []string{}},
		{"test_ffm_model:ps_[!0-2]", ActionPub, []string{"test_ffm_model:ps_3", "test_ffm_model:ps_4"}},
		{"unknown_model:*", ActionPub, []string{"test_ffm_model:ps_3", "test_ffm_model:ps_4"}},
	} {
		if err := MapModelToLayout(ctx, bd, step.pattern, layout, step.action); err != nil {
			t.Fatalf("%s %s: %v", step.action, step.pattern, err)
		}
		if got := layoutInfo(t, bd, "test_layout1"); !reflect.DeepEqual(got, step.want) {
			t.Errorf("after %s %s: layout %v, want %v", step.action, step.pattern, got, step.want)
		}
	}
	if err := MapModelToLayout(ctx, bd, "no_colon", layout, ActionPub); errkind.Of(err) != errkind.Value {
		t.Errorf("pattern without ':': %v, want a Value error", err)
	}
	if err := MapModelToLayout(ctx, bd, "test_ffm_model:*", layout, "publish"); errkind.Of(err) != errkind.Value {
		t.Errorf("unknown action: %v, want a Value error", err)
	}
}

// bzidInfoPrinted is what the reference prints (json.dumps(bd.bzid_info(), indent=2)) for the
// tree TestRun builds.
const bzidInfoPrinted = `{
  "model_info": {
    "m": {
      "entry": {
        "deploy_config": "{\"model_base_path\": \"/m/entry\", \"version_policy\": \"latest\"}"
      },
      "sub_graphs_total": 1
    }
  },
  "container_info": {},
  "layout_info": {
    "l1": [
      "m:entry"
    ],
    "l2": []
  }
}
`

func TestRun(t *testing.T) {
	bd, c := newBackend(t)
	ctx := tctx(t)
	base := exportDir(t)
	var out bytes.Buffer
	run := func(o Options) error {
		out.Reset()
		return Run(ctx, bd, o, &out)
	}
	o := DefaultOptions()
	o.Bzid, o.Cmd, o.ExportBase = "gip", "decl", base
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if got, _ := bd.ListSavedModels(ctx, "test_ffm_model"); len(got) != 6 {
		t.Errorf("after decl: %v", got)
	}
	if err := run(o); errkind.Of(err) != errkind.Precondition {
		t.Errorf("decl again without overwrite: %v, want a Precondition error", err)
	}
	o.Overwrite = true
	if err := run(o); err != nil {
		t.Errorf("decl again with overwrite: %v", err)
	}
	o = DefaultOptions()
	o.Bzid, o.Cmd, o.Layout, o.ModelName = "gip", "pub", "l", "test_ffm_model:ps_1"
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if got := layoutInfo(t, bd, "l"); !slices.Equal(got, []string{"test_ffm_model:ps_1"}) {
		t.Errorf("after pub: %v", got)
	}
	o.Cmd = "unpub"
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	if got := layoutInfo(t, bd, "l"); len(got) != 0 {
		t.Errorf("after unpub: %v", got)
	}
	for _, bad := range []Options{
		{Cmd: "drop", Bzid: "gip"},
		{Cmd: "decl", Bzid: "gip", Arch: ArchEntryPS},
		{Cmd: "pub", Bzid: "gip", Layout: "l"},
		{Cmd: "unpub", Bzid: "gip", ModelName: "m:*"},
	} {
		want := errkind.Precondition
		if bad.Cmd == "drop" {
			want = errkind.Value
		}
		if err := run(bad); errkind.Of(err) != want {
			t.Errorf("%+v: %v, want kind %v", bad, err, want)
		}
	}

	// bzid_info prints what the reference prints, on a bzid of its own.
	for _, p := range []string{"/b2/layouts/l1/m:entry", "/b2/layouts/l2"} {
		if err := c.EnsurePath(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	b2, err := backend.New(c, backend.Config{Bzid: "b2", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	base2, policy := "/m/entry", "latest"
	if err := b2.DeclSavedModel(ctx, backend.SavedModel{ModelName: "m", SubGraph: "entry"},
		backend.SavedModelDeployConfig{ModelBasePath: &base2, VersionPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Run(ctx, b2, Options{Cmd: "bzid_info", Bzid: "b2"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != bzidInfoPrinted {
		t.Errorf("bzid_info printed:\n%s\nwant:\n%s", out.String(), bzidInfoPrinted)
	}
}
