package modelmgr

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestStart ports model_manager_test.py's test_start.
func TestStart(t *testing.T) {
	leakcheck.Check(t)
	e := newEnv(t)
	createVersion(t, e.src, "test_model", "1234567")
	m := e.manager(t, "test_model", nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"ps_item_embedding_0", "ps_item_embedding_1"} {
		p := filepath.Join(e.dst, "test_model", sub, "1234567")
		if !exists(p) {
			t.Errorf("%s not copied", p)
		}
		if b, err := os.ReadFile(filepath.Join(p, "saved_model.pb")); err != nil || string(b) != sub+"@1234567" {
			t.Errorf("%s: content %q, %v", p, b, err)
		}
	}
	m.Stop()
}

// TestIgnoreOld ports model_manager_test.py's test_ignore_old: a version older than the one served
// that shows up later is not copied.
func TestIgnoreOld(t *testing.T) {
	leakcheck.Check(t)
	e := newEnv(t)
	createVersion(t, e.src, "test_model", "1234567")
	metrics := newFakeMetrics()
	m := e.manager(t, "test_model", func(c *Config) { c.Metrics = metrics })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	createVersion(t, e.src, "test_model", "1234566")
	metrics.waitRounds(t, 3)
	for _, sub := range []string{"ps_item_embedding_0", "ps_item_embedding_1"} {
		if p := filepath.Join(e.dst, "test_model", sub, "1234566"); exists(p) {
			t.Errorf("older version copied: %s", p)
		}
		if p := filepath.Join(e.dst, "test_model", sub, "1234567"); !exists(p) {
			t.Errorf("%s missing", p)
		}
	}
	m.Stop()
}

// TestLoopOnce runs one round on source trees and checks the receive tree and the bookkeeping.
func TestLoopOnce(t *testing.T) {
	tests := []struct {
		name      string
		model     string
		src       []string
		dstBefore []string
		wantDst   []string
		// wantModels: model -> version -> sub model paths relative to the receive path
		wantModels map[string]map[string][]string
		wantErr    errkind.Kind // Unknown: no error
	}{
		{
			name:  "single version three sub models",
			model: "mdl",
			src: []string{"mdl@1000/mdl/entry/1000/saved_model.pb", "mdl@1000/mdl/ps_0/1000/saved_model.pb",
				"mdl@1000/mdl/ps_1/1000/variables/variables.index", "mdl@1000.write.done"},
			wantDst: []string{"mdl/", "mdl/entry/", "mdl/entry/1000/", "mdl/entry/1000/saved_model.pb",
				"mdl/ps_0/", "mdl/ps_0/1000/", "mdl/ps_0/1000/saved_model.pb",
				"mdl/ps_1/", "mdl/ps_1/1000/", "mdl/ps_1/1000/variables/", "mdl/ps_1/1000/variables/variables.index"},
			wantModels: map[string]map[string][]string{"mdl": {"1000": {"mdl/entry/1000", "mdl/ps_0/1000", "mdl/ps_1/1000"}}},
		},
		{
			name:  "latest complete version wins",
			model: "mdl",
			src: []string{"mdl@1000/mdl/entry/1000/a", "mdl@1000.write.done", "mdl@2000/mdl/entry/2000/a",
				"mdl@2000.write.done", "mdl@3000/mdl/entry/3000/a"},
			wantDst:    []string{"mdl/", "mdl/entry/", "mdl/entry/2000/", "mdl/entry/2000/a"},
			wantModels: map[string]map[string][]string{"mdl": {"2000": {"mdl/entry/2000"}}},
		},
		{
			name:       "versions compare as strings, as in Python",
			model:      "mdl",
			src:        []string{"mdl@999/mdl/entry/999/a", "mdl@999.write.done", "mdl@1000/mdl/entry/1000/a", "mdl@1000.write.done"},
			wantDst:    []string{"mdl/", "mdl/entry/", "mdl/entry/999/", "mdl/entry/999/a"},
			wantModels: map[string]map[string][]string{"mdl": {"999": {"mdl/entry/999"}}},
		},
		{
			name:  "markers match by prefix: a model named after a longer name is copied too",
			model: "mdl",
			src: []string{"mdl@1/mdl/entry/1/a", "mdl@1.write.done", "mdl2@7/mdl2/entry/7/a", "mdl2@7.write.done",
				"other@9/other/entry/9/a", "other@9.write.done"},
			wantDst: []string{"mdl/", "mdl/entry/", "mdl/entry/1/", "mdl/entry/1/a",
				"mdl2/", "mdl2/entry/", "mdl2/entry/7/", "mdl2/entry/7/a"},
			wantModels: map[string]map[string][]string{"mdl": {"1": {"mdl/entry/1"}}, "mdl2": {"7": {"mdl2/entry/7"}}},
		},
		{
			name:  "no marker, no copy",
			model: "mdl",
			src:   []string{"mdl@1000/mdl/entry/1000/saved_model.pb"},
		},
		{
			name:  "unparsable names are skipped",
			model: "mdl",
			src: []string{"mdl/mdl/entry/1/a", "mdl.write.done", "mdl@1@2/x", "mdl@1@2.write.done",
				"mdl@/mdl/entry/a", "mdl@.write.done", "mdl@../x/a", "mdl@...write.done"},
		},
		{
			name:  "a sub model without the version: no copy",
			model: "mdl",
			src:   []string{"mdl@5/mdl/entry/5/a", "mdl@5/mdl/ps_0/4/a", "mdl@5.write.done"},
		},
		{
			name:  "no sub model directory: no copy",
			model: "mdl",
			src:   []string{"mdl@5/mdl/readme", "mdl@5.write.done"},
		},
		{
			name:  "marker without directory",
			model: "mdl",
			src:   []string{"mdl@5.write.done"},
		},
		{
			name:       "a version already in the receive path counts as copied",
			model:      "mdl",
			src:        []string{"mdl@5/mdl/entry/5/new", "mdl@5.write.done"},
			dstBefore:  []string{"mdl/entry/5/old"},
			wantDst:    []string{"mdl/", "mdl/entry/", "mdl/entry/5/", "mdl/entry/5/old"},
			wantModels: map[string]map[string][]string{"mdl": {"5": {"mdl/entry/5"}}},
		},
		{
			name:       "a leftover temp copy is not trusted",
			model:      "mdl",
			src:        []string{"mdl@5/mdl/entry/5/a", "mdl@5.write.done"},
			dstBefore:  []string{"mdl/entry/5-temp/half"},
			wantDst:    []string{"mdl/", "mdl/entry/", "mdl/entry/5/", "mdl/entry/5/a"},
			wantModels: map[string]map[string][]string{"mdl": {"5": {"mdl/entry/5"}}},
		},
		{
			name:    "missing source path",
			model:   "mdl",
			wantErr: errkind.NotFound,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.wantErr != errkind.NotFound {
				createTree(t, e.src, append(tc.src, "./")...)
			}
			createTree(t, e.dst, tc.dstBefore...)
			m := e.manager(t, tc.model, nil)
			err := m.LoopOnce(context.Background())
			if got := errkind.Of(err); (err != nil) != (tc.wantErr != errkind.Unknown) || got != tc.wantErr {
				t.Fatalf("LoopOnce: %v (kind %v), want kind %v", err, got, tc.wantErr)
			}
			if got := listTree(t, e.dst); !reflect.DeepEqual(got, tc.wantDst) {
				t.Errorf("receive tree:\n got %q\nwant %q", got, tc.wantDst)
			}
			got := map[string]map[string][]string{}
			for name, vs := range m.Models() {
				got[name] = map[string][]string{}
				for _, v := range vs {
					var rel []string
					for _, p := range v.Paths {
						r, _ := filepath.Rel(e.dst, p)
						rel = append(rel, filepath.ToSlash(r))
					}
					got[name][v.Version] = rel
				}
			}
			want := tc.wantModels
			if want == nil {
				want = map[string]map[string][]string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("models: got %v, want %v", got, want)
			}
			for name, vs := range m.Models() {
				if l := m.LatestVersions()[name]; l.Version != vs[len(vs)-1].Version || l.UpdateTime.IsZero() {
					t.Errorf("latest %s: %+v", name, l)
				}
			}
			if err == nil {
				// every directory at the top of the source got a read lock
				dirs, _, _ := listDir(e.src)
				for _, d := range dirs {
					if !exists(filepath.Join(e.src, d+ReadLock)) {
						t.Errorf("no read lock for %s", d)
					}
				}
			}
		})
	}
}

// TestOlderVersionSkipped: a round after an older version appears copies nothing.
func TestOlderVersionSkipped(t *testing.T) {
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "2000", "entry")
	m := e.manager(t, "mdl", nil)
	ctx := context.Background()
	if err := m.LoopOnce(ctx); err != nil {
		t.Fatal(err)
	}
	createVersion(t, e.src, "mdl", "1000", "entry")
	if err := m.LoopOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(e.dst, "mdl", "entry", "1000")) {
		t.Error("older version copied")
	}
	if vs := m.Models()["mdl"]; len(vs) != 1 || vs[0].Version != "2000" {
		t.Errorf("models: %+v", vs)
	}
}

// TestRetention keeps the newest RemainVersionNum versions, on disk and in the bookkeeping.
func TestRetention(t *testing.T) {
	for _, remain := range []int{1, 2, 5} {
		t.Run(string(rune('0'+remain)), func(t *testing.T) {
			e := newEnv(t)
			m := e.manager(t, "mdl", func(c *Config) { c.RemainVersionNum = remain })
			ctx := context.Background()
			versions := []string{"1", "2", "3", "4", "5", "6", "7"}
			for i, v := range versions {
				createVersion(t, e.src, "mdl", v, "entry", "ps_0")
				if err := m.LoopOnce(ctx); err != nil {
					t.Fatal(err)
				}
				if err := m.RemoveReadLocks(); err != nil {
					t.Fatal(err)
				}
				if err := m.RemoveOldFiles(); err != nil {
					t.Fatal(err)
				}
				kept := versions[max(0, i+1-remain) : i+1]
				var got []string
				for _, mv := range m.Models()["mdl"] {
					got = append(got, mv.Version)
				}
				if !reflect.DeepEqual(got, kept) {
					t.Fatalf("round %d: models %v, want %v", i, got, kept)
				}
				for _, sub := range []string{"entry", "ps_0"} {
					entries, _ := os.ReadDir(filepath.Join(e.dst, "mdl", sub))
					var names []string
					for _, en := range entries {
						names = append(names, en.Name())
					}
					if !reflect.DeepEqual(names, kept) {
						t.Fatalf("round %d: %s holds %v, want %v", i, sub, names, kept)
					}
				}
			}
		})
	}
}

// TestRemoveOldFilesAllExcess: versions beyond the limit are all dropped at once (the reference
// dropped one per call; the loop never adds more than one per round).
func TestRemoveOldFilesAllExcess(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, "mdl", func(c *Config) { c.RemainVersionNum = 1 })
	ctx := context.Background()
	for _, v := range []string{"1", "2", "3"} {
		createVersion(t, e.src, "mdl", v, "entry")
		if err := m.LoopOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.RemoveOldFiles(); err != nil {
		t.Fatal(err)
	}
	if got := listTree(t, filepath.Join(e.dst, "mdl", "entry")); !reflect.DeepEqual(got, []string{"3/", "3/saved_model.pb"}) {
		t.Errorf("kept %v", got)
	}
}

func TestRemoveReadLocks(t *testing.T) {
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "1", "entry")
	createTree(t, e.src, "other.read.lock", "keep.txt", "dir.read.lock/x")
	m := e.manager(t, "mdl", nil)
	if _, err := m.SourceData(); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(e.src, "mdl@1"+ReadLock)) {
		t.Fatal("no read lock written")
	}
	if err := m.RemoveReadLocks(); err != nil {
		t.Fatal(err)
	}
	want := []string{"dir.read.lock/", "dir.read.lock/x", "keep.txt", "mdl@1.write.done", "mdl@1/", "mdl@1/mdl/",
		"mdl@1/mdl/entry/", "mdl@1/mdl/entry/1/", "mdl@1/mdl/entry/1/saved_model.pb"}
	if got := listTree(t, e.src); !reflect.DeepEqual(got, want) {
		t.Errorf("source after RemoveReadLocks:\n got %q\nwant %q", got, want)
	}
	if err := os.RemoveAll(e.src); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveReadLocks(); err != nil {
		t.Errorf("missing source path: %v", err)
	}
}

func TestSourceData(t *testing.T) {
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "1", "ps_0", "entry")
	createVersion(t, e.src, "mdl", "2", "ps_0", "entry")
	m := e.manager(t, "mdl", nil)
	got, err := m.SourceData()
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(e.src, "mdl@2", "mdl")
	want := map[string]SourceVersion{"mdl": {Version: "2", RealPath: real, SubModels: []SubModel{
		{Name: "entry/2", Source: filepath.Join(real, "entry", "2")},
		{Name: "ps_0/2", Source: filepath.Join(real, "ps_0", "2")},
	}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if DoneFile("mdl@2") != "mdl@2.write.done" {
		t.Error("DoneFile")
	}
}

// TestCopyKeepsMetadata: like shutil.copy2, modes and modification times are kept; symbolic links
// are followed.
func TestCopyKeepsMetadata(t *testing.T) {
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "1", "entry")
	vdir := filepath.Join(e.src, "mdl@1", "mdl", "entry", "1")
	f := filepath.Join(vdir, "saved_model.pb")
	mtime := time.Date(2022, 3, 4, 5, 6, 7, 8000, time.UTC)
	if err := os.Chmod(f, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.src, "shared", "vocab.txt"), "vocab")
	if err := os.Symlink(filepath.Join(e.src, "shared"), filepath.Join(vdir, "assets")); err != nil {
		t.Fatal(err)
	}
	m := e.manager(t, "mdl", nil)
	if err := m.LoopOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(e.dst, "mdl", "entry", "1")
	st, err := os.Stat(filepath.Join(out, "saved_model.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 || !st.ModTime().Equal(mtime) {
		t.Errorf("mode %v mtime %v, want 0640 %v", st.Mode(), st.ModTime(), mtime)
	}
	if st, err := os.Lstat(filepath.Join(out, "assets")); err != nil || !st.IsDir() {
		t.Errorf("linked directory not copied as a directory: %v %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "assets", "vocab.txt")); err != nil || string(b) != "vocab" {
		t.Errorf("vocab: %q %v", b, err)
	}
}

// TestBadInputLoggedLoopGoesOn: a missing source path and an unparsable name are logged naming the
// path; the loop keeps going and copies once the source is there.
func TestBadInputLoggedLoopGoesOn(t *testing.T) {
	leakcheck.Check(t)
	e := newEnv(t)
	var logs syncbuf.Buffer
	metrics := newFakeMetrics()
	m := e.manager(t, "mdl", func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Metrics = metrics
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	metrics.waitRounds(t, 2)
	createTree(t, e.src, "mdl@1@2/x", "mdl@1@2.write.done")
	metrics.waitRounds(t, 2)
	createVersion(t, e.src, "mdl", "7", "entry")
	deadline := time.Now().Add(5 * time.Second)
	for !exists(filepath.Join(e.dst, "mdl", "entry", "7")) {
		if time.Now().After(deadline) {
			t.Fatal("version not copied after the source appeared")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	out := logs.String()
	for _, want := range [][2]string{
		{`msg="get download data failed"`, "path=" + e.src + " "},
		{`msg="download directory name is not <model>@<version>, skipped"`, "path=" + filepath.Join(e.src, "mdl@1@2") + "\n"},
	} {
		found := false
		for _, line := range strings.SplitAfter(out, "\n") {
			if strings.Contains(line, want[0]) && strings.Contains(line, want[1]) {
				found = true
			}
		}
		if !found {
			t.Errorf("log lacks a line with %s and %s:\n%s", want[0], want[1], out)
		}
	}
	if ev := metrics.Events(); ev[0] != "counter loop_once_failed model=mdl" {
		t.Errorf("metrics: %v", ev)
	}
}

func TestCheckModelUpdateTime(t *testing.T) {
	e := newEnv(t)
	metrics := newFakeMetrics()
	m := e.manager(t, "mdl", func(c *Config) { c.Metrics = metrics })
	now := time.Now()
	m.CheckModelUpdateTime(now)
	for _, v := range []string{"1234567", "v1"} {
		createVersion(t, e.src, "mdl", v, "entry")
		if err := m.LoopOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.CheckModelUpdateTime(now)
	}
	want := []string{"counter loop_once_failed model=mdl",
		"store version.delay model=mdl", "store update.delay model=mdl",
		"store update.delay model=mdl"} // "v1" is not a number: no version.delay
	if got := metrics.Events(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestNew(t *testing.T) {
	for _, cfg := range []Config{
		{ModelName: "m", SourcePath: "s", ReceivePath: "r", LoopInterval: -1},
		{ModelName: "m", SourcePath: "s", ReceivePath: "r", RemainVersionNum: -1},
		{ModelName: "m", SourcePath: "s"},
	} {
		if _, err := New(cfg); errkind.Of(err) != errkind.Value {
			t.Errorf("New(%+v) = %v, want a Value error", cfg, err)
		}
	}
	m, err := New(Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	if c.WaitTimeout != DefaultWaitTimeout || c.LoopInterval != DefaultLoopInterval ||
		c.PollInterval != DefaultPollInterval || c.RemainVersionNum != DefaultRemainVersionNum {
		t.Errorf("defaults: %+v", c)
	}
	// No model: nothing to do, no goroutine.
	leakcheck.Check(t)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Stop()
}

func TestDelete(t *testing.T) {
	dir := t.TempDir()
	createTree(t, dir, "a/b/c", "f")
	for _, p := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "f"), filepath.Join(dir, "missing")} {
		if err := Delete(p); err != nil {
			t.Errorf("Delete(%s): %v", p, err)
		}
		if exists(p) {
			t.Errorf("%s still there", p)
		}
	}
}

func TestStartClearsReceivePath(t *testing.T) {
	leakcheck.Check(t)
	e := newEnv(t)
	createTree(t, e.dst, "mdl/entry/1/stale")
	createVersion(t, e.src, "mdl", "2", "entry")
	m := e.manager(t, "mdl", func(c *Config) { c.LoopInterval = time.Hour })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	if got, want := listTree(t, e.dst), []string{"mdl/", "mdl/entry/", "mdl/entry/2/", "mdl/entry/2/saved_model.pb"}; !reflect.DeepEqual(got, want) {
		t.Errorf("receive tree %q, want %q", got, want)
	}
	if locks, _ := filepath.Glob(filepath.Join(e.src, "*"+ReadLock)); len(locks) != 0 {
		t.Errorf("read locks left after Start: %v", locks)
	}
}

func TestWaitForDownload(t *testing.T) {
	t.Run("source never created", func(t *testing.T) {
		e := newEnv(t)
		m := e.manager(t, "mdl", func(c *Config) { c.WaitTimeout = 30 * time.Millisecond })
		var err error
		within(t, 2*time.Second, "WaitForDownload", func() { err = m.WaitForDownload(context.Background()) })
		if errkind.Of(err) != errkind.NotFound || !strings.Contains(err.Error(), e.src) {
			t.Fatalf("got %v, want a NotFound error naming %s", err, e.src)
		}
	})
	t.Run("no marker of this model", func(t *testing.T) {
		e := newEnv(t)
		createVersion(t, e.src, "other", "1")
		m := e.manager(t, "mdl", func(c *Config) { c.WaitTimeout = 30 * time.Millisecond })
		if err := m.WaitForDownload(context.Background()); errkind.Of(err) != errkind.NotFound {
			t.Fatalf("got %v, want NotFound", err)
		}
	})
	t.Run("marker appears", func(t *testing.T) {
		e := newEnv(t)
		m := e.manager(t, "mdl", nil)
		go func() {
			time.Sleep(20 * time.Millisecond)
			createTree(t, e.src, "mdl@1.write.done")
		}()
		if err := m.WaitForDownload(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("start fails on timeout", func(t *testing.T) {
		e := newEnv(t)
		m := e.manager(t, "mdl", func(c *Config) { c.WaitTimeout = 10 * time.Millisecond })
		if err := m.Start(context.Background()); errkind.Of(err) != errkind.NotFound {
			t.Fatalf("Start: %v, want NotFound", err)
		}
	})
}

// TestStartRetriesUntilCopied: Start keeps retrying a round that fails until one succeeds.
func TestStartRetriesUntilCopied(t *testing.T) {
	leakcheck.Check(t)
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "1", "entry")
	m := e.manager(t, "mdl", func(c *Config) { c.LoopInterval = time.Hour })
	m.copyFile = failingCopy(1)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(e.dst, "mdl", "entry", "1", "saved_model.pb")) {
		t.Fatal("not copied")
	}
	m.Stop()
}

func TestStartTwice(t *testing.T) {
	leakcheck.Check(t)
	e := newEnv(t)
	createVersion(t, e.src, "mdl", "1", "entry")
	m := e.manager(t, "mdl", func(c *Config) { c.LoopInterval = time.Hour })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); errkind.Of(err) != errkind.Runtime {
		t.Errorf("second Start: %v, want Runtime", err)
	}
	m.Stop()
	m.Stop()
	if err := m.Start(context.Background()); errkind.Of(err) != errkind.Runtime || !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Stop: %v", err)
	}
}
