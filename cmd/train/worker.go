package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	opspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/pscheck"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
)

// denseSeed draws the dense parameters: the same on every worker, which the allreduce then keeps
// in step.
const denseSeed = 1

// psStopTimeout bounds the stop of the parameter servers started in this process.
const psStopTimeout = 5 * time.Second

// psServerType is the name parameter servers register under (cmd/ps).
const psServerType = "ps"

// barrierName names the job's barrier on PS 0 (the controller's StopTraining, the PS health
// checker).
const barrierName = "train"

// worker is a dnn worker: the model over its embedding tables on parameter servers (started in
// this process, or found through the service discovery), the checkpointer that saves the tables
// with the dense parameters (the chief's), and, in a job of several workers, their meeting points
// on PS 0 (denseSync).
type worker struct {
	f   cputrainingspec.TrainFlags
	r   role
	log *slog.Logger

	servers      []*ps.Running // the parameter servers of this process
	router       *ps.Router
	model        *dnn.Model
	checkpointer estimator.Checkpointer
	barrier      *barrier.Remote
	sync         *denseSync // nil with one worker
}

// startWorker builds the worker: tables, parameter servers, model, checkpointer.
func startWorker(ctx context.Context, rc *runconfig.RunnerConfig, f cputrainingspec.TrainFlags, schema batch.Schema,
	disc discovery.ServiceDiscovery, r role, st *status, cp estimator.Checkpointer, stdout io.Writer, log *slog.Logger) (_ *worker, err error) {
	features, tables, err := dnnFeatures(f, schema)
	if err != nil {
		return nil, cli.Usage(err)
	}
	hidden, _ := parseHidden(f.Hidden)
	w := &worker{f: f, r: r, log: log}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if rc.NumPS == 0 {
		addrs, err := w.startLocalPS(f.LocalPS, tables, log)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "  ps           %d parameter servers in this process, gRPC on %s\n", len(addrs), strings.Join(addrs, ", "))
		if w.router, err = ps.NewRouter(ps.RouterConfig{Addrs: addrs, CallTimeout: f.PSTimeout}); err != nil {
			return nil, err
		}
		if err := checkHealth(ctx, w.router, f.PSTimeout); err != nil {
			return nil, err
		}
	} else if w.router, err = findPS(ctx, disc, rc.NumPS, f.PSTimeout, f.DiscoveryTimeout, log); err != nil {
		return nil, err
	} else {
		addrs := make([]string, w.router.NumPS())
		for i := range addrs {
			addrs[i] = w.router.Client(i).Addr()
		}
		fmt.Fprintf(stdout, "  ps           %d parameter servers from the service discovery: %s\n", len(addrs), strings.Join(addrs, ", "))
	}
	cctx, cancel := context.WithTimeout(ctx, f.PSTimeout)
	err = w.router.CreateTables(cctx, tables)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("create the embedding tables: %w", err)
	}
	if w.barrier, err = barrier.NewRemote(barrier.RemoteConfig{Client: w.router.Client(0).RPC(), Name: barrierName,
		Capacity: r.workers, CallTimeout: f.PSTimeout}); err != nil {
		return nil, err
	}
	cfg := dnn.Config{Features: features, DenseDim: schema.DenseDim(), Hidden: hidden, Optimizer: dnn.Optimizer(f.DenseOptimizer),
		LearningRate: f.DenseLearningRate, EmbeddingLearningRates: []float32{float32(f.EmbeddingLearningRate)}, Seed: denseSeed}
	if r.workers > 1 {
		w.sync = &denseSync{client: w.router.Client(0), index: r.index, count: r.workers, timeout: f.PSTimeout,
			startTimeout: f.DiscoveryTimeout, barrier: w.barrier, st: st, log: log}
		cfg.SyncGradients = w.sync.reduce
	}
	if w.model, err = dnn.New(cfg, timedStore{store: ps.RouterStore{Router: w.router}, st: st}); err != nil {
		return nil, cli.Usage(err)
	}
	st.watch(w.model)
	fmt.Fprintf(stdout, "  model        %v, %s\n", w.model, r)
	if r.chief() {
		w.checkpointer = &tablesCheckpointer{Checkpointer: cp, dir: rc.ModelDir, router: w.router, log: log}
	} else {
		w.checkpointer = workerCheckpointer{cp}
	}
	return w, nil
}

// dnnFeatures are the model's features, one per sparse feature of the schema, each with a table
// of its own: dim --embedding_dim, the reference's Adagrad (initial accumulator 0.1) at
// --embedding_learning_rate, new entries random uniform in [-0.05, 0.05).
func dnnFeatures(f cputrainingspec.TrainFlags, schema batch.Schema) ([]dnn.Feature, []*pspb.TableConfig, error) {
	slots, err := sparseSlots(f.SparseFeatures, schema)
	if err != nil {
		return nil, nil, err
	}
	var (
		features []dnn.Feature
		tables   []*pspb.TableConfig
	)
	for i, name := range schema.Sparse {
		features = append(features, dnn.Feature{Name: name, Slot: slots[i], Dim: f.EmbeddingDim})
		t := inprocess.TableConfig(name, f.EmbeddingDim, float32(f.EmbeddingLearningRate))
		if err := ps.CheckTableConfig(t); err != nil {
			return nil, nil, fmt.Errorf("--sparse_features: %w", err)
		}
		tables = append(tables, t)
	}
	return features, tables, nil
}

// parseHidden reads --hidden: widths, a comma list ("" for none).
func parseHidden(s string) ([]int, error) {
	out := []int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(item))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--hidden %q: want positive widths, a comma list", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// startLocalPS starts n parameter servers with tables, each on a loopback listener.
func (w *worker) startLocalPS(n int, tables []*pspb.TableConfig, log *slog.Logger) ([]string, error) {
	var addrs []string
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		// Each table draws its initial values from a generator of its own, so that the tables of
		// these servers, updated concurrently, start the same in every run: the run repeats.
		r, err := ps.Start(lis, ps.Config{Index: i, NumPS: n, Tables: tables, Logger: log.With("ps", i),
			InitGenerator: initializer.PerTable})
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		w.servers = append(w.servers, r)
		addrs = append(addrs, r.Addr())
	}
	return addrs, nil
}

// close closes the router and stops the parameter servers of this process.
func (w *worker) close() error {
	var errs []error
	if w.router != nil {
		errs = append(errs, w.router.Close())
	}
	for _, s := range w.servers {
		ctx, cancel := context.WithTimeout(context.Background(), psStopTimeout)
		errs = append(errs, s.Stop(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

// findPS waits, at most wait, until the service discovery lists the job's numPS parameter servers
// and each of them answers its health check as the index it is registered under, healthy (a
// registration a crashed server left behind is replaced by its successor's meanwhile).
func findPS(ctx context.Context, disc discovery.ServiceDiscovery, numPS int, callTimeout, wait time.Duration, log *slog.Logger) (*ps.Router, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		got, err := disc.Query(wctx, psServerType)
		switch {
		case err != nil:
			last = fmt.Errorf("query %s: %w", psServerType, err)
		case !complete(got, numPS):
			last = fmt.Errorf("%d of %d parameter servers registered (%v)", len(got), numPS, got)
		default:
			addrs := make([]string, numPS)
			for i := range addrs {
				addrs[i] = got[i]
			}
			router, err := ps.NewRouter(ps.RouterConfig{Addrs: addrs, CallTimeout: callTimeout})
			if err != nil {
				return nil, err
			}
			if err = checkHealth(wctx, router, min(callTimeout, healthTimeout)); err == nil {
				log.Info("parameter servers found", "addrs", addrs)
				return router, nil
			}
			router.Close()
			var unhealthy *unhealthyError
			if errors.As(err, &unhealthy) {
				return nil, err
			}
			last = err
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("discovery: the job's %d parameter servers (server type %q) are not all up after --discovery_timeout %v: %w (start cmd/ps --num_ps=%d --index=<i> with the same discovery flags)",
				numPS, psServerType, wait, last, numPS)
		case <-time.After(findPoll):
		}
	}
}

// findPoll spaces findPS's tries; healthTimeout bounds one health check while the servers are
// looked for.
const (
	findPoll      = 200 * time.Millisecond
	healthTimeout = 5 * time.Second
)

// complete reports whether got has indices 0..n-1.
func complete(got map[int]string, n int) bool {
	for i := 0; i < n; i++ {
		if got[i] == "" {
			return false
		}
	}
	return true
}

// unhealthyError is a parameter server whose machine is not healthy (ps_check_hooks).
type unhealthyError struct{ report string }

func (e *unhealthyError) Error() string { return strings.ReplaceAll(e.report, "\n", "; ") }

// checkHealth checks that every server answers as the index the router has it at, of as many
// servers, and that their machines are healthy (ps_check_hooks' check, through
// pscheck.RemoteProbe), each call bounded by timeout.
func checkHealth(ctx context.Context, router *ps.Router, timeout time.Duration) error {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := router.Health(hctx); err != nil {
		return fmt.Errorf("parameter server health: %w", err)
	}
	clients := make([]pspb.ParameterServerClient, router.NumPS())
	for i := range clients {
		clients[i] = router.Client(i).RPC()
	}
	probe := pscheck.RemoteProbe(clients, timeout)
	unhealthy := map[int]*opspb.MachineHealthResult{}
	for i := range clients {
		health, err := probe(ctx, i)
		if err != nil {
			return err
		}
		if len(health) > 0 {
			res := &opspb.MachineHealthResult{}
			if err := proto.Unmarshal(health, res); err != nil {
				return fmt.Errorf("PS %d health result: %w", i, err)
			}
			unhealthy[i] = res
		}
	}
	if len(unhealthy) > 0 {
		return &unhealthyError{report: pscheck.FormatReport(unhealthy)}
	}
	return nil
}

// hooks are the worker's hooks of the training loop: with several workers the job's start (the
// chief restores before anyone trains, and all check they start at the same step), the step gate
// (nobody starts a step before the chief has finished the previous one, its checkpoint included)
// and the agreed stop; on the chief the parameter servers' health checker, which places the
// barrier when one is unhealthy.
func (w *worker) hooks() []runhook.Hook {
	var hooks []runhook.Hook
	if w.sync != nil {
		hooks = append(hooks, &syncHook{s: w.sync, model: w.model, chief: w.r.chief()})
	}
	if w.r.chief() {
		clients := make([]pspb.ParameterServerClient, w.router.NumPS())
		for i := range clients {
			clients[i] = w.router.Client(i).RPC()
		}
		hooks = append(hooks, pscheck.NewHook(pscheck.Config{Barrier: w.barrier, NumPS: w.router.NumPS(),
			Probe: pscheck.RemoteProbe(clients, w.f.PSTimeout)}))
	}
	return hooks
}

// awaitChief makes a worker other than the chief wait until the chief has restored (the chief
// meets it at the start rendezvous after its restore); the chief does not wait here.
func (w *worker) awaitChief(ctx context.Context) error {
	if w.sync == nil || w.r.chief() {
		return nil
	}
	return w.sync.start(ctx)
}

// checkFresh fails when the chief starts a job without a checkpoint on parameter servers whose
// tables hold entries already (an earlier job's: a job owns its servers; restoring a checkpoint
// replaces what they hold).
func (w *worker) checkFresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.f.PSTimeout)
	defer cancel()
	stats, err := w.router.Stats(ctx)
	if err != nil {
		return fmt.Errorf("parameter server stats: %w", err)
	}
	for i, st := range stats {
		for _, t := range st.GetTables() {
			if t.GetEntries() > 0 {
				return fmt.Errorf("ps %d (%s): table %q holds %d entries, and --model_dir has no checkpoint: the servers hold an earlier job's tables (start new parameter servers for a new job)",
					i, w.router.Client(i).Addr(), t.GetName(), t.GetEntries())
			}
		}
	}
	return nil
}

// report prints the training's throughput and where its time went.
func (w *worker) report(out io.Writer, st *status) {
	s := w.model.Stats()
	steps, wall, read := st.throughput()
	if steps == 0 || wall <= 0 {
		return
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / wall.Seconds() }
	other := wall - read - s.StepTime()
	fmt.Fprintf(out, "throughput   %.0f examples/s: %d examples in %d steps, %.2f s; time split: read %.0f%%, input %.0f%%, lookup %.0f%%, layout %.0f%%, dense %.0f%%, apply %.0f%%, other %.0f%%\n",
		float64(s.Examples)/wall.Seconds(), s.Examples, steps, wall.Seconds(),
		pct(read), pct(s.Input), pct(s.Lookup), pct(s.Layout), pct(s.Dense), pct(s.Apply), pct(max(0, other)))
	fmt.Fprintf(out, "ps lookups   %d calls, %d ids, mean %.2f ms, max %.2f ms; applies %d calls, mean %.2f ms\n",
		s.Lookups, s.LookupIDs, float64(s.MeanLookupLatency())/1e6, float64(s.LookupMax)/1e6, s.Applies, meanMs(s.ApplyTime, s.Applies))
}

func meanMs(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(n) / 1e6
}

// timedStore is an embedding store whose calls are timed into the status's histograms.
type timedStore struct {
	store dnn.EmbeddingStore
	st    *status
}

var _ dnn.EmbeddingStore = ps.RouterStore{}

func (s timedStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	start := time.Now()
	err := s.store.Lookup(ctx, table, ids, out)
	s.st.lookup.WithLabelValues(table).Observe(time.Since(start).Seconds())
	return err
}

func (s timedStore) Apply(ctx context.Context, table string, ids []int64, grads []float32, step int64, lr []float32) error {
	start := time.Now()
	err := s.store.Apply(ctx, table, ids, grads, step, lr)
	s.st.apply.WithLabelValues(table).Observe(time.Since(start).Seconds())
	return err
}
