package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// editJSON rewrites the JSON file with edit applied to its object.
func editJSON(t testing.TB, file string, edit func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadBadExport: a version that is incomplete, corrupt or inconsistent with its manifest is
// refused by the loaders with an error of the right kind naming the file.
func TestLoadBadExport(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := newJob(t, 2, []int{8})
	j.train(ctx, 5)
	j.save(ctx)
	src := filepath.Join(t.TempDir(), "export")
	if _, err := Export(ctx, Options{ModelDir: j.modelDir, ExportBase: src, Spec: j.spec, Log: quiet}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join("ps_1", "5", tablePart("slot_1", 0, 1))
	for _, tc := range []struct {
		name   string
		spoil  func(base string)
		load   string // the version loaded: entry or ps_<i>
		kind   errkind.Kind
		naming string // relative to the base
		why    string
	}{
		{"ps: manifest missing", func(b string) { os.Remove(filepath.Join(b, "ps_0", "5", PSManifestFile)) }, "ps_0", errkind.NotFound, "ps_0/5/shard.json", "does not exist"},
		{"ps: file missing", func(b string) { os.Remove(filepath.Join(b, part)) }, "ps_1", errkind.NotFound, part, "missing"},
		{"ps: file truncated", func(b string) { truncate(t, filepath.Join(b, part), 3) }, "ps_1", errkind.Value, part, "truncated or overwritten"},
		{"ps: record corrupt", func(b string) { flipByte(t, filepath.Join(b, part), 20) }, "ps_1", errkind.Value, part, "corrupted record"},
		{"ps: entries miscounted", func(b string) {
			editJSON(t, filepath.Join(b, "ps_1", "5", PSManifestFile), func(m map[string]any) {
				tb := m["tables"].([]any)[0].(map[string]any)
				tb["entries"] = tb["entries"].(float64) + 1
				f := tb["files"].([]any)[0].(map[string]any)
				f["entries"] = f["entries"].(float64) + 1
			})
		}, "ps_1", errkind.Value, part, "the manifest says"},
		{"ps: another shard's directory", func(b string) {
			os.RemoveAll(filepath.Join(b, "ps_1", "5"))
			copyDir(t, filepath.Join(b, "ps_0", "5"), filepath.Join(b, "ps_1", "5"))
		}, "ps_1", errkind.Value, "ps_1/5/shard.json", "shard 0 in the directory of ps_1"},
		{"ps: ids of another shard", func(b string) {
			editJSON(t, filepath.Join(b, "ps_1", "5", PSManifestFile), func(m map[string]any) { m["num_ps"] = 3.0 })
		}, "ps_1", errkind.Value, part, "belongs to shard"},
		{"ps: other format", func(b string) {
			editJSON(t, filepath.Join(b, "ps_0", "5", PSManifestFile), func(m map[string]any) { m["format"] = "x" })
		}, "ps_0", errkind.Value, "ps_0/5/shard.json", "format"},
		{"ps: unknown field", func(b string) {
			editJSON(t, filepath.Join(b, "ps_0", "5", PSManifestFile), func(m map[string]any) { m["extra"] = 1 })
		}, "ps_0", errkind.Value, "ps_0/5/shard.json", "unknown field"},
		{"entry: dense corrupt", func(b string) { flipByte(t, filepath.Join(b, "entry", "5", DensePrefix+".data"), 9) }, "entry", errkind.Value, "entry/5/dense.data", "CRC-32C"},
		{"entry: dense missing", func(b string) { os.Remove(filepath.Join(b, "entry", "5", DensePrefix+".index")) }, "entry", errkind.NotFound, "entry/5/dense.index", "does not exist"},
		{"entry: another model", func(b string) {
			editJSON(t, filepath.Join(b, "entry", "5", EntryManifestFile), func(m map[string]any) { m["model"].(map[string]any)["hidden"] = []any{3.0} })
		}, "entry", errkind.Value, "entry/5", "dnn/layer_0/kernel"},
		{"entry: tensors misnamed", func(b string) {
			editJSON(t, filepath.Join(b, "entry", "5", EntryManifestFile), func(m map[string]any) { m["dense"].(map[string]any)["tensors"] = []any{"x"} })
		}, "entry", errkind.Value, "entry/5/model.json", "the manifest lists [x]"},
		{"entry: version", func(b string) {
			editJSON(t, filepath.Join(b, "entry", "5", EntryManifestFile), func(m map[string]any) { m["version"] = 6.0 })
		}, "entry", errkind.Value, "entry/5", "holds version 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "export")
			copyDir(t, src, base)
			tc.spoil(base)
			var err error
			if tc.load == EntrySubGraph {
				_, err = LoadEntry(filepath.Join(base, "entry", "5"))
			} else {
				_, err = LoadPSShard(ctx, filepath.Join(base, tc.load, "5"))
			}
			naming := filepath.Join(base, tc.naming)
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), naming) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v (kind %v); want kind %v naming %s, saying %q", err, errkind.Of(err), tc.kind, naming, tc.why)
			}
		})
	}
	// The untouched export loads.
	if _, err := LoadEntry(filepath.Join(src, "entry", "5")); err != nil {
		t.Error(err)
	}
	for _, sg := range []string{"ps_0", "ps_1"} {
		if _, err := LoadPSShard(ctx, filepath.Join(src, sg, "5")); err != nil {
			t.Error(err)
		}
	}
}
