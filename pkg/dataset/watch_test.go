package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// publish writes a TFRecord file of records outside the watched directory and renames it in, as a
// writer for a watching reader should.
func publish(t testing.TB, dir, name string, records ...string) {
	t.Helper()
	if err := later(t, dir, name, records...)(); err != nil {
		t.Fatal(err)
	}
}

// later writes the file publish would, outside dir, and returns the rename that publishes it (to
// call from another goroutine).
func later(t testing.TB, dir, name string, records ...string) func() error {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name)
	var recs [][]byte
	for _, r := range records {
		recs = append(recs, []byte(r))
	}
	writeRecords(t, tmp, Options{}, recs)
	return func() error { return os.Rename(tmp, filepath.Join(dir, name)) }
}

// nextData returns the data of r's next record, or the error.
func nextData(ctx context.Context, r *Reader) (string, error) {
	rec, err := r.Next(ctx)
	return string(rec.Data), err
}

// The matching-files mode picks up files that appear while it reads, in sorted order per match,
// each once, and ends its input when Stop is closed, after the files present then.
func TestWatchPicksUpNewFiles(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	publish(t, dir, "b", "b1", "b2")
	publish(t, dir, "a", "a1")
	stop := make(chan struct{})
	r, err := Watch([]string{dir + "/*"}, WatchOptions{Poll: 5 * time.Millisecond, Stop: stop}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	read := func(n int) {
		t.Helper()
		for range n {
			d, err := nextData(ctx, r)
			if err != nil {
				t.Fatalf("after %q: %v", got, err)
			}
			got = append(got, d)
		}
	}
	read(3)
	// A file renamed in while the reader waits is read.
	publishC := later(t, dir, "c", "c1")
	done := make(chan error)
	go func() {
		time.Sleep(30 * time.Millisecond)
		done <- publishC()
	}()
	read(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// An older name that appears later is read too (it was not seen before).
	publish(t, dir, "0", "z1")
	read(1)
	// Files present when Stop is closed are still read, then the input ends.
	publish(t, dir, "e", "e1")
	publish(t, dir, "d", "d1")
	close(stop)
	read(2)
	if _, err := r.Next(ctx); err != io.EOF {
		t.Fatalf("after Stop: %v, want io.EOF", err)
	}
	publish(t, dir, "f", "f1")
	if _, err := r.Next(ctx); err != io.EOF {
		t.Fatalf("a file after the end: %v, want io.EOF", err)
	}
	want := []string{"a1", "b1", "b2", "c1", "z1", "d1", "e1"}
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
}

func TestWatchIdleEnd(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	publish(t, dir, "a", "a1")
	const idle = time.Second
	r, err := Watch([]string{dir + "/*"}, WatchOptions{Poll: 5 * time.Millisecond, Idle: idle}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if d, err := nextData(ctx, r); err != nil || d != "a1" {
		t.Fatalf("first record %q, %v", d, err)
	}
	// A file appearing within Idle of the wait is read; the idle time starts again after it.
	publishB := later(t, dir, "b", "b1")
	done := make(chan error)
	go func() {
		time.Sleep(20 * time.Millisecond)
		done <- publishB()
	}()
	if d, err := nextData(ctx, r); err != nil || d != "b1" {
		t.Fatalf("second record %q, %v; want b1", d, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.Next(ctx); err != io.EOF {
		t.Fatalf("no new file: %v, want io.EOF", err)
	}
	if waited := time.Since(start); waited < idle {
		t.Fatalf("the input ended after %v, before Idle", waited)
	}
}

func TestWatchContext(t *testing.T) {
	leakcheck.Check(t)
	dir := t.TempDir()
	r, err := Watch([]string{dir + "/*"}, WatchOptions{Poll: 5 * time.Millisecond}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no file before the deadline: %v, want context.DeadlineExceeded", err)
	}
	// The context's end is not the input's: with a new context, a new file is read.
	publish(t, dir, "a", "a1")
	if d, err := nextData(context.Background(), r); err != nil || d != "a1" {
		t.Fatalf("after the deadline: %q, %v; want a1", d, err)
	}
}

func TestWatchStopBeforeStart(t *testing.T) {
	dir := t.TempDir()
	publish(t, dir, "a", "a1", "a2")
	stop := make(chan struct{})
	close(stop)
	r, err := Watch([]string{dir + "/*"}, WatchOptions{Stop: stop}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, r)
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d records, %v; want the 2 present", len(got), err)
	}
}

// Watching workers share the files by path hash: disjoint, and together all of them.
func TestWatchSharding(t *testing.T) {
	dir := t.TempDir()
	var all []string
	for i := range 40 {
		name := fmt.Sprintf("part-%03d", i)
		publish(t, dir, name, name)
		all = append(all, name)
	}
	stop := make(chan struct{})
	close(stop)
	var got []string
	for w := range 3 {
		r, err := Watch([]string{dir + "/part-*"}, WatchOptions{Stop: stop}, Options{Shard: Shard{Index: w, Count: 3}})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := readAll(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || len(recs) == len(all) {
			t.Errorf("worker %d read %d of %d files, want a share", w, len(recs), len(all))
		}
		for _, rec := range recs {
			if !(Shard{Index: w, Count: 3}).OwnsFile(rec.File) {
				t.Errorf("worker %d read %s, which it does not own", w, rec.File)
			}
			got = append(got, string(rec.Data))
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, all) {
		t.Fatalf("workers read %d files together (%q...), want each of %d once", len(got), got[:min(3, len(got))], len(all))
	}
}

func TestWatchErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		patterns []string
		opts     Options
		kind     errkind.Kind
	}{
		{"bad pattern", []string{dir + "/[x"}, Options{}, errkind.Value},
		{"missing file list", []string{"@" + dir + "/list"}, Options{}, errkind.NotFound},
		{"bad shard", []string{dir + "/*"}, Options{Shard: Shard{Index: 5, Count: 5}}, errkind.Value},
		{"bad compression", []string{dir + "/*"}, Options{Compression: "SNAPPY"}, errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Watch(tc.patterns, WatchOptions{}, tc.opts); errkind.Of(err) != tc.kind {
				t.Fatalf("err = %v (kind %v), want kind %v", err, errkind.Of(err), tc.kind)
			}
		})
	}
	// A file list that disappears while watching is an error at the next match.
	list := filepath.Join(dir, "list")
	if err := os.WriteFile(list, []byte(dir+"/data-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Watch([]string{"@" + list}, WatchOptions{Poll: time.Millisecond}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Remove(list); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(context.Background()); errkind.Of(err) != errkind.NotFound {
		t.Fatalf("file list removed: %v, want a NotFound error", err)
	}
}
