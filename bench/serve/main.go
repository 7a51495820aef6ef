// Command serve measures the model server (issue 25, "Latency and throughput, measured"): it starts
// an entry and one PS model_server process per PS sub-graph of an export (2 for cmd/train's demo),
// all on 127.0.0.1, the entry finding the PS replicas through an AgentService this command serves
// (HeartBeat with the PS addresses, as an agent answers it), and loads the entry with tfs_client's
// profile command (random batches of the model's features, --model_spec):
//
//   - per batch size (--batch_sizes, 1 and 256), Predict latency p50/p99 with one client in a closed
//     loop for --duration;
//   - per batch size, the highest open-loop rate (--target_qps, latency counted from when each
//     request was due) whose p99 stays at or under --p99_bound (10 ms) with no failed or unsent
//     request (searchQPS: rates grow by --qps_factor from --start_qps, then two bisection steps).
//
// It prints a table, with the machine's CPUs and load average (the figures depend on them), and
// with --json writes the figures. Without --export_base it trains cmd/train's demo for
// --train_steps steps and exports it first; without --bin_dir it builds the binaries with go build.
//
//	go run ./bench/serve
//	go run ./bench/serve --export_base=/tmp/exported/demo --bin_dir=bazel-bin/... --batch_sizes=1
//
// Not a test: nothing here asserts a figure.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	benchservespec "github.com/monolith-go/monolith/gen/spec/go/bench_serve"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

const name = "bench_serve"

const description = "Measure Predict latency (batch 1 and 256) and the QPS at which p99 stays under a bound: " +
	"an entry and its PS model_server processes on loopback, loaded by tfs_client's profile."

type cmdFlags struct {
	cli.Common
	benchservespec.BenchServeFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cmdFlags
	return cli.Run(name, description, &c, nil, args, stdout, stderr, func(log *slog.Logger) error {
		return bench(ctx, c.BenchServeFlags, stdout, log)
	})
}

// binaries are the commands the benchmark runs.
var binaries = []string{"model_server", "tfs_client", "train", "export"}

func bench(ctx context.Context, f benchservespec.BenchServeFlags, stdout io.Writer, log *slog.Logger) error {
	sizes, err := parseSizes(f.BatchSizes)
	if err != nil {
		return cli.Usage(err)
	}
	switch {
	case f.QPSFactor <= 1:
		return cli.Usage(fmt.Errorf("--qps_factor %v must be above 1", f.QPSFactor))
	case f.StartQPS < 0:
		return cli.Usage(fmt.Errorf("--start_qps %v is negative", f.StartQPS))
	case f.Duration <= 0 || f.StepDuration <= 0 || f.P99Bound <= 0:
		return cli.Usage(errors.New("--duration, --step_duration and --p99_bound must be positive"))
	case f.Repeats < 1:
		return cli.Usage(fmt.Errorf("--repeats %d is not positive", f.Repeats))
	case f.MaxInFlight < 1:
		return cli.Usage(fmt.Errorf("--max_in_flight %d is not positive", f.MaxInFlight))
	}
	work, err := os.MkdirTemp("", "monolith-bench-serve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bins := f.BinDir
	if bins == "" {
		bins = filepath.Join(work, "bin")
		if err := buildBinaries(ctx, bins, log); err != nil {
			return err
		}
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil && (b == "model_server" || b == "tfs_client" || f.ExportBase == "") {
			return cli.Usage(fmt.Errorf("--bin_dir: %w", err))
		}
	}
	base := f.ExportBase
	if base == "" {
		if base, err = trainAndExport(ctx, bins, work, f.TrainSteps, log); err != nil {
			return err
		}
	}
	entryDir, e, err := newestEntry(base)
	if err != nil {
		return cli.Usage(err)
	}
	cluster, err := startCluster(ctx, bins, work, base, e, log)
	if err != nil {
		return err
	}
	defer cluster.stop(log)

	res := result{CPUs: runtime.NumCPU(), LoadAvgStart: loadAvg(), Export: entryDir, Model: e.Manifest.ModelName,
		NumPS: e.Manifest.NumPS, Entry: cluster.entryAddr, P99BoundMS: ms(f.P99Bound)}
	prof := profiler{bin: filepath.Join(bins, "tfs_client"), model: e.Manifest.ModelName + ":" + export.EntrySubGraph,
		target: cluster.entryAddr, spec: entryDir, log: log}
	for _, size := range sizes {
		// A short warm-up: connections, the entry's first HeartBeat, page faults.
		if _, err := prof.run(ctx, size, time.Second, 1, 0); err != nil {
			return err
		}
		lat, err := prof.run(ctx, size, f.Duration, 1, 0)
		if err != nil {
			return err
		}
		res.Latency = append(res.Latency, latencyRow{BatchSize: size, Requests: lat.OK, QPS: lat.QPS,
			P50MS: lat.LatencyMS.P50, P99MS: lat.LatencyMS.P99, ExamplesPerSecond: lat.QPS * float64(size)})
		sf := f
		if sf.StartQPS == 0 {
			sf.StartQPS = math.Max(1, math.Round(lat.QPS/16))
		}
		search, err := searchQPS(ctx, sf, size, func(ctx context.Context, qps float64) (summary, error) {
			return prof.run(ctx, size, f.StepDuration, f.MaxInFlight, qps)
		})
		if err != nil {
			return err
		}
		res.Search = append(res.Search, search)
	}
	res.LoadAvgEnd = loadAvg()
	res.print(stdout)
	if f.JSON != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.JSON, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(item))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--batch_sizes %q: %q is not a positive number", s, item)
		}
		out = append(out, n)
	}
	return out, nil
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the repository, or give --bin_dir")
		}
		dir = parent
	}
}

func buildBinaries(ctx context.Context, dir string, log *slog.Logger) error {
	root, err := moduleRoot()
	if err != nil {
		return cli.Usage(err)
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, "./cmd/"+b)
	}
	log.Info("building", "binaries", binaries, "dir", dir)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// trainAndExport trains cmd/train's demo (its in-process cluster of 2 parameter servers) for steps
// steps and exports it as the model ctr.
func trainAndExport(ctx context.Context, bins, work string, steps int, log *slog.Logger) (string, error) {
	modelDir, base := filepath.Join(work, "model"), filepath.Join(work, "export", "ctr")
	log.Info("training the demo", "steps", steps, "model_dir", modelDir)
	if err := runTool(ctx, filepath.Join(bins, "train"), "--max_steps="+strconv.Itoa(steps), "--model_dir="+modelDir,
		"--status_addr=", "--log_level=warn"); err != nil {
		return "", err
	}
	if err := runTool(ctx, filepath.Join(bins, "export"), "--model_dir="+modelDir, "--export_base="+base); err != nil {
		return "", err
	}
	return base, nil
}

func runTool(ctx context.Context, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(bin), err, tail(out))
	}
	return nil
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// newestEntry loads the export's newest entry version.
func newestEntry(base string) (string, *export.Entry, error) {
	st, err := export.ReadState(filepath.Join(base, export.EntrySubGraph))
	if err != nil {
		return "", nil, fmt.Errorf("--export_base %s: %w", base, err)
	}
	ents := st.Entries
	if len(ents) == 0 {
		return "", nil, fmt.Errorf("--export_base %s: no version exported", base)
	}
	dir := ents[len(ents)-1].ExportDir
	e, err := export.LoadEntry(dir)
	if err != nil {
		return "", nil, err
	}
	return dir, e, nil
}

// cluster is the model_server processes and the AgentService the entry asks.
type cluster struct {
	procs     []*exec.Cmd
	waits     []chan error
	agent     *grpc.Server
	agentDone chan struct{}
	entryAddr string
}

// startCluster starts one model_server per PS sub-graph and one for the entry, each serving its
// sub-graph's versions (--model_base_path), on 127.0.0.1, and waits until each is AVAILABLE.
func startCluster(ctx context.Context, bins, work, base string, e *export.Entry, log *slog.Logger) (_ *cluster, err error) {
	c := &cluster{}
	defer func() {
		if err != nil {
			c.stop(log)
		}
	}()
	model := e.Manifest.ModelName
	table := map[string][]string{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.agent, c.agentDone = grpc.NewServer(), make(chan struct{})
	agentpb.RegisterAgentServiceServer(c.agent, agentsvc.NewProviderService(func() map[string][]string { return maps.Clone(table) }, nil))
	go func() {
		defer close(c.agentDone)
		_ = c.agent.Serve(lis)
	}()
	var subGraphs []string
	for i := range e.Manifest.NumPS {
		subGraphs = append(subGraphs, export.PSSubGraph(i))
	}
	subGraphs = append(subGraphs, export.EntrySubGraph) // last: its PS replicas are listed by then
	for _, sg := range subGraphs {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		logFile, err := os.Create(filepath.Join(work, "model_server_"+sg+".log"))
		if err != nil {
			return nil, err
		}
		name := model + ":" + sg
		cmd := exec.Command(filepath.Join(bins, "model_server"), "--host=127.0.0.1", "--port="+strconv.Itoa(port),
			"--model_name="+name, "--model_base_path="+filepath.Join(base, sg), "--agent_addr="+lis.Addr().String(),
			"--status_addr=", "--log_level=warn")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			logFile.Close()
			return nil, fmt.Errorf("start model_server for %s: %w", name, err)
		}
		done := make(chan error, 1)
		go func() {
			done <- cmd.Wait()
			logFile.Close()
		}()
		c.procs, c.waits = append(c.procs, cmd), append(c.waits, done)
		if err := waitAvailable(ctx, addr, name, done); err != nil {
			return nil, fmt.Errorf("%w (log: %s)", err, logFile.Name())
		}
		log.Info("model server available", "model", name, "addr", addr, "pid", cmd.Process.Pid)
		table[name] = []string{addr}
		if sg == export.EntrySubGraph {
			c.entryAddr = addr
		}
	}
	return c, nil
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitAvailable polls GetModelStatus until a version of name is AVAILABLE (at most 2 minutes),
// failing early when the process exits.
func waitAvailable(ctx context.Context, addr, name string, exited <-chan error) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := servingapis.NewModelServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		resp, err := client.GetModelStatus(cctx, &servingapis.GetModelStatusRequest{ModelSpec: modelconfig.ModelSpec(name, modelconfig.Version{}, nil)})
		ccancel()
		if err == nil && slices.ContainsFunc(resp.GetModelVersionStatus(), func(s *servingapis.ModelVersionStatus) bool {
			return s.GetState() == servingapis.ModelVersionStatus_AVAILABLE
		}) {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("model_server for %s exited: %v", name, err)
		case <-ctx.Done():
			return fmt.Errorf("model %s at %s not AVAILABLE: %w (last: %v)", name, addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM to the model servers, SIGKILL after 10 s, and stops the AgentService.
func (c *cluster) stop(log *slog.Logger) {
	var wg sync.WaitGroup
	for i, p := range c.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.waits[i]:
			case <-time.After(10 * time.Second):
				log.Warn("model server did not stop on SIGTERM: killed", "pid", p.Process.Pid)
				p.Process.Kill()
				<-c.waits[i]
			}
		}()
	}
	wg.Wait()
	if c.agent != nil {
		c.agent.Stop()
		<-c.agentDone
	}
}

// profiler runs tfs_client's profile command against the entry.
type profiler struct {
	bin, model, target, spec string
	log                      *slog.Logger
}

// summary is the part of tfs_client's --profile_json the benchmark reads.
type summary struct {
	Requests  uint64            `json:"requests"`
	OK        uint64            `json:"ok"`
	Errors    map[string]uint64 `json:"errors"`
	Unsent    uint64            `json:"unsent"`
	QPS       float64           `json:"qps"`
	LatencyMS struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"latency_ms"`
	ServiceMS struct {
		P99 float64 `json:"p99"`
	} `json:"service_ms"`
}

// run profiles for d with batches of size examples: closed loop with parallel clients when qps is
// 0, else open loop at qps with parallel requests in flight at most.
func (p profiler) run(ctx context.Context, size int, d time.Duration, parallel int, qps float64) (summary, error) {
	args := []string{"--cmd_type=profile", "--model_name=" + p.model, "--target=" + p.target, "--input_type=example_batch",
		"--model_spec=" + p.spec, "--batch_size=" + strconv.Itoa(size), "--profile_data_num=32", "--seed=1",
		"--profile_duration=" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64), "--parallel_num=" + strconv.Itoa(parallel),
		"--timeout=10s", "--progress_interval=1h", "--profile_json=-"}
	if qps > 0 {
		args = append(args, "--target_qps="+strconv.FormatFloat(qps, 'f', 1, 64))
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var s summary
	if jerr := json.Unmarshal(stdout.Bytes(), &s); jerr != nil {
		return s, fmt.Errorf("tfs_client profile (batch %d, qps %v): %v; %v\n%s", size, qps, err, jerr, tail(stderr.Bytes()))
	}
	// Exit status 1 is failed requests, which the summary counts; anything else is not a run.
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return s, fmt.Errorf("tfs_client profile: %w\n%s", err, tail(stderr.Bytes()))
	}
	p.log.Info("profile", "batch_size", size, "target_qps", qps, "parallel", parallel, "ok", s.OK, "failed", failed(s),
		"unsent", s.Unsent, "qps", s.QPS, "p50_ms", s.LatencyMS.P50, "p99_ms", s.LatencyMS.P99)
	return s, nil
}

func failed(s summary) uint64 {
	var n uint64
	for _, v := range s.Errors {
		n += v
	}
	return n
}

// searchQPS finds the highest open-loop rate whose p99 stays within the bound with no failed or
// unsent request, achieving 90% of it at least. Rates grow from --start_qps by --qps_factor until
// the server saturates (a failed or unsent request, or under 90% of the rate achieved), whatever
// their p99: on a loaded machine a low rate can be over the bound and a higher one within it
// (processes that sleep between requests wake late, busy ones do not). Then two bisection steps
// between the highest rate within the bound and the next one up, when that one was over. run
// profiles one rate.
func searchQPS(ctx context.Context, f benchservespec.BenchServeFlags, size int, run func(context.Context, float64) (summary, error)) (searchResult, error) {
	r := searchResult{BatchSize: size}
	bound := ms(f.P99Bound)
	// try profiles qps: whether it is within the bound, and whether the server kept up.
	try := func(qps float64) (within, kept bool, err error) {
		// The run of median p99 among --repeats stands for the rate: one scheduling stall of a
		// shared machine does not decide it, two do.
		runs := make([]summary, max(f.Repeats, 1))
		for i := range runs {
			if runs[i], err = run(ctx, qps); err != nil {
				return false, false, err
			}
		}
		slices.SortStableFunc(runs, func(a, b summary) int { return cmp.Compare(a.LatencyMS.P99, b.LatencyMS.P99) })
		s := runs[len(runs)/2]
		kept = failed(s) == 0 && s.Unsent == 0 && s.QPS >= 0.9*qps
		within = kept && s.LatencyMS.P99 <= bound && s.OK > 0
		r.Steps = append(r.Steps, qpsStep{TargetQPS: qps, QPS: s.QPS, P50MS: s.LatencyMS.P50, P99MS: s.LatencyMS.P99, ServiceP99MS: s.ServiceMS.P99,
			P99MinMS: runs[0].LatencyMS.P99, P99MaxMS: runs[len(runs)-1].LatencyMS.P99, Failed: failed(s), Unsent: s.Unsent, Within: within})
		if within && s.QPS > r.QPS {
			r.QPS, r.P99MS = s.QPS, s.LatencyMS.P99
		}
		return within, kept, nil
	}
	good, bad := 0.0, 0.0 // the highest rate within the bound, and the rate after it when over
	for qps := f.StartQPS; qps < 1e6; qps *= f.QPSFactor {
		within, kept, err := try(qps)
		if err != nil {
			return r, err
		}
		if within {
			good, bad = qps, 0
		} else if good > 0 && bad == 0 {
			bad = qps
		}
		if !kept {
			break
		}
	}
	for range 2 {
		if good == 0 || bad == 0 {
			break
		}
		mid := (good + bad) / 2
		within, _, err := try(mid)
		if err != nil {
			return r, err
		}
		if within {
			good = mid
		} else {
			bad = mid
		}
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadAvg is /proc/loadavg's 1, 5 and 15 minute load averages ("" where there is none).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

type result struct {
	CPUs         int            `json:"cpus"`
	LoadAvgStart string         `json:"loadavg_start"`
	LoadAvgEnd   string         `json:"loadavg_end"`
	Export       string         `json:"export"`
	Model        string         `json:"model"`
	NumPS        int            `json:"num_ps"`
	Entry        string         `json:"entry"`
	P99BoundMS   float64        `json:"p99_bound_ms"`
	Latency      []latencyRow   `json:"latency"`
	Search       []searchResult `json:"qps_search"`
}

type latencyRow struct {
	BatchSize         int     `json:"batch_size"`
	Requests          uint64  `json:"requests"`
	QPS               float64 `json:"qps"`
	P50MS             float64 `json:"p50_ms"`
	P99MS             float64 `json:"p99_ms"`
	ExamplesPerSecond float64 `json:"examples_per_second"`
}

type searchResult struct {
	BatchSize int       `json:"batch_size"`
	QPS       float64   `json:"qps"` // the highest rate within the bound (0: none)
	P99MS     float64   `json:"p99_ms"`
	Steps     []qpsStep `json:"steps"`
}

type qpsStep struct {
	TargetQPS float64 `json:"target_qps"`
	QPS       float64 `json:"qps"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	// ServiceP99MS is the p99 from when requests were sent (not due): what is left of the
	// latency without the client's own lateness.
	ServiceP99MS float64 `json:"service_p99_ms"`
	// P99MinMS and P99MaxMS are the p99 of the best and the worst of the repeated runs.
	P99MinMS float64 `json:"p99_min_ms"`
	P99MaxMS float64 `json:"p99_max_ms"`
	Failed   uint64  `json:"failed"`
	Unsent   uint64  `json:"unsent"`
	Within   bool    `json:"within_bound"`
}

func (r result) print(w io.Writer) {
	fmt.Fprintf(w, "model server bench: %s (%d PS sub-graphs), entry + %d PS model_server processes on 127.0.0.1, entry %s\n",
		r.Model, r.NumPS, r.NumPS, r.Entry)
	fmt.Fprintf(w, "machine: %d CPUs, load average %s at the start, %s at the end (the client, the servers and anything else share them)\n",
		r.CPUs, r.LoadAvgStart, r.LoadAvgEnd)
	fmt.Fprintln(w, "\nPredict latency, one client in a closed loop:")
	fmt.Fprintf(w, "  %6s %9s %9s %9s %9s %12s\n", "batch", "requests", "QPS", "p50 ms", "p99 ms", "examples/s")
	for _, l := range r.Latency {
		fmt.Fprintf(w, "  %6d %9d %9.1f %9.3f %9.3f %12.0f\n", l.BatchSize, l.Requests, l.QPS, l.P50MS, l.P99MS, l.ExamplesPerSecond)
	}
	fmt.Fprintf(w, "\nHighest open-loop QPS with p99 <= %g ms (latency from when each request was due; no failed or unsent request):\n", r.P99BoundMS)
	fmt.Fprintf(w, "  %6s %9s %9s %12s\n", "batch", "QPS", "p99 ms", "examples/s")
	for _, s := range r.Search {
		fmt.Fprintf(w, "  %6d %9.1f %9.3f %12.0f\n", s.BatchSize, s.QPS, s.P99MS, s.QPS*float64(s.BatchSize))
	}
	fmt.Fprintln(w, "\nsteps of the search (the run of median p99 of each rate's repeats; p99 range: the repeats' best and worst;")
	fmt.Fprintln(w, "service p99: from when requests were sent rather than due):")
	fmt.Fprintf(w, "  %6s %10s %9s %9s %9s %17s %12s %7s %7s\n", "batch", "target", "QPS", "p50 ms", "p99 ms", "p99 range", "service p99", "failed", "unsent")
	for _, s := range r.Search {
		for _, st := range s.Steps {
			mark := ""
			if !st.Within {
				mark = "  over"
			}
			rng := fmt.Sprintf("%.1f-%.1f", st.P99MinMS, st.P99MaxMS)
			fmt.Fprintf(w, "  %6d %10.1f %9.1f %9.3f %9.3f %17s %12.3f %7d %7d%s\n", s.BatchSize, st.TargetQPS, st.QPS, st.P50MS, st.P99MS, rng, st.ServiceP99MS, st.Failed, st.Unsent, mark)
		}
	}
}
