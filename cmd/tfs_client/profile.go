package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/cli"
)

// The profile command (tfs_client.py's --cmd_type=profile, its ProfileThread): Predict requests
// for a while, then the latency distribution, the QPS and the failures by gRPC code.
//
// Closed loop (no --target_qps): --parallel_num workers each send a request as soon as their last
// one is answered, as the reference's threads do; latency is the request's round trip. Open loop
// (--target_qps): request k is due at start + k/QPS whatever the answers; a free worker sends the
// next due request, and its latency counts from when it was due, so a server that falls behind
// shows the queueing it causes instead of slowing the client down (coordinated omission). Requests
// due but not sent by the end are reported as unsent.

// errDurationOver ends the sending of requests when --profile_duration is over.
var errDurationOver = errors.New("profile duration over")

// profileLoad is one profile run's settings.
type profileLoad struct {
	clients  []servingapis.PredictionServiceClient
	reqs     []*servingapis.PredictRequest
	workers  int
	duration time.Duration
	qps      float64 // 0: closed loop
	timeout  time.Duration
	progress time.Duration
	seed     uint64
	log      *slog.Logger
}

// workerStats is what one worker measured; the progress lines read it while the worker runs.
type workerStats struct {
	mu       sync.Mutex
	latency  histogram // successful requests: from due (open loop) or sent to answered
	service  histogram // successful requests: from sent to answered
	errs     map[codes.Code]uint64
	firstErr map[codes.Code]string
}

// profileResult is what a run measured.
type profileResult struct {
	elapsed          time.Duration // from the start until the last answer
	interrupted      bool          // the run stopped before its duration
	latency, service *histogram
	sent, unsent     uint64
	errs             map[codes.Code]uint64
	firstErr         map[codes.Code]string
}

func (r profileResult) failed() uint64 { return total(r.errs) }

// total is the number of failed requests of errs.
func total(errs map[codes.Code]uint64) uint64 {
	var n uint64
	for _, c := range errs {
		n += c
	}
	return n
}

// run sends the load until the duration is over or ctx is done; requests in flight then finish
// (each within its deadline) and are counted.
func (p *profileLoad) run(ctx context.Context) profileResult {
	start := time.Now()
	end := start.Add(p.duration)
	issue, stopIssuing := context.WithDeadlineCause(ctx, end, errDurationOver)
	defer stopIssuing()
	// Requests in flight outlive an interruption: they end at their own deadline.
	reqCtx := context.WithoutCancel(ctx)
	var interruptedAt atomic.Pointer[time.Time] // when issuing stopped early, for the unsent count
	stopWatch := context.AfterFunc(ctx, func() {
		t := time.Now()
		interruptedAt.Store(&t)
	})
	defer stopWatch()
	stats := make([]*workerStats, p.workers)
	var sent, slot, turn atomic.Uint64
	var wg sync.WaitGroup
	for w := range stats {
		st := &workerStats{errs: map[codes.Code]uint64{}, firstErr: map[codes.Code]string{}}
		stats[w] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(p.seed, uint64(w)+1))
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				var due time.Time
				if p.qps > 0 {
					k := slot.Add(1) - 1
					due = start.Add(time.Duration(float64(k) * float64(time.Second) / p.qps))
					if !due.Before(end) {
						return
					}
					if wait := time.Until(due); wait > 0 {
						timer.Reset(wait)
						select {
						case <-issue.Done():
							return
						case <-timer.C:
						}
					}
				}
				if issue.Err() != nil {
					return
				}
				req := p.reqs[rng.IntN(len(p.reqs))]
				client := p.clients[(turn.Add(1)-1)%uint64(len(p.clients))]
				sent.Add(1)
				rctx, cancel := context.WithTimeout(reqCtx, p.timeout)
				begin := time.Now()
				_, err := client.Predict(rctx, req)
				done := time.Now()
				cancel()
				if due.IsZero() {
					due = begin
				}
				st.mu.Lock()
				if err != nil {
					code := status.Code(err)
					if st.errs[code] == 0 {
						st.firstErr[code] = status.Convert(err).Message()
					}
					st.errs[code]++
				} else {
					st.latency.record(done.Sub(due))
					st.service.record(done.Sub(begin))
				}
				st.mu.Unlock()
			}
		}()
	}

	finished := make(chan struct{})
	var progressDone sync.WaitGroup
	progressDone.Add(1)
	go func() {
		defer progressDone.Done()
		p.logProgress(start, stats, &sent, finished)
	}()
	wg.Wait()
	close(finished)
	progressDone.Wait()

	// Interrupted: issuing ended, and not because the duration was over.
	interrupted := issue.Err() != nil && context.Cause(issue) != errDurationOver
	issueEnd := end
	if interrupted {
		issueEnd = time.Now()
		if t := interruptedAt.Load(); t != nil && t.Before(issueEnd) {
			issueEnd = *t
		}
	}
	res := profileResult{elapsed: time.Since(start), interrupted: interrupted, sent: sent.Load()}
	res.latency, res.service, res.errs, res.firstErr = merge(stats)
	if p.qps > 0 {
		due := uint64(math.Ceil(issueEnd.Sub(start).Seconds() * p.qps))
		if due > res.sent {
			res.unsent = due - res.sent
		}
	}
	return res
}

func merge(stats []*workerStats) (latency, service *histogram, errs map[codes.Code]uint64, firstErr map[codes.Code]string) {
	latency, service = &histogram{}, &histogram{}
	errs, firstErr = map[codes.Code]uint64{}, map[codes.Code]string{}
	for _, st := range stats {
		st.mu.Lock()
		latency.merge(&st.latency)
		service.merge(&st.service)
		for c, n := range st.errs {
			if errs[c] == 0 {
				firstErr[c] = st.firstErr[c]
			}
			errs[c] += n
		}
		st.mu.Unlock()
	}
	return latency, service, errs, firstErr
}

// logProgress logs a line every p.progress until finished is closed.
func (p *profileLoad) logProgress(start time.Time, stats []*workerStats, sent *atomic.Uint64, finished <-chan struct{}) {
	tick := time.NewTicker(p.progress)
	defer tick.Stop()
	var lastOK uint64
	last := start
	for {
		select {
		case <-finished:
			return
		case <-tick.C:
			now := time.Now() // a late tick still reports the real interval
			latency, _, errs, _ := merge(stats)
			qps := float64(latency.n-lastOK) / now.Sub(last).Seconds()
			lastOK, last = latency.n, now
			p.log.Info("profile progress", "elapsed", now.Sub(start).Round(time.Millisecond).String(),
				"duration", p.duration.String(), "requests", sent.Load(), "ok", latency.n, "errors", total(errs),
				"qps", round(qps, 1), "p50_ms", ms(latency.quantile(0.5)), "p99_ms", ms(latency.quantile(0.99)))
		}
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return round(d.Seconds()*1000, 3) }

// latencySummary is a distribution in milliseconds.
type latencySummary struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func summarize(h *histogram) latencySummary {
	return latencySummary{Min: ms(h.min), Mean: ms(h.mean()), P50: ms(h.quantile(0.5)), P90: ms(h.quantile(0.9)),
		P99: ms(h.quantile(0.99)), P999: ms(h.quantile(0.999)), Max: ms(h.max)}
}

// histogramBand is a printed histogram line: the successful requests whose latency is at most
// LeMS and above the line before.
type histogramBand struct {
	LeMS  float64 `json:"le_ms"`
	Count uint64  `json:"count"`
}

// profileSummary is the profile command's report (--profile_json writes it as is).
type profileSummary struct {
	Model       string   `json:"model"`
	Signature   string   `json:"signature"`
	Targets     []string `json:"targets"`
	Input       string   `json:"input"`
	InputSource string   `json:"input_source"`
	Inputs      int      `json:"inputs"`
	Mode        string   `json:"mode"`
	ParallelNum int      `json:"parallel_num"`
	TargetQPS   float64  `json:"target_qps"`
	TimeoutS    float64  `json:"timeout_s"`
	DurationS   float64  `json:"duration_s"`
	ElapsedS    float64  `json:"elapsed_s"`
	Interrupted bool     `json:"interrupted"`
	// Requests were sent; OK succeeded; Errors counts the failed ones by gRPC code, with the
	// first message of each code in ErrorExamples. Unsent (open loop): due but never sent.
	Requests      uint64            `json:"requests"`
	OK            uint64            `json:"ok"`
	Errors        map[string]uint64 `json:"errors"`
	ErrorExamples map[string]string `json:"error_examples"`
	Unsent        uint64            `json:"unsent"`
	// QPS is successful requests per second of the run.
	QPS float64 `json:"qps"`
	// LatencyMS: successful requests, from when they were due (open loop) or sent (closed loop)
	// to the answer. ServiceMS: from sent to answered (the same as LatencyMS in closed loop).
	LatencyMS latencySummary  `json:"latency_ms"`
	ServiceMS latencySummary  `json:"service_ms"`
	Histogram []histogramBand `json:"histogram"`
}

func newSummary(c cmdFlags, model string, targets []string, in inputs, p *profileLoad, res profileResult) profileSummary {
	s := profileSummary{
		Model: model, Signature: c.SignatureName, Targets: targets, Input: in.name, InputSource: in.source,
		Inputs: len(in.tensors), Mode: "closed_loop", ParallelNum: p.workers, TargetQPS: p.qps,
		TimeoutS: p.timeout.Seconds(), DurationS: p.duration.Seconds(), ElapsedS: round(res.elapsed.Seconds(), 3),
		Interrupted: res.interrupted, Requests: res.sent, OK: res.latency.n, Errors: map[string]uint64{},
		ErrorExamples: map[string]string{}, Unsent: res.unsent,
		LatencyMS: summarize(res.latency), ServiceMS: summarize(res.service),
	}
	if p.qps > 0 {
		s.Mode = "open_loop"
	}
	if res.elapsed > 0 {
		s.QPS = round(float64(res.latency.n)/res.elapsed.Seconds(), 1)
	}
	for code, n := range res.errs {
		s.Errors[code.String()] = n
		s.ErrorExamples[code.String()] = res.firstErr[code]
	}
	for _, b := range res.latency.bands() {
		s.Histogram = append(s.Histogram, histogramBand{LeMS: ms(b.Upper), Count: b.Count})
	}
	return s
}

// writeText prints the summary for a reader, ending with the reference's [Profile] line.
func (s profileSummary) writeText(w io.Writer) error {
	var b strings.Builder
	mode := fmt.Sprintf("closed loop, %d in flight", s.ParallelNum)
	if s.Mode == "open_loop" {
		mode = fmt.Sprintf("open loop at %g QPS, %d in flight at most", s.TargetQPS, s.ParallelNum)
	}
	fmt.Fprintf(&b, "profile: model %s, signature %s, %s; %s for %gs\n", s.Model, s.Signature, strings.Join(s.Targets, ", "), mode, s.DurationS)
	fmt.Fprintf(&b, "inputs: %d %s (%s)\n", s.Inputs, s.Input, s.InputSource)
	fmt.Fprintf(&b, "requests: %d sent, %d ok, %d failed", s.Requests, s.OK, s.Requests-s.OK)
	if s.Unsent > 0 {
		fmt.Fprintf(&b, ", %d due but not sent (the server or --parallel_num could not keep up)", s.Unsent)
	}
	if s.Interrupted {
		b.WriteString(" (interrupted)")
	}
	b.WriteString("\n")
	codes := make([]string, 0, len(s.Errors))
	for c := range s.Errors {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, "  %s: %d (%s)\n", c, s.Errors[c], s.ErrorExamples[c])
	}
	fmt.Fprintf(&b, "QPS: %.1f over %.3fs\n", s.QPS, s.ElapsedS)
	line := func(name string, l latencySummary) {
		fmt.Fprintf(&b, "%s ms: min %.3f mean %.3f p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f\n", name, l.Min, l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	line("latency", s.LatencyMS)
	if s.Mode == "open_loop" {
		line("service", s.ServiceMS)
	}
	if len(s.Histogram) > 0 {
		b.WriteString("latency histogram:\n")
		var cum uint64
		for _, h := range s.Histogram {
			cum += h.Count
			fmt.Fprintf(&b, "  <= %10.3f ms %10d %6.2f%% %s\n", h.LeMS, h.Count, 100*float64(cum)/float64(s.OK), strings.Repeat("#", int(math.Ceil(40*float64(h.Count)/float64(s.OK)))))
		}
	}
	fmt.Fprintf(&b, "[Profile] Count: %d, Avg Latency: %.3f, P99 Latency: %.3f, QPS: %.1f\n", s.OK, s.LatencyMS.Mean, s.LatencyMS.P99, s.QPS)
	_, err := io.WriteString(w, b.String())
	return err
}

// profileCommand runs --cmd_type=profile.
func profileCommand(ctx context.Context, c cmdFlags, model string, targets []string, stdout io.Writer, log *slog.Logger) error {
	switch {
	case c.ParallelNum < 1:
		return cli.Usage(fmt.Errorf("--parallel_num %d is not positive", c.ParallelNum))
	case !(c.ProfileDuration > 0) || math.IsInf(c.ProfileDuration, 0):
		return cli.Usage(fmt.Errorf("--profile_duration %g is not a positive number of seconds", c.ProfileDuration))
	case !(c.TargetQPS >= 0) || math.IsInf(c.TargetQPS, 0):
		return cli.Usage(fmt.Errorf("--target_qps %g is not a rate (0: closed loop)", c.TargetQPS))
	case c.ProfileDataNum < 1:
		return cli.Usage(fmt.Errorf("--profile_data_num %d is not positive", c.ProfileDataNum))
	case c.ProgressInterval <= 0:
		return cli.Usage(fmt.Errorf("--progress_interval %v is not positive", c.ProgressInterval))
	}
	seed := seedOf(c)
	in, err := buildInputs(c, c.ProfileDataNum, seed, log)
	if err != nil {
		return err
	}
	reqs := make([]*servingapis.PredictRequest, len(in.tensors))
	for i, t := range in.tensors {
		reqs[i] = predictRequest(c, model, in.name, t)
	}

	var conns []*grpc.ClientConn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	var clients []servingapis.PredictionServiceClient
	for _, t := range targets {
		conn, err := grpc.NewClient(t, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return cli.Usage(fmt.Errorf("target %q: %w", t, err))
		}
		conns = append(conns, conn)
		clients = append(clients, servingapis.NewPredictionServiceClient(conn))
	}
	connect(ctx, conns, min(c.Timeout, 5*time.Second), log)

	var profileFile *os.File
	if c.CPUProfile != "" {
		if profileFile, err = os.Create(c.CPUProfile); err != nil {
			return cli.Usage(fmt.Errorf("--cpu_profile: %w", err))
		}
		defer profileFile.Close()
		if err := pprof.StartCPUProfile(profileFile); err != nil {
			return fmt.Errorf("--cpu_profile: %w", err)
		}
	}
	load := &profileLoad{clients: clients, reqs: reqs, workers: c.ParallelNum,
		duration: time.Duration(c.ProfileDuration * float64(time.Second)), qps: c.TargetQPS,
		timeout: c.Timeout, progress: c.ProgressInterval, seed: seed, log: log}
	log.Info("profile start", "model", model, "signature", c.SignatureName, "targets", strings.Join(targets, ","),
		"inputs", len(reqs), "input", in.name, "parallel_num", load.workers, "target_qps", load.qps,
		"duration", load.duration.String(), "timeout", load.timeout.String(), "seed", seed)
	res := load.run(ctx)
	if profileFile != nil {
		pprof.StopCPUProfile()
		if err := profileFile.Close(); err != nil {
			return fmt.Errorf("--cpu_profile: %w", err)
		}
		log.Info("cpu profile written", "path", c.CPUProfile)
	}

	s := newSummary(c, model, targets, in, load, res)
	if c.ProfileJSON != "" {
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if c.ProfileJSON == "-" {
			_, err = stdout.Write(data)
		} else {
			err = os.WriteFile(c.ProfileJSON, data, 0o644)
		}
		if err != nil {
			return fmt.Errorf("--profile_json: %w", err)
		}
	}
	if c.ProfileJSON != "-" {
		if err := s.writeText(stdout); err != nil {
			return err
		}
	}
	if res.sent == 0 {
		return fmt.Errorf("profile %s: no request was sent (interrupted)", model)
	}
	if failed := res.failed(); failed > 0 {
		return fmt.Errorf("profile %s: %d of %d requests failed", model, failed, res.sent)
	}
	return nil
}

// connect starts connecting to every target and waits (up to wait) until each is ready or has
// failed, so that the first requests do not pay for the connection. Failures are left to the
// requests to report.
func connect(ctx context.Context, conns []*grpc.ClientConn, wait time.Duration, log *slog.Logger) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for _, conn := range conns {
		conn.Connect()
		for {
			st := conn.GetState()
			if st == connectivity.Ready || st == connectivity.TransientFailure || st == connectivity.Shutdown {
				break
			}
			if !conn.WaitForStateChange(ctx, st) {
				log.Warn("target not ready", "target", conn.Target(), "state", st.String(), "waited", time.Since(start).Round(time.Millisecond).String())
				break
			}
		}
	}
}
