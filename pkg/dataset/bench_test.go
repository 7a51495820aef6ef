package dataset

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/tfrecord"
)

// BenchmarkReadVsCat reads uncompressed TFRecord files through a Reader (every checksum
// verified) and, in the same run and on the same files with the page cache warm, runs
// `cat files > /dev/null`; it reports both throughputs (read_MB/s, cat_MB/s, in MB of file bytes
// per second) and their ratio (read/cat). Run it on one core: go test -bench ReadVsCat -cpu 1.
func BenchmarkReadVsCat(b *testing.B) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		b.Fatalf("cat is needed to compare with: %v", err)
	}
	const files, fileSize = 4, 32 << 20
	for _, recSize := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("record=%dB", recSize), func(b *testing.B) {
			dir := b.TempDir()
			var paths []string
			var total int64
			rec := bytes.Repeat([]byte("monolith"), recSize/8)
			for f := range files {
				p := filepath.Join(dir, fmt.Sprintf("part-%d.tfrecord", f))
				w, err := CreateFile(p, NoCompression)
				if err != nil {
					b.Fatal(err)
				}
				for n := 0; n < fileSize; n += tfrecord.HeaderLen + len(rec) + tfrecord.FooterLen {
					if err := w.Write(rec); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				st, err := os.Stat(p)
				if err != nil {
					b.Fatal(err)
				}
				total += st.Size()
				paths = append(paths, p)
			}
			devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer devNull.Close()
			runCat := func() {
				c := exec.Command(cat, paths...)
				c.Stdout = devNull
				if err := c.Run(); err != nil {
					b.Fatalf("cat: %v", err)
				}
			}
			read := func() {
				r, err := OpenFiles(paths, Options{})
				if err != nil {
					b.Fatal(err)
				}
				var n int64
				for {
					rec, err := r.Next(context.Background())
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += int64(len(rec.Data))
				}
				if n == 0 {
					b.Fatal("no records read")
				}
			}
			// Warm the page cache (and the Reader's code paths) before timing.
			runCat()
			read()
			b.ReportAllocs()
			var readTime, catTime time.Duration
			iters := 0
			for b.Loop() {
				start := time.Now()
				read()
				readTime += time.Since(start)
				start = time.Now()
				runCat()
				catTime += time.Since(start)
				iters++
			}
			mb := float64(total) * float64(iters) / 1e6
			readRate, catRate := mb/readTime.Seconds(), mb/catTime.Seconds()
			b.ReportMetric(readRate, "read_MB/s")
			b.ReportMetric(catRate, "cat_MB/s")
			b.ReportMetric(readRate/catRate, "read/cat")
		})
	}
}
