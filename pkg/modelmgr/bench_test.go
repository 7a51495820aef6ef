package modelmgr

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// benchTree writes a realistic exported version of 3 sub models (about 200 MB: variables shards,
// embedding shards, a saved_model.pb, many small assets) and its marker; it returns the byte count.
func benchTree(b *testing.B, src, model, version string) int64 {
	b.Helper()
	block := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(block)
	var total int64
	write := func(path string, size int) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		for left := size; left > 0; left -= len(block) {
			if _, err := f.Write(block[:min(left, len(block))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		total += int64(size)
	}
	r := rand.New(rand.NewSource(2))
	for _, sub := range []string{"entry", "ps_0", "ps_1"} {
		v := filepath.Join(src, model+"@"+version, model, sub, version)
		write(filepath.Join(v, "saved_model.pb"), 2<<20)
		write(filepath.Join(v, "variables", "variables.data-00000-of-00002"), 30<<20)
		write(filepath.Join(v, "variables", "variables.data-00001-of-00002"), 20<<20)
		write(filepath.Join(v, "variables", "variables.index"), 64<<10)
		for i := range 10 {
			write(filepath.Join(v, "embeddings", fmt.Sprintf("shard-%02d", i)), 1<<20)
		}
		for i := range 100 {
			write(filepath.Join(v, "assets", fmt.Sprintf("vocab-%03d.txt", i)), 8<<10+r.Intn(56<<10))
		}
	}
	if err := os.WriteFile(filepath.Join(src, model+"@"+version+WriteDone), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return total
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkCopy measures the manager's copy of a new version (one LoopOnce: scan, locks, atomic
// copy of 3 sub models, about 200 MB) against `cp -r` of the same tree, run alternately
// from the same (cached) source after a sync, and reports both rates (MB/s of the median run) and
// their ratio (x-cp, the target is at least 0.8).
func BenchmarkCopy(b *testing.B) {
	if _, err := exec.LookPath("cp"); err != nil {
		b.Skip("no cp")
	}
	base := b.TempDir()
	src := filepath.Join(base, "p2p")
	total := benchTree(b, src, "mdl", "1700000000")
	mb := float64(total) / (1 << 20)
	ctx := context.Background()
	var mgrTimes, cpTimes []float64
	runManager := func(i int) {
		dst := filepath.Join(base, fmt.Sprintf("recv-%d", i))
		m, err := New(Config{ModelName: "mdl", SourcePath: src, ReceivePath: dst, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		syscall.Sync()
		start := time.Now()
		if err := m.LoopOnce(ctx); err != nil {
			b.Fatal(err)
		}
		mgrTimes = append(mgrTimes, time.Since(start).Seconds())
		if len(m.Models()["mdl"]) != 1 {
			b.Fatal("nothing copied")
		}
		if err := m.RemoveReadLocks(); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
	}
	runCp := func(i int) {
		dst := filepath.Join(base, fmt.Sprintf("cp-%d", i))
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		syscall.Sync()
		start := time.Now()
		if out, err := exec.CommandContext(cctx, "cp", "-r", filepath.Join(src, "mdl@1700000000", "mdl"), dst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		cpTimes = append(cpTimes, time.Since(start).Seconds())
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			runManager(i)
			runCp(i)
		} else {
			runCp(i)
			runManager(i)
		}
	}
	b.StopTimer()
	// Medians: this I/O is noisy on shared machines, a single slow run should not decide.
	mgrRate := mb / median(mgrTimes)
	cpRate := mb / median(cpTimes)
	b.ReportMetric(mgrRate, "MB/s")
	b.ReportMetric(cpRate, "cp-MB/s")
	b.ReportMetric(mgrRate/cpRate, "x-cp")
	b.ReportMetric(mb, "MB")
}
