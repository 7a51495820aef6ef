// Package online is Monolith's online training on one machine, end to end, with nothing to
// install (cmd/online): an in-process Kafka broker; a producer of a drifting synthetic click
// stream (the ground truth's id weights change partway); the trainer, a dnn on 2 parameter servers
// over loopback gRPC, reading the stream through the Kafka client and the job's stream source;
// parameter sync pushing its updates every second into a model server behind agent v3
// (pkg/agent/inprocserving); and a scorer that sends the newest events to Predict on the served
// model and on a frozen copy exported at the same moment (before the drift), which gets no pushes.
//
// Every report it prints a row: the events produced and trained, the lag, the served and frozen
// model's AUC on the newest events (scored before they are served: progressive validation), and
// the freshness of the events served in that interval (event produced -> the first moment the
// served model includes it: every PS sub-graph has taken a push whose updates include its time).
// It ends with one line:
//
//	online: events=<n> freshness p50=<a>s p99=<b>s served auc=<x> frozen auc=<y>
package online

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/agent/inprocserving"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/paramsync"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess"
	"github.com/monolith-go/monolith/pkg/trainer/inprocess/inprocexport"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/kafkastream"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

//go:embed agent.conf
var agentConf []byte

// The demo's names.
const (
	Topic       = "events"
	ServedModel = "online"
	FrozenModel = "frozen"
	group       = "online-trainer"
)

// Data is the click stream's ground truth before the drift.
var Data = synth.Config{Seed: 11, NumDense: 4, NumSlots: 4, Vocab: 2000}

// Config is a run's shape.
type Config struct {
	// Rate is the events produced per second; Duration how long the producer runs.
	Rate     float64
	Duration time.Duration
	// Warmup is how long the trainer trains before the export that serving starts from (and the
	// frozen copy is); DriftAfter when (from the start) the ground truth drifts.
	Warmup, DriftAfter time.Duration
	// SyncInterval is parameter sync's push period; ReportEvery the rows' period.
	SyncInterval, ReportEvery time.Duration
	// Window is how many of the newest events each row scores.
	Window int
	// BatchSize, NumPS, Dim and Hidden shape the trainer.
	BatchSize, NumPS, Dim int
	Hidden                []int
	// DriftSeed draws the drifted ground truth.
	DriftSeed uint64
	// WorkDir holds the checkpoint and the exports ("" a temporary directory, removed after).
	WorkDir string
	// StatusAddr is the agent's status endpoint ("" none).
	StatusAddr string
	Logger     *slog.Logger
}

// DefaultConfig is cmd/online's defaults.
func DefaultConfig() Config {
	return Config{Rate: 5000, Duration: 45 * time.Second, Warmup: 8 * time.Second, DriftAfter: 20 * time.Second,
		SyncInterval: time.Second, ReportEvery: 3 * time.Second, Window: 2000, BatchSize: 256, NumPS: 2, Dim: 8,
		Hidden: []int{64, 32}, DriftSeed: 12}
}

func (c Config) check() error {
	switch {
	case !(c.Rate > 0):
		return errkind.New(errkind.Value, "online: rate %v events/s: want more than 0", c.Rate)
	case c.Warmup <= 0 || c.Duration <= c.Warmup:
		return errkind.New(errkind.Value, "online: warmup %v and duration %v: want 0 < warmup < duration", c.Warmup, c.Duration)
	case c.DriftAfter < c.Warmup || c.DriftAfter >= c.Duration:
		return errkind.New(errkind.Value, "online: drift after %v: want between the warmup (%v) and the duration (%v)", c.DriftAfter, c.Warmup, c.Duration)
	case c.SyncInterval <= 0 || c.ReportEvery <= 0:
		return errkind.New(errkind.Value, "online: sync interval %v and report interval %v must be positive", c.SyncInterval, c.ReportEvery)
	case c.Window < 10 || c.BatchSize < 1 || c.NumPS < 1 || c.Dim < 1:
		return errkind.New(errkind.Value, "online: window %d (at least 10), batch size %d, PS %d, dim %d", c.Window, c.BatchSize, c.NumPS, c.Dim)
	}
	return nil
}

// Row is one report.
type Row struct {
	At                time.Duration // since the start
	Produced, Trained int64
	// Lag is the events produced and not yet trained.
	Lag int64
	// Served and Frozen are the models' AUC on the newest Window events (0: not scored).
	Served, Frozen float64
	// P50 and P99 are the freshness of the events served since the last row (seconds), N of them.
	P50, P99 float64
	N        int
	Drifted  bool
}

// Summary is what a run measured.
type Summary struct {
	Events   int64   // produced (acknowledged)
	Trained  int64   // trained on
	P50, P99 float64 // freshness of every event produced while sync ran, seconds
	Served   int     // events whose freshness was measured
	// ServedAUC and FrozenAUC are the last row's (the newest events, after the drift).
	ServedAUC, FrozenAUC float64
	Rows                 []Row
}

// Line is the summary's last line.
func (s *Summary) Line() string {
	return fmt.Sprintf("online: events=%d freshness p50=%.2fs p99=%.2fs served auc=%.4f frozen auc=%.4f", s.Events, s.P50, s.P99, s.ServedAUC, s.FrozenAUC)
}

// Run runs the demo until cfg.Duration (and the trainer has caught up) or ctx ends, printing its
// rows on out.
func Run(ctx context.Context, cfg Config, out io.Writer) (_ *Summary, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	work := cfg.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "monolith-online"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	broker, err := embedded.Start(ctx, embedded.Options{Topics: []string{Topic}, Partitions: 1, Ephemeral: true})
	if err != nil {
		return nil, fmt.Errorf("online: the Kafka broker: %w", err)
	}
	defer broker.Stop()
	tj, err := inprocess.Start(inprocess.Config{Data: Data, Dim: cfg.Dim, NumPS: cfg.NumPS, Hidden: cfg.Hidden, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("online: the trainer: %w", err)
	}
	defer tj.Close()
	for _, s := range tj.Servers {
		s.Server.SetTrackTouched(true)
	}
	fmt.Fprintf(out, "Monolith online training: Kafka (in-process, %s, topic %s) -> trainer (dnn, %d PS) -> parameter sync every %v -> model server behind agent v3\n",
		broker.Addr(), Topic, cfg.NumPS, cfg.SyncInterval)
	fmt.Fprintf(out, "  stream   %.0f events/s for %v; the ground truth drifts at %v\n", cfg.Rate, cfg.Duration, cfg.DriftAfter)
	fmt.Fprintf(out, "  serving  %s follows the trainer by parameter sync; %s is its copy exported at %v (before the drift), never pushed to\n",
		ServedModel, FrozenModel, cfg.Warmup)

	start := time.Now()
	fresh := newFreshness(ServedModel, cfg.NumPS)
	prod, err := newProducer(broker.Addr(), Topic, cfg.Rate, tj.Gen, cfg.DriftSeed, start.Add(cfg.DriftAfter), cfg.Window, fresh)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait: everything stops
	prodDone := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		prodDone <- prod.run(ctx, start.Add(cfg.Duration))
	}()

	tr := &trainer{job: tj, cfg: cfg, workDir: work, log: log, exported: make(chan []string, 1), stop: make(chan struct{})}
	stream, err := tr.stream(broker.Addr())
	if err != nil {
		return nil, err
	}
	trainDone := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		trainDone <- tr.run(ctx, stream, start)
	}()

	// Serving starts from the warmed-up export.
	var bases []string
	select {
	case bases = <-tr.exported:
	case err := <-trainDone:
		return nil, fmt.Errorf("online: the trainer stopped before its export: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fmt.Fprintf(out, "  export   step %d at %v: %s and %s\n", tj.Model.GlobalStep(), time.Since(start).Round(100*time.Millisecond), bases[0], bases[1])
	subs := []string{"entry"}
	for i := range cfg.NumPS {
		subs = append(subs, fmt.Sprintf("ps_%d", i))
	}
	ready := make(chan inprocserving.Ready, 1)
	servingDone := make(chan error, 1)
	// Serving stops last (after the pushers' last push), also on a signal: not with ctx.
	sctx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	wg.Add(1)
	go func() {
		defer wg.Done()
		servingDone <- inprocserving.Run(sctx, inprocserving.Options{
			Conf: agentConf, Env: agentconf.MapEnv(map[string]string{"MY_POD_NAME": "online-0", "SHARD_ID": "0", "MONOLITH_HOST_SHARD_N": "1", "TCE_PSM": "monolith.online"}),
			Models:     []inprocserving.Model{{Name: ServedModel, Base: bases[0], SubGraphs: subs}, {Name: FrozenModel, Base: bases[1], SubGraphs: subs}},
			StatusAddr: cfg.StatusAddr, Observer: fresh.pushed, Logger: log,
			OnReady: func(r inprocserving.Ready) { ready <- r },
		})
	}()
	var rd inprocserving.Ready
	select {
	case rd = <-ready:
	case err := <-servingDone:
		return nil, fmt.Errorf("online: serving: %w", err)
	case err := <-trainDone:
		return nil, fmt.Errorf("online: the trainer: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sc, err := newScorer(rd.TFSAddr)
	if err != nil {
		return nil, err
	}
	defer sc.close()
	if err := sc.waitServed(ctx, prod.newest()); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  serving  model server %s, AgentService %s", rd.TFSAddr, rd.AgentServiceAddr)
	if rd.StatusURL != "" {
		fmt.Fprintf(out, ", agent status %s", rd.StatusURL)
	}
	fmt.Fprintf(out, " (ready at %v)\n\n", time.Since(start).Round(100*time.Millisecond))

	// Parameter sync: a pusher per training PS, to the replicas the agent's HeartBeat lists.
	targets, err := entry.NewAgentReplicas(entry.AgentOptions{Addr: rd.AgentServiceAddr, Interval: inprocserving.SyncInterval, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("online: parameter sync targets: %w", err)
	}
	defer targets.Close()
	pctx, stopPushing := context.WithCancel(context.WithoutCancel(ctx))
	var pushers sync.WaitGroup
	var running []*paramsync.Pusher
	stopSync := func() {
		stopPushing()
		pushers.Wait()
		for _, p := range running {
			p.Close()
		}
		running = nil
	}
	defer stopSync()
	for i, s := range tj.Servers {
		p, err := paramsync.New(paramsync.Config{Source: s.Server, Targets: targets, Model: ServedModel, Shard: i, Interval: cfg.SyncInterval, Logger: log})
		if err != nil {
			return nil, err
		}
		running = append(running, p)
		pushers.Add(1)
		go func() {
			defer pushers.Done()
			p.Run(pctx)
		}()
	}
	fresh.start()

	sum := &Summary{}
	fmt.Fprintf(out, "%7s %9s %9s %7s %10s %10s %10s %10s\n", "time", "produced", "trained", "lag", "served", "frozen", "fresh p50", "fresh p99")
	report := func() error {
		row, err := tr.row(ctx, start, prod, sc, fresh)
		if err != nil {
			return err
		}
		sum.Rows = append(sum.Rows, row)
		drift := ""
		if row.Drifted {
			drift = "  (drifted)"
		}
		fmt.Fprintf(out, "%6.0fs %9d %9d %7d %10.4f %10.4f %9.2fs %9.2fs%s\n", row.At.Seconds(), row.Produced, row.Trained, row.Lag, row.Served, row.Frozen, row.P50, row.P99, drift)
		return nil
	}
	tick := time.NewTicker(cfg.ReportEvery)
	defer tick.Stop()
	producing := true
	for producing {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-prodDone:
			if err != nil {
				return nil, err
			}
			producing = false
		case err := <-trainDone:
			return nil, fmt.Errorf("online: the trainer: %w", err)
		case err := <-servingDone:
			return nil, fmt.Errorf("online: serving stopped: %w", err)
		case <-tick.C:
			if err := report(); err != nil {
				return nil, err
			}
		}
	}
	// The trainer catches up, the last updates are pushed, the last row is scored.
	if err := tr.catchUp(ctx, prod.produced.Load(), 30*time.Second); err != nil {
		return nil, err
	}
	close(tr.stop)
	if err := <-trainDone; err != nil {
		return nil, fmt.Errorf("online: the trainer: %w", err)
	}
	stopSync()
	if err := report(); err != nil {
		return nil, err
	}
	last := sum.Rows[len(sum.Rows)-1]
	sum.Events, sum.Trained, sum.ServedAUC, sum.FrozenAUC = prod.produced.Load(), tr.trained(), last.Served, last.Frozen
	sum.P50, sum.P99, sum.Served = fresh.quantiles(true)
	fmt.Fprintf(out, "\n%s\n", sum.Line())
	stopServing()
	if err := <-servingDone; err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("online: serving stopped", "err", err)
	}
	return sum, nil
}

// trainer is the online trainer: the stream's batches through the dnn on the parameter servers,
// the export once warmed up.
type trainer struct {
	job      *inprocess.Job
	cfg      Config
	workDir  string
	log      *slog.Logger
	exported chan []string // the export bases, once
	stop     chan struct{} // closed: the stream ends

	mu sync.Mutex
	n  int64 // examples trained
}

func (t *trainer) trained() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// stream is the job's stream source over the topic.
func (t *trainer) stream(addr string) (*job.Stream, error) {
	kc := kafka.DefaultConfig()
	kc.Topics = []string{Topic}
	g, servers := group, addr
	kc.GroupID, kc.Servers = &g, &servers
	kc.HasHeader = false
	kc.MessagePollTimeout = 100
	in := batch.SchemaInputs(t.job.Gen.Schema())
	return job.NewStream(job.Stream{Name: "topic " + Topic, OpenRecords: kafkastream.Opener(kc, t.log), Inputs: in,
		BatchSize: t.cfg.BatchSize, Linger: 20 * time.Millisecond, Stop: t.stop})
}

func (t *trainer) run(ctx context.Context, s *job.Stream, start time.Time) error {
	in, err := s.Open(ctx, job.Position{})
	if err != nil {
		return err
	}
	defer in.Close()
	exported := false
	for {
		b, err := in.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := t.job.Model.Step(ctx, b); err != nil {
			return fmt.Errorf("train step %d: %w", t.job.Model.GlobalStep()+1, err)
		}
		t.mu.Lock()
		t.n += int64(b.Size())
		t.mu.Unlock()
		if !exported && time.Since(start) >= t.cfg.Warmup {
			exported = true
			bases := []string{filepath.Join(t.workDir, "export", ServedModel), filepath.Join(t.workDir, "export", FrozenModel)}
			if _, err := inprocexport.Export(ctx, t.job, filepath.Join(t.workDir, "model"), t.cfg.NumPS, 1, bases...); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			t.exported <- bases
		}
	}
}

// catchUp waits until the trainer has trained n events (within d).
func (t *trainer) catchUp(ctx context.Context, n int64, d time.Duration) error {
	deadline := time.Now().Add(d)
	for t.trained() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("online: the trainer trained %d of %d events within %v of the stream's end", t.trained(), n, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// row scores the newest events and reads the counters.
func (t *trainer) row(ctx context.Context, start time.Time, p *producer, sc *scorer, f *freshness) (Row, error) {
	evs := p.newest()
	served, frozen, err := sc.auc(ctx, evs)
	if err != nil {
		return Row{}, err
	}
	r := Row{At: time.Since(start), Produced: p.produced.Load(), Trained: t.trained(), Served: served, Frozen: frozen, Drifted: p.drifted.Load()}
	r.Lag = max(0, r.Produced-r.Trained)
	r.P50, r.P99, r.N = f.quantiles(false)
	return r, nil
}
