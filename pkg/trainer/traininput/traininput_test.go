package traininput

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/dataset"
)

func TestParseHidden(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // fmt of the widths, or the error
	}{
		{"", "[]"},
		{"64,32", "[64 32]"},
		{" 8 , 4 ", "[8 4]"},
		{"64,x", `--hidden "64,x": want positive widths, a comma list`},
		{"0", `--hidden "0": want positive widths, a comma list`},
	} {
		got, err := ParseHidden(tc.in)
		s := fmt.Sprint(got)
		if err != nil {
			s = err.Error()
		}
		if s != tc.want {
			t.Errorf("ParseHidden(%q) = %s, want %s", tc.in, s, tc.want)
		}
	}
}

// TestFeaturesOf: --schema, the shorthand flags (loose) or the demo's features, and both at once
// refused.
func TestFeaturesOf(t *testing.T) {
	f := cputrainingspec.TrainFlags{Model: "dnn", InputFormat: "monolith", BatchSize: 64}
	fs, loose, err := FeaturesOf(f)
	if err != nil || !loose || len(fs.Sparse()) == 0 {
		t.Errorf("the demo's features: %v sparse, loose %v, %v", fs, loose, err)
	}
	f.SparseFeatures = "user:1,item:2"
	if fs, loose, err = FeaturesOf(f); err != nil || !loose || len(fs.Sparse()) != 2 {
		t.Errorf("--sparse_features: %v, loose %v, %v", fs, loose, err)
	}
	f.Schema = "schema.yaml"
	if _, _, err = FeaturesOf(f); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("--schema and --sparse_features: %v", err)
	}
}

// TestFromFiles: files that match nothing are a usage error naming the flag.
func TestFromFiles(t *testing.T) {
	f := cputrainingspec.TrainFlags{Model: "dnn", InputFormat: "monolith", BatchSize: 64}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "eval.tfrecord"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.TrainData, f.EvalData = filepath.Join(dir, "none-*"), filepath.Join(dir, "eval.tfrecord")
	var stdout strings.Builder
	_, err := FromFiles(f, dataset.Compression(""), &stdout)
	if err == nil || !errors.As(err, new(cli.UsageError)) || !strings.Contains(err.Error(), "--train_data") {
		t.Errorf("err = %v, want a usage error naming --train_data", err)
	}
}
