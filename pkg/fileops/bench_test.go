package fileops

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkAppendEntryDump reports entry dump throughput: MB/s of embedding and bias values
// (4 bytes each) written, for batches of 256 items.
func BenchmarkAppendEntryDump(b *testing.B) {
	for _, dim := range []int{8, 64} {
		b.Run(fmt.Sprintf("dim%d", dim), func(b *testing.B) {
			const batch = 256
			f, err := NewWritableFile(filepath.Join(b.TempDir(), "dump"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			ids := make([]int64, batch)
			bias := make([]float32, batch)
			emb := make([]float32, batch*dim)
			for i := range ids {
				ids[i] = int64(i) << 20
				bias[i] = float32(i)
			}
			for i := range emb {
				emb[i] = float32(i) / 7
			}
			b.SetBytes(int64(4 * batch * (dim + 1)))
			b.ReportAllocs()
			for b.Loop() {
				if err := f.AppendEntryDump(ids, bias, emb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend reports raw append throughput of 4 KiB pieces.
func BenchmarkAppend(b *testing.B) {
	f, err := NewWritableFile(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 4<<10)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Append(data); err != nil {
			b.Fatal(err)
		}
	}
}
