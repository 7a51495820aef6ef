package layout

// Benchmarks on a realistic layout: batch 1024, 100 features over 4 tables (embedding dims 8, 16,
// 32, 64), 4 PS, 1-5 fids per feature and example (mostly distinct, so the embeddings do not fit
// in cache), version 3 offsets from sharding_sparse_fids. Layouts: "bias" ADDN of column 0 of the
// 90 pooled features (80 SUM, 10 MEAN), "vec" CONCAT of all their columns, "seq" NONE of the 10
// FIRSTN features (5 positions).
//
// Every engine reports examples/s and effective GB/s: the bytes it must touch, divided by its
// time (embedding floats read, layout floats written, fid and feature offsets read). memcpy/N
// copies the same number of bytes on N threads in the same run; its GB/s counts bytes touched as
// well (read + written: twice the bytes copied), the physical limit to compare with.
//
//	go test -run '^$' -bench . -benchtime 20x ./pkg/layout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
)

type benchFixture struct {
	cfgs  *examplepb.FeatureConfigs
	in    *Input
	bytes int64 // effective bytes of one forward pass
}

var (
	benchOnce sync.Once
	bench     *benchFixture
)

func benchCase() *benchFixture {
	benchOnce.Do(func() {
		const (
			batch    = 1024
			features = 100
			seqLen   = 5
			fidPool  = 1_000_000 // per feature: the fids of a batch are nearly all distinct
		)
		rng := rand.New(rand.NewPCG(1024, 100))
		dims := []int32{8, 16, 32, 64}
		cfgs := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
		bias, vec, seq := &examplepb.OutConfig{}, &examplepb.OutConfig{}, &examplepb.OutConfig{}
		var names []string
		for f := range features {
			name := fmt.Sprintf("feature_%03d", f)
			names = append(names, name)
			d := dims[f%4]
			fc := &examplepb.FeatureConfig{Table: fmt.Sprintf("table_%d", f%4), SliceDims: []int32{d}}
			switch {
			case f < 80:
				fc.PoolingType = examplepb.PoolingType_SUM
			case f < 90:
				fc.PoolingType = examplepb.PoolingType_MEAN
			default:
				fc.PoolingType, fc.MaxSequenceLength = examplepb.PoolingType_FIRSTN, seqLen
			}
			if f < 90 {
				addSlice(bias, name, 0, 1)
				addSlice(vec, name, 0, d)
			} else {
				addSlice(seq, name, 0, d)
			}
			cfgs.FeatureConfigs[name] = fc
		}
		cfgs.OutConfigs["bias"] = mustInferShape(bias, examplepb.OutType_ADDN, 0)
		cfgs.OutConfigs["vec"] = mustInferShape(vec, examplepb.OutType_CONCAT, 0)
		cfgs.OutConfigs["seq"] = mustInferShape(seq, examplepb.OutType_NONE, seqLen)
		exs := make([]*examplepb.Example, batch)
		for i := range exs {
			exs[i] = &examplepb.Example{}
			for f, name := range names {
				fids := make([]uint64, randint(rng, 1, 5))
				for j := range fids {
					fids[j] = uint64(f+1)<<48 | uint64(rng.IntN(fidPool))
				}
				exs[i].NamedFeature = append(exs[i].NamedFeature, &examplepb.NamedFeature{Name: name, Feature: fidV2(fids)})
			}
		}
		plan, err := Compile(cfgs, benchOptions(0))
		if err != nil {
			panic(err)
		}
		in := shardSparseFids(cfgs, benchPSNum, 3, true, nil, exs).embeddings(plan, func(fid uint64, col int) float32 {
			return float32(hashValue(fid, col))
		})
		bench = &benchFixture{cfgs: cfgs, in: in, bytes: effectiveBytes(plan, in)}
	})
	return bench
}

// effectiveBytes counts what one forward pass must touch: the embedding floats its slices read,
// the layout floats it writes, the fid offsets (8 bytes) and feature offsets (4) it reads.
func effectiveBytes(p *Plan, in *Input) int64 {
	var n int64
	_, features, ie := p.oraclePrepare(in, in.Embeddings)
	if ie != nil {
		panic(ie)
	}
	for _, s := range p.slices {
		fr := features[s.feature]
		if !fr.present {
			continue
		}
		for r := range in.BatchSize {
			row := fr.first
			if !fr.shared {
				row += r
			}
			k := len(fids(in, row))
			if s.pooling == examplepb.PoolingType_FIRSTN {
				k = min(k, s.maxSeq)
			}
			n += int64(4 * k * s.dims)
		}
	}
	for _, o := range p.outputs {
		n += int64(4 * in.BatchSize * o.RowSize)
	}
	return n + int64(8*len(in.FidOffset)+4*len(in.FeatureOffset))
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report sets the metrics: examples/s and GB/s (wall clock), and cpu-ms/op, the CPU time the
// process used per op (all threads), which shows how much of the wall time other processes took
// on a shared machine.
func report(b *testing.B, batch int, bytes int64, cpu0 time.Duration) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(batch)/sec, "examples/s")
	b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(0, "ns/op") // ns/op is b.Elapsed()/N: the metrics above say it better
}

// reportPerOp reports like report, for a time per op measured by the op itself (CUDA events).
func reportPerOp(b *testing.B, batch int, bytes int64, perOp time.Duration) {
	sec := perOp.Seconds()
	if sec <= 0 {
		b.Fatalf("time per op %v", perOp)
	}
	b.ReportMetric(float64(batch)/sec, "examples/s")
	b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
	b.ReportMetric(0, "ns/op")
}

const benchPSNum = 4

// benchOptions are the op options of the benchmark layout.
func benchOptions(threads int) Options {
	return Options{Version: 3, PSNum: benchPSNum, VariantType: "example", ParallelFlag: 1, Threads: threads}
}

// cudaName names the CUDA engine's sub-benchmarks: emulated figures are not GPU figures.
func cudaName() string {
	if cudaEmulated {
		return "cuda_emulated"
	}
	return "cuda"
}

// forEngines runs fn as a sub-benchmark for the oracle and the native kernel on 1 and on all
// threads, and for the CUDA kernel where the binary has it (host-device copies included).
func forEngines(b *testing.B, fx *benchFixture, fn func(b *testing.B, plan *Plan, engine Engine)) {
	type engineCase struct {
		name    string
		engine  Engine
		threads int
	}
	cases := []engineCase{
		{"oracle", Oracle, 1},
		{"native_1thread", Native, 1},
		{fmt.Sprintf("native_%dthreads", runtime.GOMAXPROCS(0)), Native, 0},
	}
	if CUDAAvailable {
		cases = append(cases, engineCase{cudaName() + "_with_copies", CUDA, 1})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if tc.engine == Native && !NativeAvailable {
				b.Skip("built without cgo")
			}
			plan, err := Compile(fx.cfgs, benchOptions(tc.threads))
			if err != nil {
				b.Fatal(err)
			}
			fn(b, plan, tc.engine)
		})
	}
}

func BenchmarkForward(b *testing.B) {
	fx := benchCase()
	logLoad(b)
	forEngines(b, fx, func(b *testing.B, plan *Plan, engine Engine) {
		out, err := plan.ForwardWith(engine, fx.in, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0 := cpuTime()
		for range b.N {
			if _, err := plan.ForwardWith(engine, fx.in, out); err != nil {
				b.Fatal(err)
			}
		}
		report(b, fx.in.BatchSize, fx.bytes, cpu0)
	})
	if CUDAAvailable {
		// The kernel alone, on inputs already on the device, next to a device-to-device copy of the
		// same bytes (read + written, like memcpy below): the GPU's own limit.
		plan, err := Compile(fx.cfgs, benchOptions(1))
		if err != nil {
			b.Fatal(err)
		}
		var copyTime time.Duration
		b.Run(cudaName()+"_kernel", func(b *testing.B) {
			kernel, copied, err := plan.CUDAKernelTimes(fx.in, b.N, fx.bytes)
			if err != nil {
				b.Fatal(err)
			}
			copyTime = copied
			reportPerOp(b, fx.in.BatchSize, fx.bytes, kernel)
		})
		b.Run(cudaName()+"_memcpy_device", func(b *testing.B) {
			if copyTime == 0 {
				b.Skip("no device copy time (the kernel benchmark did not run)")
			}
			reportPerOp(b, fx.in.BatchSize, 2*fx.bytes, copyTime)
		})
	}
	// memcpy of the same number of bytes, on 1 and on all threads.
	src, dst := memcpyBuffers(fx.bytes)
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("memcpy_%dthreads", threads), func(b *testing.B) {
			parallelCopy(dst, src, threads)
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				parallelCopy(dst, src, threads)
			}
			// Bytes touched: every copied byte is read and written.
			report(b, fx.in.BatchSize, 2*fx.bytes, cpu0)
		})
	}
	// gather copies every fid's embedding row, in fid order, into one contiguous buffer: the
	// random reads the op cannot avoid, with no pooling or layout work. It is the limit of this
	// access pattern on this machine (memcpy streams; the op and gather jump between rows).
	gplan, err := Compile(fx.cfgs, benchOptions(0))
	if err != nil {
		b.Fatal(err)
	}
	parts, features, ie := gplan.oraclePrepare(fx.in, fx.in.Embeddings)
	if ie != nil {
		b.Fatal(ie)
	}
	// Each fid is read as wide as its feature's slices reach (version 3 numbers positions in
	// floats, so the width comes from the plan).
	width := make([]int, len(features))
	for _, sl := range gplan.slices {
		width[sl.feature] = max(width[sl.feature], sl.start+sl.dims)
	}
	var rows [][]float32
	at := []int{0}
	for f, fr := range features {
		if !fr.present || width[f] == 0 {
			continue
		}
		n := fx.in.BatchSize
		if fr.shared {
			n = 1
		}
		for r := range n {
			for _, fo := range fids(fx.in, fr.first+r) {
				pt := parts[fo>>32]
				start := int(fo&0xffffffff) * pt.stride
				rows = append(rows, pt.data[start:start+width[f]])
				at = append(at, at[len(at)-1]+width[f])
			}
		}
	}
	gdst := make([]float32, at[len(rows)])
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("gather_%dthreads", threads), func(b *testing.B) {
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				var wg sync.WaitGroup
				n := len(rows)
				for t := range threads {
					wg.Go(func() {
						for i := n * t / threads; i < n*(t+1)/threads; i++ {
							copy(gdst[at[i]:at[i+1]], rows[i])
						}
					})
				}
				wg.Wait()
			}
			// Bytes touched: every row float read and written (4 + 4 bytes).
			report(b, fx.in.BatchSize, int64(8*len(gdst)), cpu0)
		})
	}
}

// BenchmarkForwardVsMemcpy alternates one pass of the native kernel with one memcpy of the same
// bytes on the same number of threads, and times each: both run under the same load, so their
// ratio (%memcpy) is steadier than that of the separate sub-benchmarks of BenchmarkForward, taken
// seconds apart on a machine whose memory bandwidth other tenants share. Each pass also starts
// with caches the memcpy has flushed, as a pass in a training step would.
func BenchmarkForwardVsMemcpy(b *testing.B) {
	if !NativeAvailable {
		b.Skip("built without cgo")
	}
	fx := benchCase()
	logLoad(b)
	src, dst := memcpyBuffers(fx.bytes)
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("%dthreads", threads), func(b *testing.B) {
			plan, err := Compile(fx.cfgs, benchOptions(threads))
			if err != nil {
				b.Fatal(err)
			}
			out, err := plan.ForwardWith(Native, fx.in, nil)
			if err != nil {
				b.Fatal(err)
			}
			parallelCopy(dst, src, threads)
			var kernel, copied time.Duration
			minKernel, minCopied := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
			ratios := make([]float64, 0, b.N) // per pair: kernel GB/s over memcpy GB/s
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				if _, err := plan.ForwardWith(Native, fx.in, out); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				parallelCopy(dst, src, threads)
				k, c := t1.Sub(t0), time.Since(t1)
				kernel, copied = kernel+k, copied+c
				minKernel, minCopied = min(minKernel, k), min(minCopied, c)
				// memcpy touches twice the bytes in c (read + written), the kernel the bytes in k.
				ratios = append(ratios, c.Seconds()/(2*k.Seconds()))
			}
			b.StopTimer()
			slices.Sort(ratios)
			b.ReportMetric(float64(fx.in.BatchSize)*float64(b.N)/kernel.Seconds(), "examples/s")
			b.ReportMetric(float64(fx.bytes)*float64(b.N)/kernel.Seconds()/1e9, "GB/s")
			b.ReportMetric(2*float64(fx.bytes)*float64(b.N)/copied.Seconds()/1e9, "memcpy-GB/s")
			// The median pair's ratio, and the ratio of the fastest passes: both filter out the
			// moments when other tenants took the memory bus from one of the two.
			b.ReportMetric(100*ratios[len(ratios)/2], "%memcpy")
			b.ReportMetric(100*minCopied.Seconds()/(2*minKernel.Seconds()), "best-%memcpy")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// memcpyBuffers returns a source of n bytes (written, so its pages exist) and a destination.
func memcpyBuffers(n int64) (src, dst []byte) {
	src, dst = make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	return src, dst
}

// parallelCopy copies src to dst on `threads` goroutines, each a contiguous share.
func parallelCopy(dst, src []byte, threads int) {
	var wg sync.WaitGroup
	n := len(src)
	for t := range threads {
		lo, hi := n*t/threads, n*(t+1)/threads
		wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
	}
	wg.Wait()
}

func BenchmarkBackward(b *testing.B) {
	fx := benchCase()
	forEngines(b, fx, func(b *testing.B, plan *Plan, engine Engine) {
		grads := ones(plan, fx.in.BatchSize)
		embGrads, err := plan.BackwardWith(engine, fx.in, grads, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0 := cpuTime()
		for range b.N {
			if _, err := plan.BackwardWith(engine, fx.in, grads, embGrads); err != nil {
				b.Fatal(err)
			}
		}
		// The same bytes as forward: layout gradients read, embedding gradients written.
		report(b, fx.in.BatchSize, fx.bytes, cpu0)
	})
}

// logLoad logs the load average: the benchmark machine may be shared.
func logLoad(b *testing.B) {
	if s, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average %s (GOMAXPROCS %d)", strings.TrimSpace(string(s)), runtime.GOMAXPROCS(0))
	}
}
