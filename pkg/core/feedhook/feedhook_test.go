package feedhook

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type reference struct {
	Signals struct {
		NextBatch int `json:"NEXT_BATCH"`
		Stop      int `json:"STOP"`
	} `json:"signals"`
	UserProvidedSignalName string `json:"user_provided_signal_name"`
	Cases                  []struct {
		Name  string
		Once  bool
		Sends []int
		Got   []int
	} `json:"cases"`
}

// The reference's _OpQueueContext / _OpSignalOnceQueueContext: a target reading
// read_iteration_counts() sees every sent count up to STOP (join sends one).
func TestQueueContextsReference(t *testing.T) {
	leakcheck.Check(t)
	var ref reference
	refcases.ReadJSON(t, "testdata/reference_feedhook.json", &ref)
	if ref.Signals.NextBatch != SignalNextBatch || ref.Signals.Stop != SignalStop || ref.UserProvidedSignalName != UserProvidedSignalName {
		t.Fatalf("constants: %+v", ref)
	}
	for _, c := range ref.Cases {
		t.Run(c.Name, func(t *testing.T) {
			got := []int{}
			target := func(ctx context.Context, q *QueueContext) error {
				for it := range q.ReadIterationCounts(ctx) {
					got = append(got, it)
				}
				return nil
			}
			start := Start
			if c.Once {
				start = StartSignalOnce
			}
			q := start(context.Background(), "Q", target, quiet)
			for _, s := range c.Sends {
				q.SendNextBatchSignal(s)
			}
			if err := q.Join(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.Got) {
				t.Errorf("got %v, reference %v", got, c.Got)
			}
			if q.Name() != "Q" {
				t.Error(q.Name())
			}
		})
	}
}

func TestQueueContextErrorsAndCancel(t *testing.T) {
	leakcheck.Check(t)
	boom := errors.New("boom")
	q := Start(context.Background(), "E", func(ctx context.Context, q *QueueContext) error {
		for range q.ReadIterationCounts(ctx) {
			return boom
		}
		return nil
	}, quiet)
	q.SendNextBatchSignal(1)
	<-q.Done()
	if err := q.Join(context.Background()); !errors.Is(err, boom) {
		t.Errorf("target error: %v", err)
	}

	// A target stuck outside the queue: Join gives up at its deadline and cancels it.
	release := make(chan struct{})
	stuck := Start(context.Background(), "S", func(ctx context.Context, q *QueueContext) error {
		<-ctx.Done()
		close(release)
		return ctx.Err()
	}, quiet)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := stuck.Join(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("join deadline: %v", err)
	}
	<-release
	<-stuck.Done()

	// The parent context ending stops a reader.
	parent, stop := context.WithCancel(context.Background())
	read := Start(parent, "R", func(ctx context.Context, q *QueueContext) error {
		for range q.ReadIterationCounts(ctx) {
		}
		return ctx.Err()
	}, nil)
	stop()
	<-read.Done()
	if err := read.Join(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled reader: %v", err)
	}
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

type capture struct {
	mu   sync.Mutex
	msgs []string
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, string(p))
	return len(p), nil
}

func (c *capture) count(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

func TestPeriodicLogger(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	out := &capture{}
	l := NewPeriodicLogger(60*time.Second, slog.New(slog.NewTextHandler(out, nil)), clock.Now)
	var logged []bool
	for _, advance := range []time.Duration{0, 30 * time.Second, 30 * time.Second, time.Second, 0} {
		clock.now = clock.now.Add(advance)
		logged = append(logged, l.Log("iteration (%d, %d)", 1, 2))
	}
	// First always; then only once strictly more than 60 s have passed since the last log.
	if !reflect.DeepEqual(logged, []bool{true, false, false, true, false}) {
		t.Errorf("logged %v", logged)
	}
	if out.count("iteration (1, 2)") != 2 {
		t.Errorf("messages %v", out.msgs)
	}
	if d := NewPeriodicLogger(time.Hour, nil, nil); !d.Log("x") || d.Log("x") {
		t.Error("default clock")
	}
}

// fakeSession counts enqueues and dequeues; dequeue number stopAt (1-based) carries a stopping
// signal.
type fakeSession struct {
	mu         sync.Mutex
	enqueues   int
	dequeues   int
	stopAt     int
	noSignals  bool
	badSignals bool
	failEnq    error
}

func (s *fakeSession) Enqueue(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failEnq != nil {
		return s.failEnq
	}
	s.enqueues++
	return nil
}

func (s *fakeSession) Dequeue(context.Context) (Outfeed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dequeues++
	switch {
	case s.noSignals:
		return Outfeed{}, nil
	case s.badSignals:
		return Outfeed{Signals: map[string][]bool{"other": {true}}}, nil
	}
	return Outfeed{Signals: map[string][]bool{"stopping": {s.dequeues == s.stopAt}}}, nil
}

func (s *fakeSession) counts() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueues, s.dequeues
}

func newHook(t *testing.T, s Session, mod func(*HookConfig)) *Hook {
	t.Helper()
	cfg := DefaultHookConfig()
	cfg.Logger = quiet
	if mod != nil {
		mod(&cfg)
	}
	h, err := NewHook(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHookEndOfStream(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	s := &fakeSession{stopAt: 5}
	h := newHook(t, s, nil)
	if err := h.BeforeRun(1); errkind.Of(err) != errkind.Precondition {
		t.Errorf("before start: %v", err)
	}
	if err := h.AfterCreateSession(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.AfterCreateSession(ctx); errkind.Of(err) != errkind.Precondition {
		t.Errorf("second start: %v", err)
	}
	for _, n := range []int{2, 3, 4} {
		if err := h.BeforeRun(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.End(ctx); err != nil {
		t.Fatal(err)
	}
	enq, deq := s.counts()
	if enq != 9 || deq != 9 {
		t.Errorf("enqueues %d dequeues %d, want 9 each", enq, deq)
	}
	// The stopping signal came in the second loop (dequeue 5); the next BeforeRun ends the run.
	if !h.Stopping() {
		t.Fatal("stopping signal not seen")
	}
	err := h.BeforeRun(1)
	if !errors.Is(err, ErrStopped) || errkind.Of(err) != errkind.Runtime {
		t.Errorf("after stop: %v", err)
	}
}

func TestHookOptions(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	// One enqueue per signal, a dequeue every 2nd iteration, no signals at all.
	s := &fakeSession{noSignals: true}
	h := newHook(t, s, func(c *HookConfig) {
		c.RunInfeedLoopOnCoordinator = false
		c.OutfeedEveryNSteps = 2
		c.InitialInfeedSleep = time.Millisecond
	})
	_ = h.AfterCreateSession(ctx)
	_ = h.BeforeRun(5)
	_ = h.BeforeRun(0)
	if err := h.End(ctx); err != nil {
		t.Fatal(err)
	}
	if enq, deq := s.counts(); enq != 2 || deq != 3 || h.Stopping() {
		t.Errorf("enqueues %d dequeues %d stopping %v", enq, deq, h.Stopping())
	}
	if _, err := NewHook(s, HookConfig{}); errkind.Of(err) != errkind.Value {
		t.Errorf("zero outfeed_every_n_steps: %v", err)
	}
	if _, err := NewHook(nil, DefaultHookConfig()); errkind.Of(err) != errkind.Value {
		t.Errorf("nil session: %v", err)
	}
	if err := newHook(t, s, nil).End(ctx); err != nil {
		t.Errorf("end before start: %v", err)
	}
}

func TestHookErrors(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	boom := errors.New("enqueue failed")
	s := &fakeSession{badSignals: true, failEnq: boom}
	h := newHook(t, s, nil)
	_ = h.AfterCreateSession(ctx)
	_ = h.BeforeRun(1)
	err := h.End(ctx)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "ret[_user_provided_signal_name] must contain key 'stopping'.") {
		t.Errorf("end: %v", err)
	}

	// A long initial sleep is cut short by End's deadline.
	slow := newHook(t, &fakeSession{noSignals: true}, func(c *HookConfig) { c.InitialInfeedSleep = time.Hour })
	_ = slow.AfterCreateSession(ctx)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := slow.End(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("end during the initial sleep: %v", err)
	}
	<-slow.infeed.Done()
	<-slow.outfeed.Done()
}

func TestStoppingSignals(t *testing.T) {
	got, err := StoppingSignals([][]bool{{false, true, false}, {false, false, false}, {true, true, false}})
	if err != nil || !reflect.DeepEqual(got, []bool{true, true, false}) {
		t.Errorf("signals %v %v", got, err)
	}
	if got, err := StoppingSignals(nil); got != nil || err != nil {
		t.Errorf("none: %v %v", got, err)
	}
	if _, err := StoppingSignals([][]bool{{true}, {true, false}}); errkind.Of(err) != errkind.Value {
		t.Errorf("ragged: %v", err)
	}
}
