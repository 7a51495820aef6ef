package faults

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/monolith-go/monolith/faults/netns"
	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/paramsync"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// Scenario 3: the training PS and the serving replica it syncs to are partitioned (every packet
// to and from the replica's port dropped) for 10 s while training runs. Training does not wait on
// the pushes: during the partition it never pauses for 2 s (a push try's timeout is 3 s), and its
// rate stays that before it (at least half: the machine is shared). After the partition heals the replica serves exactly the trainer's embeddings of every
// trained id again (training paused at the heal) within 2 sync intervals: the ids of a push that
// failed go again in the next one, a target that missed a push gets a catch-up push of every
// entry, and tries still retrying at the heal deliver their push late. The pusher runs as cmd/ps
// runs it (3 tries of 3 s each), every 2 s.
//
// The training PS, the model and the pusher are this process's (pkg/modelserver/exporttest, as
// pkg/paramsync's tests); the replica is cmd/model_server, a process.
func TestPartitionTrainingPSFromServing(t *testing.T) {
	netns.Require(t)
	ctx := tctx(t, 2*time.Minute)
	const (
		// Shorter than cmd/ps's default (5 s), so that 2 intervals are a tight bound: the pusher
		// dials a target anew after a try timed out (the old connection would wait out TCP's
		// retransmission backoff: 5.4 to 5.9 s, 3 intervals, before it did).
		interval  = 2 * time.Second
		partition = 10 * time.Second
	)
	j := exporttest.NewJob(t, 1, []int{8})
	j.PS[0].SetTrackTouched(true)
	j.Train(ctx, 10)
	base := filepath.Join(t.TempDir(), "demo")
	j.Export(ctx, base, 1)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ms := startProc(t, "model_server", modelServerBin.Path(t), nil, "--host=127.0.0.1", "--port="+strconv.Itoa(port), "--status_addr=",
		"--log_level=warn", "--model_name=demo:ps_0", "--model_base_path="+filepath.Join(base, "ps_0"), "--file_system_poll_wait_seconds=1")

	tables := []string{"slot_1", "slot_2", "slot_3"}
	// The ids trained before the export (stream 1) and in the background (stream 3).
	ids := trainedIDs(append(j.Examples(1, 10*64), j.Examples(3, 20*64)...), tables)
	// served compares the replica's embeddings of the trained ids with the trainer's, on a new
	// connection each time: the test's own connection would wait out the partition as the
	// pusher's does.
	served := func() (bool, error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return false, err
		}
		defer cc.Close()
		client := servingapis.NewPredictionServiceClient(cc)
		for _, table := range tables {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := client.Predict(sctx, &servingapis.PredictRequest{
				ModelSpec: &servingapis.ModelSpec{Name: "demo:ps_0", SignatureName: psshard.Signature},
				Inputs:    psshard.Request(table, ids[table])})
			cancel()
			if err != nil {
				return false, err
			}
			got := make([]float32, len(ids[table])*exporttest.Dim)
			if err := psshard.LookupResult(resp.GetOutputs(), len(ids[table]), got); err != nil {
				return false, err
			}
			want := j.Lookup(ctx, table, ids[table])
			for i := range got {
				if got[i] != want[i] {
					return false, nil
				}
			}
		}
		return true, nil
	}
	eventually(t, 30*time.Second, "the model server serves demo:ps_0", func() bool {
		_, err := served()
		return err == nil && !ms.exited()
	})

	reg := prometheus.NewRegistry()
	metrics, err := paramsync.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var pushLog syncbuf.Buffer
	// The pusher as cmd/ps runs it: paramsync's default timeout (3 s a try) and retries (3 tries).
	p, err := paramsync.New(paramsync.Config{Source: j.PS[0], Targets: paramsync.StaticTargets{addr}, Model: "demo", Shard: 0,
		Interval: interval, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(&pushLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pctx, stopPush := context.WithCancel(ctx)
	pushed := make(chan struct{})
	go func() { defer close(pushed); p.Run(pctx) }()
	defer func() { stopPush(); <-pushed }()

	// Training runs in the background from here on, counting its steps.
	tr := startTraining(ctx, j)
	defer tr.stop()
	took := eventually(t, 3*interval, "the replica serves the trainer's embeddings before the partition (training paused)", func() bool {
		tr.pause(true)
		ok, _ := served()
		return ok
	})
	t.Logf("before the partition: the replica serves the trainer's embeddings (%v with training paused)", took.Round(time.Millisecond))
	tr.pause(false)
	before := tr.measure(interval)

	cut := netns.Partition(t, port)
	during := tr.measure(partition)
	tr.pause(true) // the trainer's embeddings stay as they are from here: the replica must reach them
	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	var lastErr error
	deadline := healed.Add(2 * interval)
	for {
		ok, err := served()
		if ok {
			break
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("the replica does not serve the trainer's embeddings within 2 sync intervals (%v) of the heal (last error %v); pusher log:\n%s",
				2*interval, lastErr, pushLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	recovery := time.Since(healed)
	m := gather(t, reg)
	t.Logf("training: %s before the partition, %s during it (%v); recovery: %v after the heal the replica serves the trainer's embeddings (bound: 2 sync intervals, %v)",
		before, during, partition, recovery.Round(time.Millisecond), 2*interval)
	t.Logf("parameter sync: %v catch-up pushes (the first contact's among them), %v ids failed during the partition", m[`monolith_parameter_sync_catch_ups_total{target="`+addr+`"}`], failedIDs(m))
	// A training that waited on the stalled pushes would stop for a try's timeout (3 s) at a
	// time; the rate varies with the load of the shared machine.
	if during.perSecond < 0.5*before.perSecond || during.maxGap > 2*time.Second {
		t.Errorf("training ran at %s during the partition, %s before: want at least half the rate, and no pause of 2 s", during, before)
	}
	tr.stop()
	if tr.err() != nil {
		t.Errorf("training: %v", tr.err())
	}
	if ms.exited() {
		t.Errorf("the model server exited: %v", ms.cmd.ProcessState)
	}
}

// trainedIDs are the ids of the examples, per table.
func trainedIDs(examples []*examplepb.Example, tables []string) map[string][]int64 {
	want := map[string]bool{}
	for _, tb := range tables {
		want[tb] = true
	}
	out := map[string][]int64{}
	seen := map[string]map[int64]bool{}
	for _, ex := range examples {
		for _, nf := range ex.GetNamedFeature() {
			name := nf.GetName()
			if !want[name] {
				continue
			}
			if seen[name] == nil {
				seen[name] = map[int64]bool{}
			}
			for _, f := range nf.GetFeature().GetFidV2List().GetValue() {
				if id := int64(f); !seen[name][id] {
					seen[name][id] = true
					out[name] = append(out[name], id)
				}
			}
		}
	}
	return out
}

// training is a model training in the background on batches of its own, counting steps.
type training struct {
	steps  atomic.Int64
	last   atomic.Int64 // when the last step ended, Unix ns
	maxGap atomic.Int64 // the longest time between two steps since measure began, ns
	paused atomic.Bool
	idle   sync.Mutex // held by the loop while a step runs
	cancel context.CancelFunc
	done   chan struct{}
	e      error // set before done is closed
}

// startTraining trains j on 20 batches of 64 examples of stream 3, over and over.
func startTraining(ctx context.Context, j *exporttest.Job) *training {
	ex := j.Examples(3, 20*64)
	batches := make([]*batch.Batch, 20)
	for i := range batches {
		batches[i] = j.Batch(ex[i*64 : (i+1)*64])
	}
	ctx, cancel := context.WithCancel(ctx)
	tr := &training{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for i := 0; ctx.Err() == nil; i++ {
			tr.idle.Lock()
			if tr.paused.Load() {
				tr.idle.Unlock()
				time.Sleep(5 * time.Millisecond)
				continue
			}
			_, err := j.Model.Step(ctx, batches[i%len(batches)])
			tr.idle.Unlock()
			if err != nil && ctx.Err() == nil {
				tr.e = err
				return
			}
			now := time.Now().UnixNano()
			if last := tr.last.Swap(now); last != 0 && !tr.paused.Load() {
				if gap := time.Duration(now - last); gap > time.Duration(tr.maxGap.Load()) {
					tr.maxGap.Store(int64(gap))
				}
			}
			tr.steps.Add(1)
		}
	}()
	return tr
}

// pause pauses (or resumes) the training; once pause(true) returns no step runs.
func (tr *training) pause(p bool) {
	tr.idle.Lock()
	tr.paused.Store(p)
	tr.last.Store(0) // a pause is no gap between steps
	tr.idle.Unlock()
}

// err is the error that stopped the training, if any (call after stop).
func (tr *training) err() error { return tr.e }

// stop stops the training; a second stop does nothing.
func (tr *training) stop() { tr.cancel(); <-tr.done }

// stepRate is the steps over a window.
type stepRate struct {
	steps     int64
	window    time.Duration
	perSecond float64
	maxGap    time.Duration // the longest time between two steps
}

func (r stepRate) String() string {
	return strconv.FormatFloat(r.perSecond, 'f', 1, 64) + " steps/s (" + strconv.FormatInt(r.steps, 10) + " steps in " + r.window.Round(10*time.Millisecond).String() +
		", at most " + r.maxGap.Round(100*time.Microsecond).String() + " between two)"
}

// measure counts the steps over the next d.
func (tr *training) measure(d time.Duration) stepRate {
	n0, t0 := tr.steps.Load(), time.Now()
	tr.maxGap.Store(0)
	time.Sleep(d)
	n, w := tr.steps.Load()-n0, time.Since(t0)
	return stepRate{steps: n, window: w, perSecond: float64(n) / w.Seconds(), maxGap: time.Duration(tr.maxGap.Load())}
}

// gather is the registry's metrics by name and labels.
func gather(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// failedIDs sums the failed-ids counters.
func failedIDs(m map[string]float64) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "monolith_parameter_sync_failed_ids_total") {
			n += v
		}
	}
	return n
}
