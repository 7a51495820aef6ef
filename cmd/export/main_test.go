package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/cmdbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

var trainBin = cmdbin.New("train", "github.com/monolith-go/monolith/cmd/train")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	trainBin.Cleanup()
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func runExport(args ...string) result {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestCommandLine: --help and --version, and bad command lines (exit 2, one line naming the flag).
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"help", []string{"--help"}, 0, "--export_base=PATH", ""},
		{"version", []string{"--version"}, 0, "export ", ""},
		{"nothing", nil, 2, "", "export: --model_dir is required: the checkpoint directory\n"},
		{"no export base", []string{"--model_dir=m"}, 2, "", "export: --export_base is required: the export's base directory\n"},
		{"unknown flag", []string{"--model_dir=m", "--export_base=e", "--nope"}, 2, "", "export: unknown flag --nope\n"},
		{"bad version type", []string{"--model_dir=m", "--export_base=e", "--version_type=date"}, 2, "", "--version_type must be one of"},
		{"negative num_ps", []string{"--model_dir=m", "--export_base=e", "--num_ps=-1"}, 2, "", "--num_ps -1 is negative"},
		{"negative keep", []string{"--model_dir=m", "--export_base=e", "--keep=-2"}, 2, "", "--keep -2 is negative"},
		{"bad hidden", []string{"--model_dir=m", "--export_base=e", "--hidden=64,x"}, 2, "", `--hidden "64,x": want positive widths`},
		{"sparse without slot", []string{"--model_dir=m", "--export_base=e", "--sparse_features=user"}, 2, "", `feature "user": give its fid slot (user:<slot>)`},
		{"bad slot", []string{"--model_dir=m", "--export_base=e", "--sparse_features=user:40000"}, 2, "", `slot "40000" is not a fid slot`},
		{"no sparse features", []string{"--model_dir=m", "--export_base=e", "--sparse_features="}, 2, "", "--sparse_features is empty"},
		{"bad dense", []string{"--model_dir=m", "--export_base=e", "--dense_features=dense"}, 2, "", `--dense_features "dense": want name:dim items`},
		{"zero embedding dim", []string{"--model_dir=m", "--export_base=e", "--embedding_dim=0"}, 2, "", "--embedding_dim 0 is not positive"},
		{"missing model dir", []string{"--model_dir=/nonexistent/m", "--export_base=e"}, 2, "", "checkpoint directory /nonexistent/m does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runExport(tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) ||
				(tc.code != 0 && strings.Count(r.stderr, "\n") != 1) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

var exportedLine = regexp.MustCompile(`^exported (\S+) \(global step (\d+)\) as version (\d+): entry and (\d+) PS sub-graphs, (\d+) embedding entries, (\d+) bytes in \d+\.\d{3} s$`)

// TestExportTrainedModel: cmd/train's dnn demo (a small one) trains and checkpoints; export with
// the default model spec (cmd/train's defaults) writes the entry and both PS shards of its newest
// checkpoint, which load; a named older checkpoint onto 3 shards is another version; exporting a
// version again, a spec that does not fit, a corrupt checkpoint are bad input (exit 2) naming the
// path, and leave the export as it was.
func TestExportTrainedModel(t *testing.T) {
	leakcheck.Check(t)
	modelDir := filepath.Join(t.TempDir(), "model")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, trainBin.Path(t), "--demo_examples=4000", "--epochs=1", "--batch_size=128",
		"--save_checkpoints_steps=10", "--model_dir="+modelDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	base := filepath.Join(t.TempDir(), "exported", "ctr")
	r := runExport("--model_dir="+modelDir, "--export_base="+base)
	m := exportedLine.FindStringSubmatch(strings.Split(r.stdout, "\n")[0])
	if r.code != 0 || m == nil || m[1] != filepath.Join(modelDir, "model.ckpt-32") || m[3] != "32" || m[4] != "2" || m[5] != "400" {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, sg := range []string{"entry", "ps_0", "ps_1"} {
		if !strings.Contains(r.stdout, "\n  "+sg+strings.Repeat(" ", 9-len(sg))+filepath.Join(base, sg, "32")+"\n") {
			t.Errorf("stdout does not list %s:\n%s", sg, r.stdout)
		}
	}
	e, err := export.LoadEntry(filepath.Join(base, "entry", "32"))
	if err != nil || e.Manifest.ModelName != "ctr" || e.Manifest.Model.Hidden[0] != 64 {
		t.Fatalf("entry: %+v, %v", e, err)
	}
	for _, sg := range []string{"ps_0", "ps_1"} {
		if _, err := export.LoadPSShard(ctx, filepath.Join(base, sg, "32")); err != nil {
			t.Fatal(err)
		}
	}

	// An older checkpoint, on 3 shards, keeping every version.
	r = runExport("--model_dir="+modelDir, "--export_base="+base, "--checkpoint=model.ckpt-20", "--num_ps=3", "--keep=0", "--model_name=ctr")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	vs, err := modelconfig.VersionDirs(filepath.Join(base, "ps_2"))
	if err != nil || len(vs) != 1 || vs[0].Number != 20 {
		t.Errorf("ps_2 versions %v, %v", vs, err)
	}

	// A model dir of an earlier version, without the spec file: the flags give the spec.
	noSpec := filepath.Join(t.TempDir(), "nospec")
	if err := os.CopyFS(noSpec, os.DirFS(modelDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(noSpec, "model_spec.json")); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := os.MkdirAll(corrupt, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(modelDir, "model.ckpt-30.index"), filepath.Join(corrupt, "model.ckpt-30.index"))
	if err := os.WriteFile(filepath.Join(corrupt, "model.ckpt-30.data"), []byte("not the data"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbageState := filepath.Join(t.TempDir(), "garbage")
	if err := os.CopyFS(garbageState, os.DirFS(modelDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(garbageState, "checkpoint"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"again", nil, "version already exported: " + filepath.Join(base, "entry", "32") + " exists"},
		{"garbage checkpoint state file", []string{"--model_dir=" + garbageState, "--log_level=error"}, filepath.Join(garbageState, "checkpoint") + " still unreadable"},
		{"export base under a file", []string{"--export_base=" + filepath.Join(aFile, "base")}, filepath.Join(aFile, "base")},
		{"other spec", []string{"--hidden=32"}, "export: --hidden: another model than the one trained (" + filepath.Join(modelDir, "model_spec.json") + "): hidden [32], not [64 32]; drop the flags"},
		{"other spec without the spec file", []string{"--model_dir=" + noSpec, "--hidden=32"}, "model.ckpt-32 does not fit the model spec"},
		{"missing checkpoint", []string{"--checkpoint=model.ckpt-99"}, filepath.Join(modelDir, "model.ckpt-99") + ": no such checkpoint"},
		{"corrupt checkpoint", []string{"--model_dir=" + corrupt, "--checkpoint=model.ckpt-30"}, filepath.Join(corrupt, "model.ckpt-30.data")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tree(t, base)
			r := runExport(append([]string{"--model_dir=" + modelDir, "--export_base=" + base}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
			if after := tree(t, base); after != before {
				t.Errorf("the export base changed:\n%s\nwas:\n%s", after, before)
			}
		})
	}
	// An export that --timeout cuts short fails (exit 1) saying so.
	r = runExport("--model_dir="+modelDir, "--export_base="+filepath.Join(t.TempDir(), "e"), "--timeout=1ns")
	if r.code != 1 || !strings.Contains(r.stderr, "the export did not finish within --timeout 1ns") {
		t.Errorf("--timeout=1ns: exit %d, stderr %q; want 1 and the timeout named", r.code, r.stderr)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree lists the paths under dir with a hash of each file's bytes.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			fmt.Fprintf(&b, "%s/\n", p)
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %x\n", p, sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestExportRecordedSpec: the trainer records its model's spec in the model dir (hashed ids,
// mean pooling here), and export takes it from there: the manifest has the buckets and the
// pooling with no flags given; flags of another spec (collisionless ids, which fit the
// checkpoint's shapes all the same) are refused, naming the difference, and write nothing.
func TestExportRecordedSpec(t *testing.T) {
	leakcheck.Check(t)
	modelDir := filepath.Join(t.TempDir(), "model")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, trainBin.Path(t), "--demo_examples=2000", "--epochs=1", "--embedding_buckets=50", "--pooling=mean",
		"--model_dir="+modelDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	base := filepath.Join(t.TempDir(), "exported", "ctr")
	r := runExport("--model_dir="+modelDir, "--export_base="+base, "--embedding_buckets=0")
	if r.code != 2 || !strings.Contains(r.stderr, `--embedding_buckets: another model than the one trained (`+filepath.Join(modelDir, "model_spec.json")+`): sparse feature "slot_1": {Name:slot_1 Slot:1 Table:slot_1 Dim:8 Pooling:sum Default:[] Buckets:0}, not {Name:slot_1 Slot:1 Table:slot_1 Dim:8 Pooling:mean Default:[] Buckets:50}`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(base); !os.IsNotExist(err) {
		t.Fatalf("a refused export wrote %s: %v", base, err)
	}
	r = runExport("--model_dir="+modelDir, "--export_base="+base)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	vs, err := modelconfig.VersionDirs(filepath.Join(base, "entry"))
	if err != nil || len(vs) != 1 {
		t.Fatalf("entry versions %v, %v", vs, err)
	}
	e, err := export.LoadEntry(filepath.Join(base, "entry", vs[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range e.Manifest.Model.SparseFeatures {
		if f.Buckets != 50 || f.Pooling != "mean" {
			t.Errorf("exported feature %+v, want 50 buckets and mean pooling", f)
		}
	}
}
