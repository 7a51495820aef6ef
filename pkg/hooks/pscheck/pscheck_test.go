package pscheck

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// prepareMachineInfoHook creates PS 0's machine info after session creation, before the checker
// starts (the reference test's PrepareMachineInfoHook).
type prepareMachineInfoHook struct {
	runhook.Base
	store    *MachineInfoStore
	memLimit int64
}

func (h *prepareMachineInfoHook) AfterCreateSession(context.Context, *runhook.Session) error {
	h.store.LookupOrCreate(PSMachineInfoSharedName(0), h.memLimit)
	return nil
}

// errDeadline stands for the reference test's tf.errors.DeadlineExceededError.
var errDeadline = errors.New("Test exception")

// raiseErrorHook is the reference test's RaiseErrorHook.
type raiseErrorHook struct {
	runhook.Base
	inAfterCreateSession, inBeforeRun bool
}

func (h *raiseErrorHook) AfterCreateSession(context.Context, *runhook.Session) error {
	if h.inAfterCreateSession {
		return errDeadline
	}
	return nil
}

func (h *raiseErrorHook) BeforeRun(context.Context, *runhook.RunContext) error {
	if h.inBeforeRun {
		return errDeadline
	}
	return nil
}

// fixture is the reference test's _set_up_hook: one PS whose machine info has memLimit, probed in
// process with the real memory usage; probes are counted and signalled.
type fixture struct {
	barrier *barrier.Barrier
	probes  atomic.Int64
	probed  chan struct{}
	reports chan map[int]*pb.MachineHealthResult
	hooks   []runhook.Hook
}

func setUp(t *testing.T, memLimit int64, report bool) *fixture {
	t.Helper()
	b, err := barrier.New(1)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{barrier: b, probed: make(chan struct{}, 100), reports: make(chan map[int]*pb.MachineHealthResult, 10)}
	store := NewMachineInfoStore()
	local := LocalProbe(store, nil)
	cfg := Config{
		Barrier: b,
		NumPS:   1,
		Probe: func(ctx context.Context, i int) ([]byte, error) {
			defer func() {
				f.probes.Add(1)
				select {
				case f.probed <- struct{}{}:
				default:
				}
			}()
			return local(ctx, i)
		},
		Interval: time.Millisecond,
	}
	if report {
		cfg.Report = func(r map[int]*pb.MachineHealthResult) { f.reports <- r }
	}
	f.hooks = []runhook.Hook{&prepareMachineInfoHook{store: store, memLimit: memLimit}, NewHook(cfg)}
	return f
}

// The reference's test_basic: a healthy PS is checked repeatedly and never reported.
func TestBasic(t *testing.T) {
	leakcheck.Check(t)
	f := setUp(t, 1<<60, true)
	err := runhook.Run(context.Background(), f.hooks, func(_ context.Context, rc *runhook.RunContext) error {
		for i := 0; i < 3; i++ {
			<-f.probed
		}
		rc.RequestStop()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.reports) != 0 || f.barrier.IsPlaced() {
		t.Errorf("healthy PS: %d reports, barrier placed %v", len(f.reports), f.barrier.IsPlaced())
	}
}

// The reference's test_oom: mem_limit=0 makes the PS unhealthy; the report is called once, the
// barrier is placed, and the checker stops checking.
func TestOOM(t *testing.T) {
	leakcheck.Check(t)
	f := setUp(t, 0, true)
	var got map[int]*pb.MachineHealthResult
	err := runhook.Run(context.Background(), f.hooks, func(_ context.Context, rc *runhook.RunContext) error {
		got = <-f.reports
		rc.RequestStop()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.reports); n != 0 {
		t.Errorf("%d more reports, want exactly one", n)
	}
	if f.probes.Load() != 1 {
		t.Errorf("probes = %d, want 1 (the checker waits for the stop after reporting)", f.probes.Load())
	}
	if !f.barrier.IsPlaced() {
		t.Error("barrier not placed")
	}
	if len(got) != 1 || got[0].GetStatus() != pb.MachineHealthResult_OUT_OF_MEMORY ||
		!strings.HasPrefix(got[0].GetMessage(), "Memory limit exceeded. Current: ") || !strings.HasSuffix(got[0].GetMessage(), ", Limit: 0") {
		t.Errorf("report %v", got)
	}
}

// The reference's test_raise_in_after_create_session and test_raise_in_before_run: the hook's
// error ends the run, and the checker goroutine stops with it.
func TestRaiseInHooks(t *testing.T) {
	for name, raise := range map[string]*raiseErrorHook{
		"after create session": {inAfterCreateSession: true},
		"before run":           {inBeforeRun: true},
	} {
		t.Run(name, func(t *testing.T) {
			leakcheck.Check(t)
			f := setUp(t, 1<<60, false)
			err := runhook.Run(context.Background(), append(f.hooks, raise), func(context.Context, *runhook.RunContext) error {
				return nil
			})
			if !errors.Is(err, errDeadline) {
				t.Fatalf("Run = %v, want the hook's error", err)
			}
		})
	}
}

// The reference's test_default_report, plus the exact text.
func TestReport(t *testing.T) {
	tests := []struct {
		name    string
		results map[int]*pb.MachineHealthResult
		want    string
	}{
		{name: "empty result", results: map[int]*pb.MachineHealthResult{1: {}}, want: "PS are not healthy:\nPS 1: "},
		{
			name: "out of memory, in index order",
			results: map[int]*pb.MachineHealthResult{
				3: {Status: pb.MachineHealthResult_OUT_OF_MEMORY.Enum(), Message: proto.String(`Memory limit exceeded. Current: 10, Limit: 0`)},
				0: {Status: pb.MachineHealthResult_OUT_OF_MEMORY.Enum(), Message: proto.String("a \"quoted\"\nline")},
			},
			want: "PS are not healthy:\n" +
				"PS 0: status: OUT_OF_MEMORY message: \"a \\\"quoted\\\"\\nline\"\n" +
				"PS 3: status: OUT_OF_MEMORY message: \"Memory limit exceeded. Current: 10, Limit: 0\"",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FormatReport(tc.results); got != tc.want {
				t.Errorf("FormatReport:\n got %q\nwant %q", got, tc.want)
			}
			var buf bytes.Buffer
			old := slog.Default()
			slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
			DefaultReport(tc.results)
			slog.SetDefault(old)
			if !strings.Contains(buf.String(), `"level":"ERROR"`) || !strings.Contains(buf.String(), `"msg":"PS are not healthy:\n`) {
				t.Errorf("DefaultReport logged %q", buf.String())
			}
		})
	}
}

func TestPSMachineInfoSharedName(t *testing.T) {
	for i, want := range map[int]string{0: "ps_machine_info_0", 12: "ps_machine_info_12"} {
		if got := PSMachineInfoSharedName(i); got != want {
			t.Errorf("PSMachineInfoSharedName(%d) = %q, want %q", i, got, want)
		}
	}
}

func TestCheckMachineHealth(t *testing.T) {
	oom := func(cur, limit string) []byte {
		msg := "Memory limit exceeded. Current: " + cur + ", Limit: " + limit
		return append([]byte{0x08, 0x01, 0x12, byte(len(msg))}, msg...)
	}
	tests := []struct {
		name     string
		limit    int64
		mem      int64
		want     []byte
		wantKind errkind.Kind
	}{
		{name: "below the limit", limit: 100, mem: 99, want: []byte{}},
		{name: "at the limit", limit: 100, mem: 100, want: oom("100", "100")},
		{name: "above the limit", limit: 0, mem: 4096, want: oom("4096", "0")},
		{name: "default limit", limit: DefaultMemLimit, mem: 1 << 40, want: []byte{}},
		{name: "no usage", limit: 100, mem: 0, wantKind: errkind.Runtime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckMachineHealth(&MachineInfo{MemLimit: tc.limit}, tc.mem)
			if tc.wantKind != errkind.Unknown {
				if errkind.Of(err) != tc.wantKind || err.Error() != "Unable to get the current process usage." {
					t.Fatalf("err = %v, want kind %v", err, tc.wantKind)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Fatalf("CheckMachineHealth = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseVmRSS(t *testing.T) {
	tests := []struct {
		name, in string
		want     int64
		kind     errkind.Kind
	}{
		{name: "status file", in: "Name:\tgo\nVmPeak:\t 9000 kB\nVmRSS:\t     708 kB\nVmData:\t1 kB\n", want: 708 * 1024},
		{name: "no VmRSS", in: "Name:\tgo\n", want: 0},
		{name: "empty value", in: "VmRSS:\n", kind: errkind.Value},
		{name: "bad value", in: "VmRSS: lots kB\n", kind: errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVmRSS(strings.NewReader(tc.in))
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("ParseVmRSS = %d, %v; want kind %v", got, err, tc.kind)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseVmRSS = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestProcessMemoryUsage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	mem, err := ProcessMemoryUsage()
	if err != nil || mem <= 0 {
		t.Fatalf("ProcessMemoryUsage = %d, %v", mem, err)
	}
}

func TestMachineInfoStore(t *testing.T) {
	s := NewMachineInfoStore()
	a := s.LookupOrCreate("ps_machine_info_0", 5)
	b := s.LookupOrCreate("ps_machine_info_0", DefaultMemLimit)
	c := s.LookupOrCreate("ps_machine_info_1", 7)
	if a != b || a.MemLimit != 5 || c.MemLimit != 7 {
		t.Fatalf("a=%v b=%v c=%v", a, b, c)
	}
	if a.String() != "mem_limit: 5" {
		t.Errorf("String = %q", a.String())
	}
	var calls atomic.Int64
	p := LocalProbe(s, func() (int64, error) { calls.Add(1); return 6, nil })
	for i, want := range map[int]bool{0: true, 1: false, 2: false} { // 2 is created with DefaultMemLimit
		st, err := p(context.Background(), i)
		if err != nil || (len(st) > 0) != want {
			t.Errorf("probe PS %d = %q, %v; unhealthy want %v", i, st, err, want)
		}
	}
	if got := s.LookupOrCreate(PSMachineInfoSharedName(2), 1).MemLimit; got != DefaultMemLimit {
		t.Errorf("PS 2 limit %d, want DefaultMemLimit", got)
	}
	boom := errors.New("no proc")
	if _, err := LocalProbe(s, func() (int64, error) { return 0, boom })(context.Background(), 0); !errors.Is(err, boom) {
		t.Errorf("probe with failing usage = %v", err)
	}
}

// placer records Place calls and fails as told.
type placer struct {
	mu    sync.Mutex
	calls int
	err   error
}

func (p *placer) Place(context.Context, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return p.err
}

// runChecker drives a Hook with cfg until report is called or the step decides to stop.
func runChecker(t *testing.T, cfg Config, step runhook.Step) error {
	t.Helper()
	return runhook.Loop{Hooks: []runhook.Hook{NewHook(cfg)}, Step: step, StopGrace: 10 * time.Second}.Run(context.Background())
}

func TestCheckerEdges(t *testing.T) {
	oomStatus, err := CheckMachineHealth(&MachineInfo{MemLimit: 0}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("only unhealthy PS are reported", func(t *testing.T) {
		leakcheck.Check(t)
		reports := make(chan map[int]*pb.MachineHealthResult, 1)
		cfg := Config{
			Barrier: &placer{}, NumPS: 3, Interval: time.Millisecond,
			Probe: func(_ context.Context, i int) ([]byte, error) {
				if i == 1 {
					return oomStatus, nil
				}
				return nil, nil
			},
			Report: func(r map[int]*pb.MachineHealthResult) { reports <- r },
		}
		var got map[int]*pb.MachineHealthResult
		if err := runChecker(t, cfg, func(_ context.Context, rc *runhook.RunContext) error {
			got = <-reports
			rc.RequestStop()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if keys := reflect.ValueOf(got).MapKeys(); len(keys) != 1 || got[1] == nil {
			t.Errorf("report %v, want PS 1 only", got)
		}
	})
	t.Run("failed probes and bad results are retried", func(t *testing.T) {
		leakcheck.Check(t)
		var n atomic.Int64
		reports := make(chan map[int]*pb.MachineHealthResult, 1)
		cfg := Config{
			Barrier: &placer{}, NumPS: 1, Interval: time.Millisecond,
			Probe: func(context.Context, int) ([]byte, error) {
				switch n.Add(1) {
				case 1:
					return nil, errors.New("PS unreachable")
				case 2:
					return []byte{0xff, 0xff}, nil // not a MachineHealthResult
				}
				return oomStatus, nil
			},
			Report: func(r map[int]*pb.MachineHealthResult) { reports <- r },
		}
		if err := runChecker(t, cfg, func(_ context.Context, rc *runhook.RunContext) error {
			<-reports
			rc.RequestStop()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n.Load() != 3 {
			t.Errorf("probes = %d, want 3", n.Load())
		}
	})
	t.Run("barrier placed already is fine", func(t *testing.T) {
		leakcheck.Check(t)
		reported := make(chan struct{}, 1)
		p := &placer{err: barrier.ErrAlreadyPlaced}
		cfg := Config{
			Barrier: p, NumPS: 1, Interval: time.Millisecond,
			Probe:  func(context.Context, int) ([]byte, error) { return oomStatus, nil },
			Report: func(map[int]*pb.MachineHealthResult) { reported <- struct{}{} },
		}
		err := runChecker(t, cfg, func(_ context.Context, rc *runhook.RunContext) error {
			<-reported
			// Give the checker the chance to fail on the placement before stopping.
			if rc.Session.Coord.WaitForStop(20 * time.Millisecond) {
				return rc.Session.Coord.Err()
			}
			rc.RequestStop()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("barrier failure stops the loop", func(t *testing.T) {
		leakcheck.Check(t)
		boom := errors.New("barrier broken")
		cfg := Config{
			Barrier: &placer{err: boom}, NumPS: 1, Interval: time.Millisecond,
			Probe:  func(context.Context, int) ([]byte, error) { return oomStatus, nil },
			Report: func(map[int]*pb.MachineHealthResult) {},
		}
		err := runChecker(t, cfg, func(_ context.Context, rc *runhook.RunContext) error {
			rc.Session.Coord.WaitForStop(10 * time.Second)
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Run = %v, want the barrier's error", err)
		}
	})
	t.Run("zero PS never reports", func(t *testing.T) {
		leakcheck.Check(t)
		cfg := Config{Barrier: &placer{}, NumPS: 0, Probe: func(context.Context, int) ([]byte, error) {
			t.Error("probed with no PS")
			return nil, nil
		}, Report: func(map[int]*pb.MachineHealthResult) { t.Error("reported with no PS") }, Interval: time.Millisecond}
		if err := runChecker(t, cfg, func(_ context.Context, rc *runhook.RunContext) error {
			if rc.Step == 20 {
				rc.RequestStop()
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBeginValidates(t *testing.T) {
	probe := func(context.Context, int) ([]byte, error) { return nil, nil }
	for name, cfg := range map[string]Config{
		"no barrier":  {NumPS: 1, Probe: probe},
		"no probe":    {NumPS: 1, Barrier: &placer{}},
		"negative PS": {NumPS: -1, Barrier: &placer{}, Probe: probe},
	} {
		if err := NewHook(cfg).Begin(context.Background()); errkind.Of(err) != errkind.Value {
			t.Errorf("%s: Begin = %v, want a Value error", name, err)
		}
	}
	h := NewHook(Config{NumPS: 1, Barrier: &placer{}, Probe: probe})
	if err := h.Begin(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.cfg.Interval != DefaultInterval || h.cfg.Report == nil {
		t.Errorf("defaults not filled: interval %v, report set %v", h.cfg.Interval, h.cfg.Report != nil)
	}
}
