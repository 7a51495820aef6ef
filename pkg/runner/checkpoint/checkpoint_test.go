package checkpoint

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadState(t *testing.T) {
	tests := []struct {
		name    string
		state   *string
		dir     string // "" means the temp dir
		want    string
		wantAll []string
		kind    errkind.Kind
	}{
		{name: "no file"},
		{name: "relative paths", state: ptr("model_checkpoint_path: \"model.ckpt-20\"\nall_model_checkpoint_paths: \"model.ckpt-10\"\nall_model_checkpoint_paths: \"/abs/model.ckpt-20\"\nall_model_checkpoint_timestamps: 1.5\nlast_preserved_timestamp: 2\n"),
			want: "model.ckpt-20", wantAll: []string{"model.ckpt-10", "/abs/model.ckpt-20"}},
		{name: "absolute path", state: ptr(`model_checkpoint_path: "/elsewhere/model.ckpt-7"`), want: "/elsewhere/model.ckpt-7"},
		{name: "unparsable is ignored", state: ptr("model_checkpoint_path: 'unterminated\n")},
		{name: "unknown field is ignored", state: ptr(`model_checkpoint_path: "a" bogus: 1`)},
		{name: "empty state", state: ptr(""), kind: errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.state != nil {
				write(t, filepath.Join(dir, StateFile), *tc.state)
			}
			st, err := ReadState(dir, quiet)
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("err %v, want kind %v", err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if st != nil {
					t.Fatalf("state %v, want none", st)
				}
				return
			}
			want := tc.want
			if want[0] != '/' {
				want = dir + "/" + want
			}
			if st.GetModelCheckpointPath() != want {
				t.Fatalf("model_checkpoint_path %q, want %q", st.GetModelCheckpointPath(), want)
			}
			for i, p := range tc.wantAll {
				if p[0] != '/' {
					p = dir + "/" + p
				}
				if st.GetAllModelCheckpointPaths()[i] != p {
					t.Fatalf("all_model_checkpoint_paths[%d] = %q, want %q", i, st.GetAllModelCheckpointPaths()[i], p)
				}
			}
		})
	}
	// An unreadable state file (a directory here) is ignored as TensorFlow ignores an OpError.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, StateFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if st, err := ReadState(dir, quiet); st != nil || err != nil {
		t.Fatalf("unreadable state: %v, %v", st, err)
	}
}

// quiet drops the log lines the code under test writes.
var quiet = slog.New(slog.DiscardHandler)

func ptr(s string) *string { return &s }

func TestPyJoin(t *testing.T) {
	for _, tc := range []struct{ dir, p, want string }{
		{"/m", "a", "/m/a"},
		{"/m/", "a", "/m/a"},
		{"", "a", "a"},
		{"/m", "/x/a", "/x/a"},
		{"/m/./n", "../a", "/m/./n/../a"},
	} {
		if got := pathutil.Join(tc.dir, tc.p); got != tc.want {
			t.Errorf("pathutil.Join(%q, %q) = %q, want %q", tc.dir, tc.p, got, tc.want)
		}
	}
}

func TestLatest(t *testing.T) {
	dir := t.TempDir()
	if p, err := Latest(dir, quiet); p != "" || err != nil {
		t.Fatalf("empty dir: %q, %v", p, err)
	}
	write(t, filepath.Join(dir, StateFile), `model_checkpoint_path: "model.ckpt-5"`)
	if p, err := Latest(dir, quiet); p != "" || err != nil {
		t.Fatalf("state without files: %q, %v", p, err)
	}
	// A V2 checkpoint: the .index file.
	write(t, filepath.Join(dir, "model.ckpt-5.index"), "")
	if p, err := Latest(dir, quiet); p != dir+"/model.ckpt-5" || err != nil {
		t.Fatalf("V2: %q, %v", p, err)
	}
	// A V1 checkpoint: the prefix itself.
	write(t, filepath.Join(dir, StateFile), `model_checkpoint_path: "model.ckpt-9"`)
	write(t, filepath.Join(dir, "model.ckpt-9"), "")
	if p, err := Latest(dir, quiet); p != dir+"/model.ckpt-9" || err != nil {
		t.Fatalf("V1: %q, %v", p, err)
	}
	write(t, filepath.Join(dir, StateFile), `model_checkpoint_path: "bad[.ckpt-1"`)
	if _, err := Latest(dir, quiet); errkind.Of(err) != errkind.Value {
		t.Fatalf("bad pattern: %v", err)
	}
	write(t, filepath.Join(dir, StateFile), ``)
	if _, err := Latest(dir, quiet); errkind.Of(err) != errkind.Value {
		t.Fatalf("invalid state: %v", err)
	}
}

func TestStepOf(t *testing.T) {
	tests := []struct {
		path string
		want int64
		ok   bool
	}{
		{"/m/model.ckpt-100", 100, true},
		{"model.ckpt-0", 0, true},
		{"/m/my-model.ckpt-42", 42, true},
		{"/m/model.ckpt", 0, false},
		{"/m/model.ckpt-", 0, false},
		{"/m/model.ckpt-12a", 0, false},
		{"/m/model.ckpt-1_000", 1000, true}, // Python's int()
		{"/m-1/model.ckpt", 0, false},
	}
	for _, tc := range tests {
		got, err := StepOf(tc.path)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("StepOf(%q) = %d, %v", tc.path, got, err)
		}
		if err != nil && errkind.Of(err) != errkind.Value {
			t.Errorf("StepOf(%q): kind %v", tc.path, errkind.Of(err))
		}
	}
}

// fakeClock advances only when slept on; each Sleep may run a hook (e.g. a trainer saving a
// checkpoint meanwhile).
type fakeClock struct {
	now    time.Time
	slept  []time.Duration
	onWake func(now time.Time)
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	if c.onWake != nil {
		c.onWake(c.now)
	}
	return nil
}

func TestIteratorYieldsEachNewCheckpoint(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := &fakeClock{now: start}
	// The trainer saves checkpoints at these times (seconds after start).
	saves := []struct {
		at   int
		path string
	}{{3, "ckpt-1"}, {3, "ckpt-1"}, {10, "ckpt-2"}, {11, "ckpt-3"}, {12, "ckpt-4"}}
	latest := func() (string, error) {
		p := ""
		for _, s := range saves {
			if !clk.now.Before(start.Add(time.Duration(s.at) * time.Second)) {
				p = s.path
			}
		}
		return p, nil
	}
	it := &Iterator{Latest: latest, Clock: clk, Timeout: 5 * time.Second, MinInterval: 2 * time.Second, Logger: quiet}
	ctx := context.Background()
	var got []string
	var at []time.Duration
	for {
		p, err := it.Next(ctx)
		if errors.Is(err, ErrTimeout) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
		at = append(at, clk.now.Sub(start))
	}
	// ckpt-3 is skipped: when the min interval after ckpt-2 ends (t=12), ckpt-4 is the latest.
	want := []string{"ckpt-1", "ckpt-2", "ckpt-4"}
	wantAt := []time.Duration{3 * time.Second, 10 * time.Second, 12 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("yielded %v at %v, want %v", got, at, want)
	}
	for i := range want {
		if got[i] != want[i] || at[i] != wantAt[i] {
			t.Fatalf("yielded %v at %v, want %v at %v", got, at, want, wantAt)
		}
	}
	// After ckpt-4 at t=12 the iterator first keeps the min interval (until t=14), then waits 1 s at
	// a time and stops when one more second would pass the 5 s timeout: 14+5 = 19 and 19+1 > 19.
	if end := clk.now.Sub(start); end != 19*time.Second {
		t.Fatalf("timed out at +%v, want +19s", end)
	}
}

func TestIteratorErrors(t *testing.T) {
	clk := &fakeClock{now: time.Unix(0, 0)}
	boom := errors.New("state unreadable")
	it := &Iterator{Latest: func() (string, error) { return "", boom }, Clock: clk, Logger: quiet}
	if _, err := it.Next(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Latest error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	it = &Iterator{Latest: func() (string, error) { return "", nil }, Clock: clk, Logger: quiet}
	if _, err := it.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	// Without a timeout it waits until the context ends.
	ctx, cancel = context.WithCancel(context.Background())
	clk.onWake = func(now time.Time) {
		if now.Sub(time.Unix(0, 0)) >= time.Hour {
			cancel()
		}
	}
	if _, err := it.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("no timeout: %v", err)
	}
	if len(clk.slept) != 3600 {
		t.Fatalf("polled %d times in an hour, want 3600", len(clk.slept))
	}
	if _, err := (&Iterator{}).Next(context.Background()); errkind.Of(err) != errkind.Value {
		t.Fatalf("no Latest: %v", err)
	}
}

func TestIteratorOnDirectory(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{now: time.Unix(0, 0)}
	it := NewIterator(dir, 10*time.Second, quiet)
	it.Clock = clk
	clk.onWake = func(now time.Time) {
		if now.Unix() == 4 {
			write(t, filepath.Join(dir, "model.ckpt-50.index"), "")
			write(t, filepath.Join(dir, StateFile), `model_checkpoint_path: "model.ckpt-50"`)
		}
	}
	p, err := it.Next(context.Background())
	if err != nil || p != dir+"/model.ckpt-50" || clk.now.Unix() != 4 {
		t.Fatalf("got %q, %v at %v", p, err, clk.now.Unix())
	}
	if _, err := it.Next(context.Background()); !errors.Is(err, ErrTimeout) {
		t.Fatalf("no newer checkpoint: %v", err)
	}
}

func TestSystemClock(t *testing.T) {
	c := SystemClock{}
	if err := c.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sleep: %v", err)
	}
	if d := time.Since(c.Now()); d < 0 || d > time.Minute {
		t.Fatalf("Now is off by %v", d)
	}
}
