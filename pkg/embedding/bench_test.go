package embedding

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer"
)

// The benchmarks measure batched lookups and Adagrad applies of 64k random existing ids against
// the physical limit measured in the same run: a plain gather of the same number of random rows
// from a flat array (and, for applies, the same Adagrad on a flat array), and against Go's map of
// slices. Each benchmark reports entries/s, bytes of memory per entry, x_gather: its rate over
// the gather's, the two timed alternately batch by batch in the same sub-benchmark (paired), and
// x_gather_alone: its rate over the gather's when that ran on its own. The map's sub-benchmarks
// also report x_table_over_map, the table's rate over the map's, and x_table_over_map_paired,
// the table's x_gather over the map's (robust to the machine's speed moving between the two).
//
//	go test ./pkg/embedding -run '^$' -bench . -benchtime 20x                         1M entries
//	go test ./pkg/embedding -run '^$' -bench . -benchtime 20x -embedding.large -timeout 1h   also 10M
//
// The 10M entries x 64 floats case needs about 12 GB at its peak (the table with its Adagrad
// state, and the gather's flat array, which stays for the pairing; the flat Adagrad's arrays and
// the map are built before and after the table, not at the same time).
var benchLarge = flag.Bool("embedding.large", false, "also run the 10M-entry benchmarks (several GB of memory)")

const benchBatch = 64 << 10

// trackedTakeEvery is how many apply batches the tracked benchmark runs between two takes.
const trackedTakeEvery = 4

type benchShape struct {
	entries int
	dim     int
}

func benchShapes() []benchShape {
	shapes := []benchShape{{1 << 20, 16}, {1 << 20, 64}}
	if *benchLarge {
		shapes = append(shapes, benchShape{10 << 20, 16}, benchShape{10 << 20, 64})
	}
	return shapes
}

func (s benchShape) String() string { return fmt.Sprintf("entries=%dM/dim=%d", s.entries>>20, s.dim) }

// benchIDs returns n distinct random ids and batches of positions into them (existing ids).
func benchIDs(n int) ([]int64, [][]int32) {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	seen := make(map[int64]struct{}, n)
	ids := make([]int64, 0, n)
	for len(ids) < n {
		id := int64(rng.Uint64())
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	batches := make([][]int32, 8)
	for b := range batches {
		pos := make([]int32, benchBatch)
		for i := range pos {
			pos[i] = int32(rng.IntN(n))
		}
		batches[b] = pos
	}
	return ids, batches
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func threadCounts() []int {
	if p := runtime.GOMAXPROCS(0); p > 1 {
		return []int{1, p}
	}
	return []int{1}
}

// chunked runs fn over workers contiguous shares of n items.
func chunked(n, workers int, fn func(lo, hi int)) {
	parallel(workers, func(w int) { fn(span(n, workers, w)) })
}

// paired times op and the gather on the same batches, alternating batch by batch, so that both
// see the same machine: on a shared machine the gather's rate alone moved by 2x between runs an
// hour apart, and a ratio to a gather measured seconds earlier moved with it.
type paired struct {
	op, gather time.Duration
	rate       float64 // the op's entries/s, once reported
	xGather    float64 // its rate over the gather's, paired, once reported
}

// run runs gather(n) then op(n), timing each, for n in [0, b.N).
func (pr *paired) run(b *testing.B, gather, op func(n int)) {
	for n := 0; n < b.N; n++ {
		t0 := time.Now()
		gather(n)
		t1 := time.Now()
		op(n)
		pr.op += time.Since(t1)
		pr.gather += t1.Sub(t0)
	}
}

// gatherKey names the rate of a gather measured on its own, for x_gather_alone.
type gatherKey struct {
	shape   benchShape
	op      string
	threads int
}

var (
	gatherAlone = map[gatherKey]float64{}
	tableRates  = map[gatherKey]*paired{}
)

// report records the op's entries/s and memory per entry and, when the gather ran alongside,
// x_gather: the op's rate over the gather's, timed alternately; and x_gather_alone: its rate over
// that of the gather sub-benchmark, which ran on its own earlier (its flat array's lines stay in
// the caches between its batches, as the table's cannot, which are 2 to 4 times as many).
func (pr *paired) report(b *testing.B, key gatherKey, bytesPerEntry float64) {
	rate := float64(b.N*benchBatch) / pr.op.Seconds()
	b.ReportMetric(rate, "entries/s")
	b.ReportMetric(bytesPerEntry, "B/entry")
	if pr.gather == 0 {
		gatherAlone[key] = rate
		return
	}
	b.ReportMetric(pr.gather.Seconds()/pr.op.Seconds(), "x_gather")
	if alone, ok := gatherAlone[key]; ok {
		b.ReportMetric(rate/alone, "x_gather_alone")
	}
	pr.rate = rate
	pr.xGather = pr.gather.Seconds() / pr.op.Seconds()
}

// BenchmarkLookup: table lookup of 64k random existing ids against the gather of 64k random rows
// from a flat array and against map[int64][]float32.
func BenchmarkLookup(b *testing.B) {
	for _, shape := range benchShapes() {
		b.Run(shape.String(), func(b *testing.B) { benchOp(b, shape, "lookup") })
	}
}

// BenchmarkApplyAdagrad: table Adagrad apply (pkg/embedding/optimizer's) of 64k random existing ids against the same gather
// (the limit), Adagrad on a flat array (the limit with the arithmetic) and Adagrad on
// map[int64][]float32.
func BenchmarkApplyAdagrad(b *testing.B) {
	for _, shape := range benchShapes() {
		b.Run(shape.String(), func(b *testing.B) { benchOp(b, shape, "apply") })
	}
}

func benchOp(b *testing.B, shape benchShape, op string) {
	ids, batches := benchIDs(shape.entries)
	dim := shape.dim
	opt, err := optimizer.New(&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Adagrad{Adagrad: &optimizerpb.AdagradOptimizerConfig{}}}, dim)
	if err != nil {
		b.Fatal(err)
	}
	grads := make([]float32, benchBatch*dim)
	for i := range grads {
		grads[i] = float32(i%7) * 0.01
	}
	out := make([]float32, benchBatch*dim)
	gatherOut := make([]float32, benchBatch*dim)
	qids := make([][]int64, len(batches))
	for i, pos := range batches {
		qids[i] = make([]int64, len(pos))
		for k, p := range pos {
			qids[i][k] = ids[p]
		}
	}

	// The physical limit: gather random rows of a flat array. It stays allocated to run alongside
	// every other op (paired).
	before := heapInUse()
	flat := make([]float32, shape.entries*dim)
	for i := range flat {
		flat[i] = float32(i)
	}
	flatPer := float64(heapInUse()-before) / float64(shape.entries)
	gatherWith := func(th int) func(n int) {
		return func(n int) {
			pos := batches[n%len(batches)]
			chunked(len(pos), th, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					r := int(pos[i]) * dim
					copy(gatherOut[i*dim:(i+1)*dim], flat[r:r+dim])
				}
			})
		}
	}
	for _, th := range threadCounts() {
		b.Run(fmt.Sprintf("threads=%d/gather", th), func(b *testing.B) {
			var pr paired
			pr.run(b, func(int) {}, gatherWith(th))
			pr.gather = 0
			pr.report(b, gatherKey{shape, op, th}, flatPer)
		})
	}
	if op == "apply" {
		state := make([]float32, shape.entries*dim)
		rows := make([]float32, shape.entries*dim)
		for _, th := range threadCounts() {
			b.Run(fmt.Sprintf("threads=%d/flat_adagrad", th), func(b *testing.B) {
				var pr paired
				pr.run(b, gatherWith(th), func(n int) {
					pos := batches[n%len(batches)]
					chunked(len(pos), th, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							r := int(pos[i]) * dim
							opt.Apply(rows[r:r+dim], state[r:r+dim], grads[i*dim:(i+1)*dim], lr(0.01), 0)
						}
					})
				})
				pr.report(b, gatherKey{shape, op, th}, 2*flatPer)
			})
		}
		runtime.KeepAlive(rows)
		runtime.KeepAlive(state)
	}

	// The table.
	{
		before := heapInUse()
		tb := newTable(b, Config{Dim: dim, Optimizer: opt, Initializer: constInit(0.01)})
		fill := make([]float32, benchBatch*dim)
		for lo := 0; lo < len(ids); lo += benchBatch {
			hi := min(lo+benchBatch, len(ids))
			if err := tb.Apply(ids[lo:hi], fill[:(hi-lo)*dim], lr(0.01), 0, 1); err != nil {
				b.Fatal(err)
			}
		}
		per := float64(heapInUse()-before) / float64(shape.entries)
		b.Logf("%s table: %.1f B/entry by heap, %.1f by MemoryBytes", shape, per, float64(tb.MemoryBytes())/float64(shape.entries))
		tableOp := func(n int) {
			q := qids[n%len(qids)]
			if op == "lookup" {
				if hits, err := tb.Lookup(q, out); err != nil || hits != len(q) {
					b.Fatalf("lookup: %d hits of %d, %v", hits, len(q), err)
				}
			} else if err := tb.Apply(q, grads, lr(0.01), int64(n), 2); err != nil {
				b.Fatal(err)
			}
		}
		for _, th := range threadCounts() {
			b.Run(fmt.Sprintf("threads=%d/table", th), func(b *testing.B) {
				tb.SetWorkers(th)
				var pr paired
				pr.run(b, gatherWith(th), tableOp)
				pr.report(b, gatherKey{shape, op, th}, per)
				tableRates[gatherKey{shape, op, th}] = &pr
			})
		}
		if op == "apply" {
			// The same applies with the entries' updates tracked for parameter sync, the touched
			// entries taken every trackedTakeEvery batches as a pusher would (the takes are timed
			// apart: take_entries/s).
			tb.TrackTouched(true)
			for _, th := range threadCounts() {
				b.Run(fmt.Sprintf("threads=%d/table_tracked", th), func(b *testing.B) {
					tb.SetWorkers(th)
					var taking time.Duration
					taken := 0
					var pr paired
					pr.run(b, gatherWith(th), func(n int) {
						tableOp(n)
						if (n+1)%trackedTakeEvery == 0 || n == b.N-1 {
							t0 := time.Now()
							k, err := tb.TakeTouched(benchBatch, func([]int64, []float32) error { return nil })
							if err != nil {
								b.Fatal(err)
							}
							taken += k
							taking += time.Since(t0)
						}
					})
					pr.op -= taking
					pr.report(b, gatherKey{shape, op, th}, per)
					b.ReportMetric(float64(taken)/taking.Seconds(), "take_entries/s")
				})
			}
			tb.TrackTouched(false)
		}
		tb.Clear()
	}

	// Go's map of slices.
	{
		before := heapInUse()
		width := dim
		if op == "apply" {
			width = 2 * dim
		}
		m := make(map[int64][]float32, len(ids))
		for _, id := range ids {
			v := make([]float32, width)
			if op == "apply" {
				opt.Init(v[dim:])
			}
			m[id] = v
		}
		per := float64(heapInUse()-before) / float64(shape.entries)
		for _, th := range threadCounts() {
			b.Run(fmt.Sprintf("threads=%d/gomap", th), func(b *testing.B) {
				var pr paired
				pr.run(b, gatherWith(th), func(n int) {
					q := qids[n%len(qids)]
					chunked(len(q), th, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							v, ok := m[q[i]]
							if !ok {
								panic("missing id")
							}
							if op == "lookup" {
								copy(out[i*dim:(i+1)*dim], v)
							} else {
								opt.Apply(v[:dim], v[dim:], grads[i*dim:(i+1)*dim], lr(0.01), 0)
							}
						}
					})
				})
				pr.report(b, gatherKey{shape, op, th}, per)
				if table, ok := tableRates[gatherKey{shape, op, th}]; ok {
					b.ReportMetric(table.rate/pr.rate, "x_table_over_map")
					// The same through each one's paired gather: the machine's speed, which
					// moves between the two sub-benchmarks, cancels out.
					b.ReportMetric(table.xGather/pr.xGather, "x_table_over_map_paired")
				}
			})
		}
		runtime.KeepAlive(m)
	}
	runtime.KeepAlive(flat)
}
