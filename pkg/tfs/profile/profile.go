// Package profile sends Predict load to TensorFlow Serving, as tfs_client.py's --cmd_type=profile
// (its ProfileThread) does: Predict requests for a while, then the latency distribution, the QPS
// and the failures by gRPC code.
//
// Closed loop (Load.QPS 0): Load.Workers workers each send a request as soon as their last
// one is answered, as the reference's threads do; latency is the request's round trip. Open loop
// (Load.QPS > 0): request k is due at start + k/QPS whatever the answers; a free worker sends the
// next due request, and its latency counts from when it was due, so a server that falls behind
// shows the queueing it causes instead of slowing the client down (coordinated omission). Requests
// due but not sent by the end are reported as unsent.
package profile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/tfs/latency"
)

// errDurationOver ends the sending of requests when the load's duration is over.
var errDurationOver = errors.New("profile duration over")

// Load is one profile run's settings.
type Load struct {
	Clients  []servingapis.PredictionServiceClient // requests go to each in turn
	Requests []*servingapis.PredictRequest         // each request is one of these, at random
	Workers  int                                   // requests in flight at most
	Duration time.Duration                         // how long requests are sent
	QPS      float64                               // 0: closed loop
	Timeout  time.Duration                         // each request's deadline
	Progress time.Duration                         // interval of the progress log lines
	Seed     uint64                                // seeds the choice of requests
	Log      *slog.Logger
}

// workerStats is what one worker measured; the progress lines read it while the worker runs.
type workerStats struct {
	mu       sync.Mutex
	latency  latency.Histogram // successful requests: from due (open loop) or sent to answered
	service  latency.Histogram // successful requests: from sent to answered
	errs     map[codes.Code]uint64
	firstErr map[codes.Code]string
}

// Result is what a run measured.
type Result struct {
	Elapsed     time.Duration // from the start until the last answer
	Interrupted bool          // the run stopped before its duration
	// Latency: successful requests, from due (open loop) or sent to answered; Service: from
	// sent to answered.
	Latency, Service *latency.Histogram
	Sent, Unsent     uint64                // Unsent (open loop): due but never sent
	Errors           map[codes.Code]uint64 // failed requests by code
	FirstErrors      map[codes.Code]string // the first message of each code
}

// Failed is the number of failed requests.
func (r Result) Failed() uint64 { return total(r.Errors) }

// total is the number of failed requests of errs.
func total(errs map[codes.Code]uint64) uint64 {
	var n uint64
	for _, c := range errs {
		n += c
	}
	return n
}

// Run sends the load until the duration is over or ctx is done; requests in flight then finish
// (each within its deadline) and are counted.
func (p *Load) Run(ctx context.Context) Result {
	start := time.Now()
	end := start.Add(p.Duration)
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
	stats := make([]*workerStats, p.Workers)
	var sent, slot, turn atomic.Uint64
	var wg sync.WaitGroup
	for w := range stats {
		st := &workerStats{errs: map[codes.Code]uint64{}, firstErr: map[codes.Code]string{}}
		stats[w] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(p.Seed, uint64(w)+1))
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				var due time.Time
				if p.QPS > 0 {
					k := slot.Add(1) - 1
					due = start.Add(time.Duration(float64(k) * float64(time.Second) / p.QPS))
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
				req := p.Requests[rng.IntN(len(p.Requests))]
				client := p.Clients[(turn.Add(1)-1)%uint64(len(p.Clients))]
				sent.Add(1)
				rctx, cancel := context.WithTimeout(reqCtx, p.Timeout)
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
					st.latency.Record(done.Sub(due))
					st.service.Record(done.Sub(begin))
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
	res := Result{Elapsed: time.Since(start), Interrupted: interrupted, Sent: sent.Load()}
	res.Latency, res.Service, res.Errors, res.FirstErrors = merge(stats)
	if p.QPS > 0 {
		due := uint64(math.Ceil(issueEnd.Sub(start).Seconds() * p.QPS))
		if due > res.Sent {
			res.Unsent = due - res.Sent
		}
	}
	return res
}

// merge sums the workers' stats.
func merge(stats []*workerStats) (lat, service *latency.Histogram, errs map[codes.Code]uint64, firstErr map[codes.Code]string) {
	lat, service = &latency.Histogram{}, &latency.Histogram{}
	errs, firstErr = map[codes.Code]uint64{}, map[codes.Code]string{}
	for _, st := range stats {
		st.mu.Lock()
		lat.Merge(&st.latency)
		service.Merge(&st.service)
		for c, n := range st.errs {
			if errs[c] == 0 {
				firstErr[c] = st.firstErr[c]
			}
			errs[c] += n
		}
		st.mu.Unlock()
	}
	return lat, service, errs, firstErr
}

// logProgress logs a line every p.Progress until finished is closed.
func (p *Load) logProgress(start time.Time, stats []*workerStats, sent *atomic.Uint64, finished <-chan struct{}) {
	tick := time.NewTicker(p.Progress)
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
			qps := float64(latency.Count()-lastOK) / now.Sub(last).Seconds()
			lastOK, last = latency.Count(), now
			p.Log.Info("profile progress", "elapsed", now.Sub(start).Round(time.Millisecond).String(),
				"duration", p.Duration.String(), "requests", sent.Load(), "ok", latency.Count(), "errors", total(errs),
				"qps", round(qps, 1), "p50_ms", ms(latency.Quantile(0.5)), "p99_ms", ms(latency.Quantile(0.99)))
		}
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return round(d.Seconds()*1000, 3) }

// LatencySummary is a distribution in milliseconds.
type LatencySummary struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// Summarize is h's distribution in milliseconds.
func Summarize(h *latency.Histogram) LatencySummary {
	return LatencySummary{Min: ms(h.Min()), Mean: ms(h.Mean()), P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)),
		P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)), Max: ms(h.Max())}
}

// HistogramBand is a printed histogram line: the successful requests whose latency is at most
// LeMS and above the line before.
type HistogramBand struct {
	LeMS  float64 `json:"le_ms"`
	Count uint64  `json:"count"`
}

// Summary is a profile run's report, as text (WriteText) or JSON. Model, Signature, Targets,
// Input, InputSource and Inputs describe the run for the reader; NewSummary leaves them to the caller.
type Summary struct {
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
	LatencyMS LatencySummary  `json:"latency_ms"`
	ServiceMS LatencySummary  `json:"service_ms"`
	Histogram []HistogramBand `json:"histogram"`
}

// NewSummary is the summary of a run of p that measured res: its settings and measurements.
func NewSummary(p *Load, res Result) Summary {
	s := Summary{
		Mode: "closed_loop", ParallelNum: p.Workers, TargetQPS: p.QPS,
		TimeoutS: p.Timeout.Seconds(), DurationS: p.Duration.Seconds(), ElapsedS: round(res.Elapsed.Seconds(), 3),
		Interrupted: res.Interrupted, Requests: res.Sent, OK: res.Latency.Count(), Errors: map[string]uint64{},
		ErrorExamples: map[string]string{}, Unsent: res.Unsent,
		LatencyMS: Summarize(res.Latency), ServiceMS: Summarize(res.Service),
	}
	if p.QPS > 0 {
		s.Mode = "open_loop"
	}
	if res.Elapsed > 0 {
		s.QPS = round(float64(res.Latency.Count())/res.Elapsed.Seconds(), 1)
	}
	for code, n := range res.Errors {
		s.Errors[code.String()] = n
		s.ErrorExamples[code.String()] = res.FirstErrors[code]
	}
	for _, b := range res.Latency.Bands() {
		s.Histogram = append(s.Histogram, HistogramBand{LeMS: ms(b.Upper), Count: b.Count})
	}
	return s
}

// WriteText prints the summary for a reader, ending with the reference's [Profile] line.
func (s Summary) WriteText(w io.Writer) error {
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
	line := func(name string, l LatencySummary) {
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

// Connect starts connecting to every target and waits (up to wait) until each is ready or has
// failed, so that the first requests do not pay for the connection. Failures are left to the
// requests to report.
func Connect(ctx context.Context, conns []*grpc.ClientConn, wait time.Duration, log *slog.Logger) {
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
