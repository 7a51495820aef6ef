package tfrecord

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWrite reports write throughput (MB/s of record data) for several record sizes, into
// io.Discard (framing and CRC cost alone) and through a bufio.Writer into a file.
func BenchmarkWrite(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 1 << 20} {
		data := bytes.Repeat([]byte{0x5a}, size)
		b.Run(fmt.Sprintf("discard/%dB", size), func(b *testing.B) {
			w := NewWriter(io.Discard)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("file/%dB", size), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "bench.tfrecord"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			bw := bufio.NewWriterSize(f, 256<<10)
			w := NewWriter(bw)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(data); err != nil {
					b.Fatal(err)
				}
			}
			if err := bw.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRead reports read throughput (MB/s of record data) of 4 KiB records, checksums verified.
func BenchmarkRead(b *testing.B) {
	const size, n = 4 << 10, 256
	var recs [][]byte
	for range n {
		recs = append(recs, bytes.Repeat([]byte{0xa5}, size))
	}
	in := frameAll(recs)
	b.SetBytes(size * n)
	for b.Loop() {
		got, err := ReadAll(bytes.NewReader(in))
		if err != nil || len(got) != n {
			b.Fatalf("read %d records: %v", len(got), err)
		}
	}
}

// BenchmarkScan reports Scanner throughput (MB/s of framed input, checksums verified) for several
// record sizes, from memory: the framing and checksum cost without the file system.
func BenchmarkScan(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 64 << 10, 1 << 20} {
		n := max(1, (8<<20)/size)
		var recs [][]byte
		for range n {
			recs = append(recs, bytes.Repeat([]byte{0xa5}, size))
		}
		in := frameAll(recs)
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			r := bytes.NewReader(in)
			s := NewScanner(r, 0)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(in)
				s.Reset(r)
				got := 0
				for {
					_, err := s.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != n {
					b.Fatalf("read %d records, want %d", got, n)
				}
			}
		})
	}
}
