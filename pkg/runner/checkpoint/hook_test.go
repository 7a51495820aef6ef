package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// recorder logs listener calls as "<name>.<method>(<step>)".
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

type listener struct {
	name      string
	r         *recorder
	failAfter error
	stop      bool
}

func (l *listener) Begin(context.Context) error { l.r.add(l.name + ".Begin"); return nil }
func (l *listener) BeforeSave(_ context.Context, step int64) error {
	l.r.add(fmt.Sprintf("%s.BeforeSave(%d)", l.name, step))
	return nil
}
func (l *listener) AfterSave(_ context.Context, step int64) (bool, error) {
	l.r.add(fmt.Sprintf("%s.AfterSave(%d)", l.name, step))
	return l.stop, l.failAfter
}
func (l *listener) End(_ context.Context, step int64) error {
	l.r.add(fmt.Sprintf("%s.End(%d)", l.name, step))
	return nil
}

var _ hookutil.SaverListener = (*listener)(nil)

// fixture is a saver hook over a temp dir whose global step the test sets; saves are recorded as
// "save(<step>)" between the listeners' calls.
type fixture struct {
	dir  string
	step int64
	r    *recorder
	fail int // how many of the next saves fail
	hook *SaverHook
}

func newFixture(t *testing.T, o HookOptions) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), r: &recorder{}}
	s, err := NewSaver(SaverOptions{Dir: f.dir, MaxToKeep: 10, Log: quiet, Write: func(ctx context.Context, prefix string, step int64) error {
		if f.fail > 0 {
			f.fail--
			f.r.add(fmt.Sprintf("save(%d) failed", step))
			return errors.New("disk error")
		}
		f.r.add(fmt.Sprintf("save(%d)", step))
		return denseWriter(ctx, prefix, step)
	}})
	if err != nil {
		t.Fatal(err)
	}
	o.Saver = s
	o.GlobalStep = func(context.Context) (int64, error) { return f.step, nil }
	if o.Log == nil {
		o.Log = quiet
	}
	if o.SaveSecs == 0 && o.SaveSteps == 0 {
		o.SaveSteps = 100
	}
	f.hook, err = NewSaverHook(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSaverHookListenerOrder(t *testing.T) {
	r := &recorder{}
	f := newFixture(t, HookOptions{
		Listeners:      []hookutil.SaverListener{&listener{name: "a", r: r}, &listener{name: "b", r: r}},
		GuardListeners: []hookutil.SaverListener{&listener{name: "g1", r: r}, &listener{name: "g2", r: r}},
	})
	f.r = r
	ctx := context.Background()
	if err := f.hook.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.hook.AfterCreateSession(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.step = 7
	if err := f.hook.TriggerSave(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"a.Begin", "b.Begin",
		"g1.BeforeSave(7)", "g2.BeforeSave(7)", "a.BeforeSave(7)", "b.BeforeSave(7)", "save(7)", "a.AfterSave(7)", "b.AfterSave(7)", "g2.AfterSave(7)", "g1.AfterSave(7)"}
	if got := r.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls\n%v\nwant\n%v", got, want)
	}
}

// TestSaverHookLoop drives the hook through a run loop: no save when the session starts at step 0,
// a save every 3 steps, and one at the end for the last step.
func TestSaverHookLoop(t *testing.T) {
	leakcheck.Check(t)
	tests := []struct {
		name      string
		firstSave bool
		start     int64
		steps     int64
		want      []string
	}{
		{name: "no first save", start: 0, steps: 7, want: []string{"save(3)", "save(6)", "save(7)"}},
		{name: "first save", firstSave: true, start: 0, steps: 7, want: []string{"save(0)", "save(3)", "save(6)", "save(7)"}},
		{name: "resumed", start: 10, steps: 6, want: []string{"save(13)", "save(16)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, HookOptions{SaveSteps: 3, FirstSave: tc.firstSave})
			f.step = tc.start
			end := tc.start + tc.steps
			err := runhook.Loop{Hooks: []runhook.Hook{f.hook}, Step: func(_ context.Context, rc *runhook.RunContext) error {
				f.step++
				if f.step >= end {
					rc.RequestStop()
				}
				return nil
			}}.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := f.r.take(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("saves %v, want %v", got, tc.want)
			}
			if tc.steps > 0 {
				st, err := ReadState(f.dir, quiet)
				if err != nil || filepath.Base(st.ModelCheckpointPath) != fmt.Sprintf("model.ckpt-%d", end) {
					t.Fatalf("state %v, %v", st, err)
				}
			}
			ms, err := ReadMonolithState(f.dir, false, quiet)
			if err != nil || ms == nil || ms.GetBuiltinHashTableType().String() != "CUCKOO_HASH_MAP" {
				t.Fatalf("monolith state %v, %v", ms, err)
			}
		})
	}
}

func TestSaverHookEvery(t *testing.T) {
	now := time.Unix(100, 0)
	f := newFixture(t, HookOptions{SaveSecs: time.Minute, Now: func() time.Time { return now }})
	ctx := context.Background()
	if err := f.hook.AfterCreateSession(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rc := &runhook.RunContext{}
	for i, at := range []time.Duration{10 * time.Second, 61 * time.Second, 90 * time.Second, 125 * time.Second} {
		now = time.Unix(100, 0).Add(at)
		f.step = int64(i + 1)
		if err := f.hook.AfterRun(ctx, rc); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.r.take(), []string{"save(2)", "save(4)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("saves %v, want %v", got, want)
	}
	ms, _ := ReadMonolithState(f.dir, false, quiet)
	if ms.GetLastCheckpointSaveTimestamp() != now.Unix() {
		t.Fatalf("last save timestamp %d, want %d", ms.GetLastCheckpointSaveTimestamp(), now.Unix())
	}
}

func TestSaverHookErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("retried once", func(t *testing.T) {
		f := newFixture(t, HookOptions{FirstSave: true})
		f.fail = 1
		if err := f.hook.AfterCreateSession(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := f.r.take(), []string{"save(0) failed", "save(0)"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("saves %v, want %v", got, want)
		}
	})
	t.Run("failing twice fails", func(t *testing.T) {
		f := newFixture(t, HookOptions{FirstSave: true})
		f.fail = 2
		if err := f.hook.AfterCreateSession(ctx, nil); err == nil || !strings.Contains(err.Error(), "disk error") {
			t.Fatalf("AfterCreateSession = %v", err)
		}
	})
	t.Run("ignored errors, but not on trigger", func(t *testing.T) {
		f := newFixture(t, HookOptions{FirstSave: true, IgnoreSaveErrors: true})
		f.fail = 2
		if err := f.hook.AfterCreateSession(ctx, nil); err != nil {
			t.Fatalf("AfterCreateSession = %v", err)
		}
		f.fail = 2
		if err := f.hook.TriggerSave(ctx); err == nil {
			t.Fatal("TriggerSave hid the error")
		}
	})
	t.Run("listener error is not retried", func(t *testing.T) {
		r := &recorder{}
		boom := errors.New("listener broke")
		f := newFixture(t, HookOptions{Listeners: []hookutil.SaverListener{&listener{name: "a", r: r, failAfter: boom}}})
		f.hook.AfterCreateSession(ctx, nil)
		f.step = 1
		if err := f.hook.TriggerSave(ctx); !errors.Is(err, boom) {
			t.Fatalf("TriggerSave = %v", err)
		}
		if got := r.take(); !reflect.DeepEqual(got, []string{"a.BeforeSave(1)", "a.AfterSave(1)"}) {
			t.Fatalf("calls %v", got)
		}
	})
	t.Run("listener asks to stop", func(t *testing.T) {
		r := &recorder{}
		f := newFixture(t, HookOptions{SaveSteps: 1, Listeners: []hookutil.SaverListener{&listener{name: "a", r: r, stop: true}}})
		f.hook.AfterCreateSession(ctx, nil)
		f.step = 1
		rc := &runhook.RunContext{}
		if err := f.hook.AfterRun(ctx, rc); err != nil || !rc.StopRequested() {
			t.Fatalf("AfterRun = %v, stop requested %v", err, rc.StopRequested())
		}
	})
	t.Run("no end save after a failed loop", func(t *testing.T) {
		f := newFixture(t, HookOptions{FirstSave: true})
		f.step = 5
		if err := f.hook.End(ctx, nil, errors.New("step failed")); err != nil {
			t.Fatal(err)
		}
		if got := f.r.take(); len(got) != 0 {
			t.Fatalf("saves after a failure: %v", got)
		}
	})
	t.Run("bad timer", func(t *testing.T) {
		s, _ := NewSaver(SaverOptions{Dir: t.TempDir(), Write: denseWriter})
		if _, err := NewSaverHook(HookOptions{Saver: s, GlobalStep: func(context.Context) (int64, error) { return 0, nil }, SaveSecs: time.Second, SaveSteps: 1}); err == nil {
			t.Fatal("both save_secs and save_steps accepted")
		}
	})
}

// TestSaverHookConcurrentTrigger: TriggerSave from another goroutine (the controller's RPC) and the
// loop's AfterRun never save at once.
func TestSaverHookConcurrentTrigger(t *testing.T) {
	leakcheck.Check(t)
	f := newFixture(t, HookOptions{SaveSteps: 1})
	ctx := context.Background()
	if err := f.hook.AfterCreateSession(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			if err := f.hook.TriggerSave(ctx); err != nil {
				t.Error(err)
			}
		}
	}()
	rc := &runhook.RunContext{}
	for i := 0; i < 20; i++ {
		f.hook.mu.Lock()
		f.step++
		f.hook.mu.Unlock()
		if err := f.hook.AfterRun(ctx, rc); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if _, err := ReadState(f.dir, quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "model.ckpt-20.index")); err != nil {
		t.Fatal(err)
	}
}
