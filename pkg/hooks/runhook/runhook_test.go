package runhook

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// recorder logs every call into a shared event list and fails where told to.
type recorder struct {
	name   string
	events *[]string
	fail   map[string]error // method name -> error
	stopIn string           // method name in which to request stop
	atStep int64
}

func (r *recorder) log(ev string) error {
	*r.events = append(*r.events, r.name+"."+ev)
	return r.fail[ev]
}

func (r *recorder) Begin(context.Context) error { return r.log("Begin") }
func (r *recorder) AfterCreateSession(_ context.Context, s *Session) error {
	if s == nil || s.Coord == nil {
		return errors.New("no session")
	}
	return r.log("AfterCreateSession")
}
func (r *recorder) BeforeRun(_ context.Context, rc *RunContext) error {
	if r.stopIn == "BeforeRun" && rc.Step == r.atStep {
		rc.RequestStop()
	}
	return r.log(fmt.Sprintf("BeforeRun%d", rc.Step))
}
func (r *recorder) AfterRun(_ context.Context, rc *RunContext) error {
	if r.stopIn == "AfterRun" && rc.Step == r.atStep {
		rc.RequestStop()
	}
	return r.log(fmt.Sprintf("AfterRun%d", rc.Step))
}
func (r *recorder) End(_ context.Context, _ *Session, runErr error) error {
	return r.log(fmt.Sprintf("End(%v)", runErr != nil))
}

var errBoom = errors.New("boom")

func TestRunOrderingAndErrors(t *testing.T) {
	tests := []struct {
		name     string
		failA    map[string]error
		failB    map[string]error
		stopIn   string // in hook b
		atStep   int64
		stepFail int64 // step index that fails; -1 none
		stepStop int64 // step index at which the step requests stop; -1 none
		want     []string
		wantErr  error
	}{
		{
			name: "stop requested by the step", stepFail: -1, stepStop: 1,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.AfterRun0", "b.AfterRun0",
				"a.BeforeRun1", "b.BeforeRun1", "step1", "a.AfterRun1", "b.AfterRun1",
				"a.End(false)", "b.End(false)"},
		},
		{
			name: "stop requested in BeforeRun still runs the step", stopIn: "BeforeRun", atStep: 0, stepFail: -1, stepStop: -1,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.AfterRun0", "b.AfterRun0",
				"a.End(false)", "b.End(false)"},
		},
		{
			name: "stop requested in AfterRun", stopIn: "AfterRun", atStep: 2, stepFail: -1, stepStop: -1,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.AfterRun0", "b.AfterRun0",
				"a.BeforeRun1", "b.BeforeRun1", "step1", "a.AfterRun1", "b.AfterRun1",
				"a.BeforeRun2", "b.BeforeRun2", "step2", "a.AfterRun2", "b.AfterRun2",
				"a.End(false)", "b.End(false)"},
		},
		{
			name: "Begin fails: only begun hooks end", failB: map[string]error{"Begin": errBoom}, stepFail: -1, stepStop: -1,
			want:    []string{"a.Begin", "b.Begin", "a.End(true)"},
			wantErr: errBoom,
		},
		{
			name: "AfterCreateSession fails", failA: map[string]error{"AfterCreateSession": errBoom}, stepFail: -1, stepStop: -1,
			want:    []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "a.End(true)", "b.End(true)"},
			wantErr: errBoom,
		},
		{
			name: "BeforeRun fails: later hooks and the step are skipped", failA: map[string]error{"BeforeRun1": errBoom}, stepFail: -1, stepStop: -1,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.AfterRun0", "b.AfterRun0",
				"a.BeforeRun1", "a.End(true)", "b.End(true)"},
			wantErr: errBoom,
		},
		{
			name: "step fails: AfterRun is skipped", stepFail: 0, stepStop: -1,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.End(true)", "b.End(true)"},
			wantErr: errBoom,
		},
		{
			name: "AfterRun fails", failB: map[string]error{"AfterRun0": errBoom}, stepFail: -1, stepStop: -1,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.AfterRun0", "b.AfterRun0",
				"a.End(true)", "b.End(true)"},
			wantErr: errBoom,
		},
		{
			name: "End fails: the other hooks still end", failA: map[string]error{"End(false)": errBoom}, stepFail: -1, stepStop: 0,
			want: []string{"a.Begin", "b.Begin", "a.AfterCreateSession", "b.AfterCreateSession",
				"a.BeforeRun0", "b.BeforeRun0", "step0", "a.AfterRun0", "b.AfterRun0",
				"a.End(false)", "b.End(false)"},
			wantErr: errBoom,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			var events []string
			a := &recorder{name: "a", events: &events, fail: tc.failA}
			b := &recorder{name: "b", events: &events, fail: tc.failB, stopIn: tc.stopIn, atStep: tc.atStep}
			step := func(_ context.Context, rc *RunContext) error {
				events = append(events, fmt.Sprintf("step%d", rc.Step))
				if rc.Step == tc.stepFail {
					return errBoom
				}
				if rc.Step == tc.stepStop {
					rc.RequestStop()
				}
				return nil
			}
			err := Run(context.Background(), []Hook{a, b}, step)
			if !reflect.DeepEqual(events, tc.want) {
				t.Errorf("events:\n got %q\nwant %q", events, tc.want)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Run = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// goHook starts f on the Coordinator in AfterCreateSession.
type goHook struct {
	Base
	f func(ctx context.Context) error
}

func (h *goHook) AfterCreateSession(_ context.Context, s *Session) error {
	s.Coord.Go(h.f)
	return nil
}

func TestCoordinatedGoroutineErrorStopsLoop(t *testing.T) {
	leakcheck.Check(t)
	started := make(chan struct{})
	release := make(chan struct{})
	h := &goHook{f: func(ctx context.Context) error {
		close(started)
		<-release
		return errBoom
	}}
	steps := 0
	err := Run(context.Background(), []Hook{h}, func(_ context.Context, rc *RunContext) error {
		steps++
		if rc.Step == 0 {
			<-started
			close(release)
			// The loop only sees the stop before the next step; wait for it here so the
			// test does not depend on scheduling.
			if !rc.Session.Coord.WaitForStop(10 * time.Second) {
				return errors.New("coordinator did not stop")
			}
		}
		return nil
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Run = %v, want %v", err, errBoom)
	}
	if steps != 1 {
		t.Errorf("steps = %d, want 1", steps)
	}
}

func TestCoordinatedGoroutinePanicIsAnError(t *testing.T) {
	leakcheck.Check(t)
	h := &goHook{f: func(ctx context.Context) error { panic("kaput") }}
	err := Run(context.Background(), []Hook{h}, func(_ context.Context, rc *RunContext) error {
		if !rc.Session.Coord.WaitForStop(10 * time.Second) {
			return errors.New("coordinator did not stop")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "panic: kaput") || errkind.Of(err) != errkind.Runtime {
		t.Fatalf("Run = %v (kind %v), want a Runtime panic error", err, errkind.Of(err))
	}
}

func TestBackgroundGoroutineStopsWithLoop(t *testing.T) {
	leakcheck.Check(t)
	var stoppedBy error
	h := &goHook{f: func(ctx context.Context) error {
		<-ctx.Done()
		stoppedBy = ctx.Err()
		return ctx.Err() // returned after the stop: not an error of the loop
	}}
	err := Run(context.Background(), []Hook{h}, func(_ context.Context, rc *RunContext) error {
		if rc.Step == 3 {
			rc.RequestStop()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !errors.Is(stoppedBy, context.Canceled) {
		t.Errorf("goroutine saw %v, want context.Canceled", stoppedBy)
	}
}

func TestContextCancelEndsLoop(t *testing.T) {
	leakcheck.Check(t)
	ctx, cancel := context.WithCancel(context.Background())
	var events []string
	a := &recorder{name: "a", events: &events}
	err := Run(ctx, []Hook{a}, func(_ context.Context, rc *RunContext) error {
		if rc.Step == 1 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if got := events[len(events)-1]; got != "a.End(true)" {
		t.Errorf("last event %q, want a.End(true)", got)
	}
}

func TestJoinGraceExceeded(t *testing.T) {
	leakcheck.Check(t)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	h := &goHook{f: func(ctx context.Context) error {
		defer wg.Done()
		<-release // ignores ctx on purpose
		return nil
	}}
	err := Loop{
		Hooks:     []Hook{h},
		Step:      func(_ context.Context, rc *RunContext) error { rc.RequestStop(); return nil },
		StopGrace: 20 * time.Millisecond,
	}.Run(context.Background())
	close(release)
	wg.Wait()
	if errkind.Of(err) != errkind.Runtime || !strings.Contains(err.Error(), "1 goroutines still running") {
		t.Fatalf("Run = %v, want a Runtime error about 1 running goroutine", err)
	}
}

func TestNilStepDrivesHooks(t *testing.T) {
	var events []string
	a := &recorder{name: "a", events: &events, stopIn: "AfterRun", atStep: 1}
	if err := Run(context.Background(), []Hook{a}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.Begin", "a.AfterCreateSession", "a.BeforeRun0", "a.AfterRun0", "a.BeforeRun1", "a.AfterRun1", "a.End(false)"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

func TestBaseDoesNothing(t *testing.T) {
	var h Hook = Base{}
	ctx := context.Background()
	s := &Session{Coord: NewCoordinator(ctx)}
	rc := &RunContext{Session: s}
	for name, err := range map[string]error{
		"Begin":              h.Begin(ctx),
		"AfterCreateSession": h.AfterCreateSession(ctx, s),
		"BeforeRun":          h.BeforeRun(ctx, rc),
		"AfterRun":           h.AfterRun(ctx, rc),
		"End":                h.End(ctx, s, errBoom),
	} {
		if err != nil {
			t.Errorf("%s = %v", name, err)
		}
	}
	if rc.StopRequested() || s.Coord.ShouldStop() {
		t.Error("Base requested a stop")
	}
}

func TestCoordinator(t *testing.T) {
	t.Run("first stop wins", func(t *testing.T) {
		c := NewCoordinator(context.Background())
		if c.ShouldStop() || c.Err() != nil {
			t.Fatal("new coordinator is stopped")
		}
		if c.WaitForStop(time.Millisecond) {
			t.Fatal("WaitForStop = true while running")
		}
		c.RequestStop(errBoom)
		c.RequestStop(errors.New("later"))
		if !c.ShouldStop() || !errors.Is(c.Err(), errBoom) {
			t.Fatalf("ShouldStop=%v Err=%v", c.ShouldStop(), c.Err())
		}
		if !c.WaitForStop(time.Hour) {
			t.Fatal("WaitForStop = false after stop")
		}
		select {
		case <-c.Done():
		default:
			t.Fatal("Done not closed")
		}
	})
	t.Run("clean stop", func(t *testing.T) {
		c := NewCoordinator(context.Background())
		c.RequestStop(nil)
		c.RequestStop(errBoom) // dropped: already stopped
		if !c.ShouldStop() || c.Err() != nil {
			t.Fatalf("ShouldStop=%v Err=%v", c.ShouldStop(), c.Err())
		}
	})
	t.Run("parent cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		c := NewCoordinator(ctx)
		cancel()
		if !c.ShouldStop() || !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("ShouldStop=%v Err=%v", c.ShouldStop(), c.Err())
		}
		c.RequestStop(errBoom)
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("Err = %v after a late RequestStop, want context.Canceled", c.Err())
		}
	})
	t.Run("join waits for goroutines", func(t *testing.T) {
		leakcheck.Check(t)
		c := NewCoordinator(context.Background())
		finished := 0
		var mu sync.Mutex
		for i := 0; i < 3; i++ {
			c.Go(func(ctx context.Context) error {
				<-ctx.Done()
				mu.Lock()
				finished++
				mu.Unlock()
				return nil
			})
		}
		c.RequestStop(nil)
		if err := c.Join(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if finished != 3 {
			t.Errorf("finished = %d after Join, want 3", finished)
		}
	})
}
