package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func parseScores(t *testing.T, out string) []float64 {
	t.Helper()
	var s []float64
	for _, line := range strings.Fields(out) {
		v, err := strconv.ParseFloat(line, 64)
		if err != nil {
			t.Fatalf("score line %q: %v", line, err)
		}
		s = append(s, v)
	}
	return s
}

// TestScoresAreTheTrainers: the export of a model trained on parameter servers scores a random
// batch of its features, and the same batch read back from --write_input, as the trainer's model
// does (within 1e-6), also with 3 PS sub-graphs re-sharding the trainer's 2 servers' ids.
func TestScoresAreTheTrainers(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 2, []int{16, 8})
	job.Train(ctx, 30)
	for _, numPS := range []int{2, 3} {
		base := filepath.Join(t.TempDir(), "ctr")
		job.Export(ctx, base, numPS)
		in := filepath.Join(t.TempDir(), "batch.pbtxt")
		code, out, stderr := runCmd(t, "--export_base="+base, "--random=40", "--seed=3", "--write_input="+in)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		got := parseScores(t, out)
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		eb := &examplepb.ExampleBatch{}
		if err := prototext.Unmarshal(data, eb); err != nil {
			t.Fatal(err)
		}
		b, err := toBatch(job.Spec.Schema(), eb)
		if err != nil {
			t.Fatal(err)
		}
		want, err := job.Model.Predict(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 40 || len(want) != 40 {
			t.Fatalf("%d scores, the trainer %d; want 40", len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Errorf("%d PS: example %d: %.9f, the trainer %.9f", numPS, i, got[i], want[i])
			}
		}
		// The written batch, scored again from the file.
		code, again, stderr := runCmd(t, "--export_base="+base, "--input_file="+in)
		if code != 0 || again != out {
			t.Errorf("--input_file of the written batch: exit %d, scores differ: %v\n%s", code, again != out, stderr)
		}
	}
}

func TestBadInput(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := exporttest.NewJob(t, 1, []int{4})
	job.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "ctr")
	res := job.Export(ctx, base, 1)
	dir := t.TempDir()
	noDense := filepath.Join(dir, "nodense.pbtxt")
	eb := &examplepb.ExampleBatch{BatchSize: 1, NamedFeatureList: []*examplepb.NamedFeatureList{{Name: "slot_1",
		Feature: []*examplepb.Feature{{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{1<<48 | 1}}}}}}}}
	if err := os.WriteFile(noDense, []byte(prototext.Format(eb)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no export_base", []string{"--random=1"}, "--export_base is required"},
		{"no examples", []string{"--export_base=" + base}, "--input_file (an ExampleBatch) or --random=N"},
		{"both", []string{"--export_base=" + base, "--random=1", "--input_file=" + noDense}, "give one"},
		{"missing export", []string{"--export_base=" + filepath.Join(dir, "none"), "--random=1"}, "no export there"},
		{"missing version", []string{"--export_base=" + base, "--export_version=" + strconv.FormatInt(res.Version+1, 10), "--random=1"}, "does not exist"},
		{"missing input file", []string{"--export_base=" + base, "--input_file=" + filepath.Join(dir, "none.pbtxt")}, "--input_file"},
		{"no dense feature", []string{"--export_base=" + base, "--input_file=" + noDense}, `example 0: batch: example has no float_list feature "dense"`},
		{"bad flag", []string{"--bogus"}, "unknown flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count("\n"+stderr, "\npredict: ") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one 'predict: ' line with %q", code, out, stderr, tc.want)
			}
		})
	}
}
