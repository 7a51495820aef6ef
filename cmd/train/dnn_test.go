package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/trainer/job/jobtest"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

var (
	dnnFinalLine   = regexp.MustCompile(`^eval auc=(0\.\d{4}) best auc=(0\.\d{4}) loss=(\d+\.\d{4}) steps=(\d+)$`)
	throughputLine = regexp.MustCompile(`(?m)^throughput   (\d+) examples/s: (\d+) examples in (\d+) steps, \S+ s; time split: read \d+%, input \d+%, lookup \d+%, layout \d+%, dense \d+%, apply \d+%, other \d+%$`)
	progressLine   = regexp.MustCompile(`(?m)^  step (\d+) +\d+ examples/s  loss (\d\.\d{4})  train auc 0\.\d{4}  ps lookup \d+\.\d{2} ms$`)
)

// dnnFinal parses the dnn demo's last line: eval AUC, best AUC and global step.
func dnnFinal(t *testing.T, stdout string) (auc, best float64, steps int64) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	m := dnnFinalLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("last line %q is not 'eval auc=<x> best auc=<b> loss=<y> steps=<n>'; stdout:\n%s", lines[len(lines)-1], stdout)
	}
	auc, _ = strconv.ParseFloat(m[1], 64)
	best, _ = strconv.ParseFloat(m[2], 64)
	steps, _ = strconv.ParseInt(m[4], 10, 64)
	return auc, best, steps
}

// `train` with no flags (here with a model dir): an in-process cluster of 2 parameter servers and
// a worker over loopback gRPC trains the dnn model on the latent-factor click log to within 0.02
// of the generator's best AUC, printing progress, the throughput with its time split, and the
// final line; the checkpoint holds the dense parameters and both servers' dumps of every table.
func TestDNNDemo(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	r := runOK(t, "--model_dir="+dir)
	auc, best, steps := dnnFinal(t, r.stdout)
	t.Logf("eval auc %.4f, best %.4f, %d steps\n%s", auc, best, steps, throughputLine.FindString(r.stdout))
	if auc < best-0.02 || auc > best+0.005 {
		t.Errorf("eval auc %.4f, want within 0.02 below the best %.4f", auc, best)
	}
	if want := int64(1563); steps != want { // 4 epochs of 100000 examples in batches of 256: 1562.5
		t.Errorf("steps %d, want %d", steps, want)
	}
	if m := throughputLine.FindStringSubmatch(r.stdout); m == nil || m[2] != "400000" || m[3] != "1563" {
		t.Errorf("no throughput line of 400000 examples in 1563 steps:\n%s", r.stdout)
	}
	if got := len(progressLine.FindAllString(r.stdout, -1)); got != 15 {
		t.Errorf("%d progress lines, want 15 (every 100 steps):\n%s", got, r.stdout)
	}
	for _, want := range []string{"  ps           2 parameter servers in this process, gRPC on 127.0.0.1:", "chief (worker 0 of 1)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	jobtest.CheckCheckpoint(t, dir, 1563, 2)
}

// The dnn model trains on files too, its sparse features named with their fid slots; the final
// line has no best AUC then.
func TestDNNOnFiles(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	g, err := synth.New(synth.Config{Seed: 3, NumDense: 2, NumSlots: 2, Vocab: 50, LatentDim: 2})
	if err != nil {
		t.Fatal(err)
	}
	train, err := g.Write(synth.WriteOptions{Dir: dir, Name: "clicks", Files: 2, Examples: 2000, Stream: 1})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := g.Write(synth.WriteOptions{Dir: dir, Name: "heldout", Examples: 500, Stream: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := runOK(t, "--train_data="+strings.Join(train, ","), "--eval_data="+eval[0], "--dense_features=dense:2",
		"--sparse_features=slot_1:1,slot_2:2", "--batch_size=100", "--epochs=2", "--embedding_dim=4", "--hidden=16",
		"--model_dir="+filepath.Join(dir, "model"))
	if auc, _, steps := r.final(t); steps != 40 || auc <= 0.6 {
		t.Errorf("auc %v steps %d, want 40 steps (2 epochs of 2000 examples in batches of 100) and some learning", auc, steps)
	}
	if strings.Contains(r.stdout, "best auc") {
		t.Errorf("a run on files has no generator, so no best AUC: %s", r.stdout)
	}
	if !strings.Contains(r.stdout, "dnn(2 features in 2 tables, pooled 8 + dense 2, hidden [16]") {
		t.Errorf("stdout does not describe the model:\n%s", r.stdout)
	}
}
