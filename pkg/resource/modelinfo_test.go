package resource

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sized returns content of n bytes.
func sized(n int) string { return strings.Repeat("x", n) }

// exportFixture is a checkpoint directory with an export of three sub models in versions 1000 and
// 2000 (exported at global steps 200 and 300) and the assets of checkpoint model.ckpt-300:
//
//	ckpt/checkpoint, ckpt/model.ckpt-300.assets/...
//	ckpt/exported_models/{entry,ps_0,ps_1}/{1000,2000}/..., .../ExportSaverListenerState
func exportFixture() map[string]string {
	files := map[string]string{
		"ckpt/checkpoint": "model_checkpoint_path: \"model.ckpt-300\"\n" +
			"all_model_checkpoint_paths: \"model.ckpt-200\"\nall_model_checkpoint_paths: \"model.ckpt-300\"\n",
		"ckpt/model.ckpt-300.assets/user_emb_0-00000-of-00002": sized(100),
		"ckpt/model.ckpt-300.assets/item_emb_0-00001-of-00002": sized(40),
		"ckpt/model.ckpt-300.assets/user_emb_1-00000-of-00002": sized(7),
		"ckpt/model.ckpt-300.assets/vocab.txt":                 sized(1000),
		"ckpt/model.ckpt-200.assets/user_emb_0-00000-of-00001": sized(5000),
		"ckpt/exported_models/.hidden/1000/x":                  sized(1),
	}
	sizes := map[string]int{"entry": 10, "ps_0": 20, "ps_1": 30}
	for sub, n := range sizes {
		base := "ckpt/exported_models/" + sub
		files[base+"/1000/saved_model.pb"] = sized(n)
		files[base+"/2000/saved_model.pb"] = sized(2 * n)
		files[base+"/2000/variables/variables.data-00000-of-00001"] = sized(3 * n)
		files[base+"/"+ExportStateFile] = "entries {\n  export_dir: \"/export/" + sub + "/1000\"\n  global_step: 200\n}\n" +
			"entries {\n  export_dir: \"/export/" + sub + "/2000\"\n  global_step: 300\n}\n"
	}
	return files
}

func TestModelInfo(t *testing.T) {
	type want map[string]int64 // sub model -> size; version paths end in /<version>
	tests := []struct {
		name    string
		changes map[string]string
		opts    ModelInfoOptions
		version string
		want    want
	}{
		{
			name:    "checkpoint state picks the version exported at its step, assets added",
			version: "2000",
			want:    want{"entry": 50, "ps_0": 100 + 100 + 40, "ps_1": 150 + 7},
		},
		{
			name:    "explicit checkpoint",
			opts:    ModelInfoOptions{Ckpt: "model.ckpt-200"},
			version: "1000",
			want:    want{"entry": 10, "ps_0": 20 + 5000, "ps_1": 30},
		},
		{
			name:    "explicit version keeps the checkpoint's assets",
			opts:    ModelInfoOptions{Version: "1000"},
			version: "1000",
			want:    want{"entry": 10, "ps_0": 20 + 140, "ps_1": 30 + 7},
		},
		{
			name:    "explicit version read as Python's int()",
			opts:    ModelInfoOptions{Version: " 1_000\n"},
			version: "1000",
			want:    want{"entry": 10, "ps_0": 20 + 140, "ps_1": 30 + 7},
		},
		{
			name:    "no checkpoint: greatest common numeric version",
			changes: map[string]string{"ckpt/checkpoint": "-", "ckpt/exported_models/ps_1/2000/saved_model.pb": "-", "ckpt/exported_models/ps_1/2000/variables/variables.data-00000-of-00001": "-"},
			version: "1000",
			want:    want{"entry": 10, "ps_0": 20, "ps_1": 30},
		},
		{
			name: "no state files: numeric versions (the reference asserted)",
			changes: map[string]string{
				"ckpt/exported_models/entry/" + ExportStateFile: "-",
				"ckpt/exported_models/ps_0/" + ExportStateFile:  "-",
				"ckpt/exported_models/ps_1/" + ExportStateFile:  "-",
			},
			version: "2000",
			want:    want{"entry": 50, "ps_0": 240, "ps_1": 157},
		},
		{
			name:    "unparsable checkpoint state is ignored as TF does",
			changes: map[string]string{"ckpt/checkpoint": "model_checkpoint_path: \"unterminated\n"},
			version: "2000",
			want:    want{"entry": 50, "ps_0": 100, "ps_1": 150},
		},
		{
			name:    "step matched by no entry: the greatest version of the entries",
			opts:    ModelInfoOptions{Ckpt: "model.ckpt-999"},
			version: "2000",
			want:    want{"entry": 50, "ps_0": 100, "ps_1": 150},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, with(exportFixture(), tc.changes))
			export := filepath.Join(root, "ckpt/exported_models")
			opts := tc.opts
			opts.Logger = quiet
			got, err := ModelInfo(export+"/", opts)
			if err != nil {
				t.Fatal(err)
			}
			sizes := want{}
			for sub, info := range got {
				sizes[sub] = info.Size
				if wantPath := filepath.Join(export, sub, tc.version); info.VersionPath != wantPath {
					t.Errorf("%s: version path %s, want %s", sub, info.VersionPath, wantPath)
				}
			}
			if !reflect.DeepEqual(sizes, tc.want) {
				t.Errorf("sizes %v, want %v", sizes, tc.want)
			}
		})
	}
}

func TestModelInfoRelativePath(t *testing.T) {
	root := tree(t, exportFixture())
	t.Chdir(root)
	got, err := ModelInfo("ckpt/exported_models", ModelInfoOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if p := got["entry"].VersionPath; p != filepath.Join(root, "ckpt/exported_models/entry/2000") {
		t.Errorf("version path %s is not absolute under %s", p, root)
	}
}

func TestModelInfoErrors(t *testing.T) {
	tests := []struct {
		name    string
		changes map[string]string
		opts    ModelInfoOptions
		export  string
		kind    errkind.Kind
		msg     string
	}{
		{name: "missing export dir", export: "nowhere", kind: errkind.Generic, msg: "is not exists"},
		{name: "version not a number", opts: ModelInfoOptions{Version: "v1"}, kind: errkind.Value},
		{name: "checkpoint without a step", opts: ModelInfoOptions{Ckpt: "model.ckpt"}, kind: errkind.Value},
		{name: "version missing in a sub model", opts: ModelInfoOptions{Version: "3000"}, kind: errkind.Precondition},
		{
			name:    "sub models disagree on the step's version",
			changes: map[string]string{"ckpt/exported_models/ps_1/" + ExportStateFile: "entries { export_dir: \"/e/1000\" global_step: 300 }\n"},
			kind:    errkind.Precondition,
		},
		{
			name:    "no common version",
			changes: map[string]string{"ckpt/checkpoint": "-", "ckpt/exported_models/ps_1/1000/saved_model.pb": "-", "ckpt/exported_models/ps_1/2000/saved_model.pb": "-", "ckpt/exported_models/ps_1/2000/variables/variables.data-00000-of-00001": "-", "ckpt/exported_models/ps_1/3000/x": ""},
			kind:    errkind.Precondition,
		},
		{
			name:    "empty checkpoint state",
			changes: map[string]string{"ckpt/checkpoint": "all_model_checkpoint_paths: \"a\"\n"},
			kind:    errkind.Value, msg: "Invalid checkpoint state",
		},
		{
			name:    "assets of a PS that was not exported",
			changes: map[string]string{"ckpt/model.ckpt-300.assets/t_7-00000-of-00001": "x"},
			kind:    errkind.NotFound,
		},
		{
			name:    "bad export state",
			changes: map[string]string{"ckpt/exported_models/ps_0/" + ExportStateFile: "entries { no_such_field: 1 }"},
			kind:    errkind.Value,
		},
		{
			name:    "export dir without a version",
			changes: map[string]string{"ckpt/exported_models/ps_0/" + ExportStateFile: "entries { export_dir: \"/e/latest\" global_step: 300 }"},
			kind:    errkind.Value,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, with(exportFixture(), tc.changes))
			export := filepath.Join(root, "ckpt/exported_models")
			if tc.export != "" {
				export = filepath.Join(root, tc.export)
			}
			opts := tc.opts
			opts.Logger = quiet
			got, err := ModelInfo(export, opts)
			if err == nil {
				t.Fatalf("ModelInfo = %v, want an error of kind %s", got, tc.kind)
			}
			if errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q (kind %s), want kind %s containing %q", err, errkind.Of(err), tc.kind, tc.msg)
			}
		})
	}
}

func TestExists(t *testing.T) {
	root := tree(t, map[string]string{"d/f": ""})
	for p, want := range map[string]bool{"d": true, "d/f": true, "d/g": false} {
		if got := Exists(filepath.Join(root, p)); got != want {
			t.Errorf("Exists(%s) = %v", p, got)
		}
	}
	if err := os.Remove(filepath.Join(root, "d/f")); err != nil {
		t.Fatal(err)
	}
	if Exists(filepath.Join(root, "d/f")) {
		t.Error("Exists after removal")
	}
}

// TestNumeric: version directory names as the reference reads them (isnumeric, then int).
func TestNumeric(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int64
		ok   bool
	}{
		{"1000", 1000, true},
		{"0012", 12, true},
		{"\u0661\u0662", 12, true}, // Arabic-Indic digits: isnumeric, and int() reads them
		{"", 0, false},
		{"+1", 0, false},  // not isnumeric
		{"1_0", 0, false}, // not isnumeric (int() would take it)
		{" 1", 0, false},
		{"\u00bd", 0, false}, // isnumeric, but int() raises: not a version
		{"99999999999999999999", 0, false},
	} {
		got, ok := numeric(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("numeric(%q) = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestAssetRow: the groups the reference's ROW.match gave on Python 3.11.
func TestAssetRow(t *testing.T) {
	for _, tc := range []struct {
		name, ps string // ps "": no match
	}{
		{"emb_table_3-0-of-2", "3"},
		{"a_b_12-1-of-4", "12"},
		{"emb_3-0-of-2\n", "3"},
		{"emb_3-0-of-2\n\n", ""},
		{"emb_\u0663-\u0660-of-\u0662", "\u0663"},
		{"emb_3-0-of-2.index", ""},
		{"_3-0-of-2", ""},
		{"emb_\u00b3-0-of-2", ""},
	} {
		ps := ""
		if m := assetRow.FindStringSubmatch(tc.name); m != nil {
			ps = m[1]
		}
		if ps != tc.ps {
			t.Errorf("assetRow on %q: ps %q, want %q", tc.name, ps, tc.ps)
		}
	}
}
