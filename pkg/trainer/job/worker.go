package job

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strings"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/pscheck"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/densesync"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/dnnckpt"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/psservers"
	"github.com/monolith-go/monolith/pkg/trainer/trainstatus"
)

// denseSeed draws the dense parameters: the same on every worker, which the allreduce then keeps
// in step.
const denseSeed = 1

// barrierName names the job's barrier on PS 0 (the controller's StopTraining, the PS health
// checker).
const barrierName = "train"

// worker is a dnn worker: the model over its embedding tables on parameter servers (started in
// this process, or found through the service discovery), the checkpointer that saves the tables
// with the dense parameters (the chief's), and, in a job of several workers, their meeting points
// on PS 0 (densesync).
type worker struct {
	cfg Config
	r   role

	local        *psservers.Local // the parameter servers of this process, if any
	router       *ps.Router
	model        *dnn.Model
	checkpointer estimator.Checkpointer
	barrier      *barrier.Remote
	sync         *densesync.Sync // nil with one worker
	peers        *peers          // the watch of the job's other processes; nil with one worker
}

// startWorker builds the worker: tables, parameter servers, model, checkpointer.
func startWorker(ctx context.Context, cfg Config, disc discovery.ServiceDiscovery, r role, st *trainstatus.Status,
	cp estimator.Checkpointer, stdout io.Writer, log *slog.Logger) (_ *worker, err error) {
	rc, d := cfg.Run, cfg.DNN
	features, tables, err := dnnFeatures(d, cfg.Schema)
	if err != nil {
		return nil, configError(err)
	}
	w := &worker{cfg: cfg, r: r}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	if rc.NumPS == 0 {
		if w.local, err = psservers.StartLocal(d.LocalPS, tables, tableInit(cfg.Seed), log); err != nil {
			return nil, err
		}
		addrs := w.local.Addrs()
		fmt.Fprintf(stdout, "  ps           %d parameter servers in this process, gRPC on %s\n", len(addrs), strings.Join(addrs, ", "))
		if w.router, err = ps.NewRouter(ps.RouterConfig{Addrs: addrs, CallTimeout: d.PSTimeout}); err != nil {
			return nil, err
		}
		if err := psservers.CheckHealth(ctx, w.router, d.PSTimeout); err != nil {
			return nil, err
		}
	} else if w.router, err = psservers.Find(ctx, disc, rc.NumPS, d.PSTimeout, cfg.DiscoveryTimeout, log, d.PSDialOptions...); err != nil {
		return nil, err
	} else {
		addrs := make([]string, w.router.NumPS())
		for i := range addrs {
			addrs[i] = w.router.Client(i).Addr()
		}
		fmt.Fprintf(stdout, "  ps           %d parameter servers from the service discovery: %s\n", len(addrs), strings.Join(addrs, ", "))
	}
	cctx, cancel := context.WithTimeout(ctx, d.PSTimeout)
	err = w.router.CreateTables(cctx, tables)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("create the embedding tables: %w", err)
	}
	if w.barrier, err = barrier.NewRemote(barrier.RemoteConfig{Client: w.router.Client(0).RPC(), Name: barrierName,
		Capacity: r.workers, CallTimeout: d.PSTimeout}); err != nil {
		return nil, err
	}
	mcfg := dnn.Config{Features: features, DenseDim: cfg.Schema.DenseDim(), Hidden: d.Hidden, Optimizer: dnn.Optimizer(d.DenseOptimizer),
		LearningRate: d.DenseLearningRate, EmbeddingLearningRates: []float32{float32(d.EmbeddingLearningRate)}, Seed: denseSeed}
	if cfg.Seed != 0 {
		mcfg.Seed = cfg.Seed
	}
	if r.workers > 1 {
		w.sync = densesync.New(densesync.Config{Client: w.router.Client(0), Index: r.index, Count: r.workers, Timeout: d.PSTimeout,
			StartTimeout: cfg.DiscoveryTimeout, Barrier: w.barrier, ObserveAllreduce: st.ObserveAllreduce, Log: log})
		w.peers = newPeers()
		mcfg.SyncGradients = func(ctx context.Context, step int64, grads [][]float64) error {
			return w.peers.wait(ctx, func(ctx context.Context) error { return w.sync.Reduce(ctx, step, grads) })
		}
	}
	if w.model, err = dnn.New(mcfg, trainstatus.TimedStore(ps.RouterStore{Router: w.router}, st)); err != nil {
		return nil, configError(err)
	}
	st.Watch(w.model)
	fmt.Fprintf(stdout, "  model        %v, %s\n", w.model, r)
	if r.chief() {
		if err := recordSpec(rc.ModelDir, export.SpecFromDNN(w.model.Config(), cfg.Schema)); err != nil {
			return nil, err
		}
		w.checkpointer = dnnckpt.NewTables(cp, rc.ModelDir, w.router, log)
	} else {
		w.checkpointer = dnnckpt.RestoreOnly{Checkpointer: cp}
	}
	return w, nil
}

// dnnFeatures are the model's features, one per sparse feature of the schema, each with a table
// of its own: dim EmbeddingDim, the reference's Adagrad (initial accumulator 0.1) at
// EmbeddingLearningRate, new entries random uniform in [-0.05, 0.05).
func dnnFeatures(d DNNConfig, schema batch.Schema) ([]dnn.Feature, []*pspb.TableConfig, error) {
	sparse := d.Sparse
	if sparse == nil {
		for _, slot := range d.Slots {
			sparse = append(sparse, SparseFeature{Slot: slot})
		}
	}
	if len(sparse) != len(schema.Sparse) {
		return nil, nil, fmt.Errorf("--sparse_features: %d fid slots for the %d sparse features of the input %v", len(sparse), len(schema.Sparse), schema.Sparse)
	}
	var (
		features []dnn.Feature
		tables   []*pspb.TableConfig
	)
	for i, name := range schema.Sparse {
		sf := sparse[i]
		features = append(features, dnn.Feature{Name: name, Slot: sf.Slot, Dim: d.EmbeddingDim, Pooling: dnn.Pooling(sf.Pooling), Buckets: sf.Buckets})
		t := inprocess.TableConfig(name, d.EmbeddingDim, float32(d.EmbeddingLearningRate))
		if err := ps.CheckTableConfig(t); err != nil {
			return nil, nil, fmt.Errorf("--sparse_features: %w", err)
		}
		tables = append(tables, t)
	}
	return features, tables, nil
}

// recordSpec writes the model's spec into the model dir (export.SpecFile, what cmd/export reads),
// or checks that the one there is the same: checkpoints of another spec (other features, slots,
// poolings or buckets) would restore into this model and train, or serve, wrong.
func recordSpec(modelDir string, spec export.ModelSpec) error {
	old, found, err := export.ReadSpecFile(modelDir)
	if err != nil {
		return configError(fmt.Errorf("--model_dir %s: %w", modelDir, err))
	}
	if found {
		if d := export.SpecDiff(spec, old); d != "" {
			return configError(fmt.Errorf("--model_dir %s holds checkpoints of another model (%s): this run's has %s",
				modelDir, export.SpecFile, d))
		}
		return nil
	}
	return export.WriteSpecFile(modelDir, spec)
}

// tableInit gives each table of the parameter servers of this process its generator of initial
// values: the reference's default seed (0), else one drawn from seed and the table's name, so
// that the tables, updated concurrently, start the same in every run of the seed.
func tableInit(seed uint64) func(table string) *initializer.Generator {
	if seed == 0 {
		return initializer.PerTable
	}
	return func(table string) *initializer.Generator {
		h := fnv.New32a()
		fmt.Fprintf(h, "%d/%s", seed, table)
		return initializer.NewGenerator(h.Sum32())
	}
}

// close closes the router and stops the parameter servers of this process.
func (w *worker) close() error {
	var errs []error
	if w.router != nil {
		errs = append(errs, w.router.Close())
	}
	if w.local != nil {
		errs = append(errs, w.local.Stop())
	}
	return errors.Join(errs...)
}

// hooks are the worker's hooks of the training loop: with several workers the job's start (the
// chief restores before anyone trains, and all check they start at the same step), the step gate
// (nobody starts a step before the chief has finished the previous one, its checkpoint included)
// and the agreed stop; on the chief the parameter servers' health checker, which places the
// barrier when one is unhealthy. The step gate waits under the watch of the job's processes.
func (w *worker) hooks() []runhook.Hook {
	var hooks []runhook.Hook
	if w.sync != nil {
		hooks = append(hooks, waitHook{Hook: w.sync.Hook(w.model), p: w.peers})
	}
	if w.r.chief() {
		hooks = append(hooks, pscheck.NewHook(pscheck.Config{Barrier: w.barrier, NumPS: w.router.NumPS(),
			Probe: pscheck.RemoteProbe(psservers.Clients(w.router), w.cfg.DNN.PSTimeout)}))
	}
	return hooks
}

// watchHook starts the watch of the job's other processes (nil with one worker).
func (w *worker) watchHook(disc discovery.ServiceDiscovery) runhook.Hook {
	if w.peers == nil || disc == nil {
		return nil
	}
	psAddrs := make([]string, w.router.NumPS())
	for i := range psAddrs {
		psAddrs[i] = w.router.Client(i).Addr()
	}
	return &watchHook{p: w.peers, targets: func(ctx context.Context) ([]peer, error) {
		return peerTargets(ctx, disc, w.r, w.cfg.Run.ModelDir, psAddrs)
	}}
}

// awaitChief makes a worker other than the chief wait until the chief has restored (the chief
// meets it at the start rendezvous after its restore); the chief does not wait here.
func (w *worker) awaitChief(ctx context.Context) error {
	if w.sync == nil || w.r.chief() {
		return nil
	}
	return w.sync.Start(ctx)
}

// checkFresh fails when the chief starts a job without a checkpoint on parameter servers whose
// tables hold entries already.
func (w *worker) checkFresh(ctx context.Context) error {
	return psservers.CheckFresh(ctx, w.router, w.cfg.DNN.PSTimeout)
}
