package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/export"
)

// TestDemoPredict: the demo trains the model into its cache, serves it, and the tfs_client command
// it prints gets real scores from the entry (which looks the ids up on the PS shards through the
// agent's HeartBeat); a second run serves the cached export (same model, same scores), and a
// corrupt cache is trained again rather than failing the demo.
func TestDemoPredict(t *testing.T) {
	leakcheck.Check(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)

	var firstScores []float32
	for _, tc := range []struct {
		name string
		// before prepares the cache.
		before     func(t *testing.T)
		wantStdout string
		wantCached bool
		wantStderr string
	}{
		{"cold: trains", nil, "Demo model: trained", false, ""},
		{"second run: the cache", nil, "Demo model: the export of an earlier run", true, ""},
		{"corrupt cache: trains again", func(t *testing.T) {
			entries, err := filepath.Glob(filepath.Join(cache, "monolith-demo", demoCacheFormat, demoModel, "entry", "*", export.EntryManifestFile))
			if err != nil || len(entries) != 1 {
				t.Fatalf("entry manifests %v, %v", entries, err)
			}
			if err := os.WriteFile(entries[0], []byte("{not json"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "Demo model: trained", false, "the cached export does not load; training again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			var stdout, stderr syncbuf.Buffer
			start := time.Now()
			_, stop := started(t, nil, &stdout, &stderr)
			t.Logf("demo ready in %v", time.Since(start).Round(time.Millisecond))
			defer func() {
				if code := stop(); code != 0 {
					t.Errorf("exit %d\nstderr:\n%s", code, stderr.String())
				}
			}()
			out := stdout.String()
			if !strings.Contains(out, tc.wantStdout) {
				t.Fatalf("stdout lacks %q:\n%s", tc.wantStdout, out)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantStderr, stderr.String())
			}
			cmd := printedPredict(t, out)
			// The command works at once: the banner waits for it.
			scores, err := demoPredict(t, cmd)
			if err != nil {
				t.Fatalf("the printed Predict, right after the banner: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
			}
			if len(scores) != demoPredictBatch {
				t.Fatalf("%d scores, want %d", len(scores), demoPredictBatch)
			}
			for i, s := range scores {
				if math.IsNaN(float64(s)) || s <= 0 || s >= 1 {
					t.Errorf("score %d = %v, want in (0, 1)", i, s)
				}
			}
			if slices.Min(scores) == slices.Max(scores) {
				t.Errorf("scores all equal: %v", scores)
			}
			t.Logf("scores %v", scores)
			switch {
			case firstScores == nil:
				firstScores = scores
			case tc.wantCached && !slices.Equal(scores, firstScores):
				t.Errorf("the cached model scores %v, the one trained %v", scores, firstScores)
			}
		})
	}
}

// printedPredict returns the flags of the tfs_client Predict command the demo printed.
func printedPredict(t *testing.T, out string) map[string]string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "//cmd/tfs_client") || !strings.Contains(line, "--print_outputs") {
			continue
		}
		flags := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(strings.TrimPrefix(f, "--"), "="); ok && strings.HasPrefix(f, "--") {
				flags[k] = v
			}
		}
		for _, k := range []string{"target", "model_name", "model_spec", "batch_size", "input_type"} {
			if flags[k] == "" {
				t.Fatalf("the printed Predict command lacks --%s: %s", k, line)
			}
		}
		return flags
	}
	t.Fatalf("the demo printed no tfs_client Predict command:\n%s", out)
	return nil
}

// demoPredict sends the Predict the command describes, as tfs_client does: a random ExampleBatch of
// the model's features (--model_spec), seed 1, and returns the scores.
func demoPredict(t *testing.T, cmd map[string]string) ([]float32, error) {
	t.Helper()
	if cmd["input_type"] != "example_batch" {
		t.Fatalf("--input_type %s, want example_batch", cmd["input_type"])
	}
	n, err := strconv.Atoi(cmd["batch_size"])
	if err != nil {
		t.Fatal(err)
	}
	return predictScores(context.Background(), cmd["target"], cmd["model_name"], cmd["model_spec"], n)
}
