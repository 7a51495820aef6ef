package dnn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// BenchmarkStep times one training step over in-process pkg/embedding tables (TableStore) and
// reports each phase's share (Stats): input (ids split by feature and de-duplicated, the layout
// op's input), lookup (all tables), layout (the fused kernel forward and backward), dense (dot
// interaction, MLP forward and backward, Adam) and apply (all tables), in ns per step, with the
// examples per second of the whole step. The batches cycle over a fixed set, after a warm-up pass
// that creates their entries, so lookups find what they ask for.
func BenchmarkStep(b *testing.B) {
	shapes := []struct {
		name string
		data synth.Config
		dim  int
	}{
		// The tests' click log and model: 4 slots of 100 ids, embeddings of 8.
		{"demo", synth.Config{Seed: 1, NumDense: 4, NumSlots: 4, Vocab: 100, LatentDim: 4}, 8},
		// More features and ids: 16 slots of 100000 ids, 2 per example, embeddings of 16.
		{"wide", synth.Config{Seed: 1, NumDense: 8, NumSlots: 16, Vocab: 100000, IDsPerSlot: 2, LatentDim: 4}, 16},
	}
	for _, shape := range shapes {
		for _, size := range []int{256, 1024} {
			b.Run(fmt.Sprintf("%s/batch=%d", shape.name, size), func(b *testing.B) {
				g, err := synth.New(shape.data)
				if err != nil {
					b.Fatal(err)
				}
				batches := streamBatches(b, g, 1, 8, size)
				features := slotFeatures(g, shape.dim)
				m, err := New(Config{Features: features, DenseDim: g.Schema().DenseDim()}, newTableStore(b, features))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				for _, bt := range batches {
					if _, err := m.Step(ctx, bt); err != nil {
						b.Fatal(err)
					}
				}
				m.ResetStats()
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if _, err := m.Step(ctx, batches[i%len(batches)]); err != nil {
						b.Fatal(err)
					}
				}
				elapsed := time.Since(start)
				b.StopTimer()
				st := m.Stats()
				n := float64(b.N)
				b.ReportMetric(float64(st.Input.Nanoseconds())/n, "input-ns/op")
				b.ReportMetric(float64(st.Lookup.Nanoseconds())/n, "lookup-ns/op")
				b.ReportMetric(float64(st.Layout.Nanoseconds())/n, "layout-ns/op")
				b.ReportMetric(float64(st.Dense.Nanoseconds())/n, "dense-ns/op")
				b.ReportMetric(float64(st.Apply.Nanoseconds())/n, "apply-ns/op")
				b.ReportMetric(float64(st.Examples)/elapsed.Seconds(), "examples/s")
			})
		}
	}
}
