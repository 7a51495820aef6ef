package layout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// nativeThreads are the thread counts the native kernel runs with in every comparison: its
// results must not depend on them. Without cgo there is no native kernel to compare.
var nativeThreads = func() []int {
	if !NativeAvailable {
		return nil
	}
	return []int{1, 2, 5}
}()

// engines are the engines every input check runs on.
func engines() []Engine {
	e := []Engine{Oracle}
	if NativeAvailable {
		e = append(e, Native)
	}
	if CUDAAvailable {
		e = append(e, CUDA)
	}
	return e
}

func compile(t *testing.T, c *refCase, threads int) *Plan {
	t.Helper()
	opts := c.opts
	opts.Threads = threads
	if threads > 1 {
		opts.ParallelFlag = 1
	}
	p, err := Compile(c.cfgs, opts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

// sameBits fails unless got and want are equal bit for bit.
func sameBits(t *testing.T, what string, want, got [][]float32) {
	t.Helper()
	if err := firstDifference(what, want, got); err != nil {
		t.Fatal(err)
	}
}

// firstDifference reports the first float of got whose bits differ from want's.
func firstDifference(what string, want, got [][]float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return fmt.Errorf("%s: tensor %d has %d floats, want %d", what, i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				return fmt.Errorf("%s: tensor %d float %d = %v, want %v (bit for bit)", what, i, j, got[i][j], want[i][j])
			}
		}
	}
	return nil
}

// checkForward runs every engine on c and compares the oracle with the expected outputs (when c
// has embedding values) and the native kernel with the oracle, bit for bit.
func checkForward(t *testing.T, c *refCase) [][]float32 {
	t.Helper()
	oracle, err := compile(t, c, 1).ForwardWith(Oracle, c.in, nil)
	if err != nil {
		t.Fatalf("oracle forward: %v", err)
	}
	if c.value != nil {
		want := expectedOutputs(c)
		if len(want) != len(oracle) {
			t.Fatalf("oracle: %d outputs, want %d", len(oracle), len(want))
		}
		for i := range want {
			if len(want[i]) != len(oracle[i]) {
				t.Fatalf("output %d: %d floats, want %d", i, len(oracle[i]), len(want[i]))
			}
			for j := range want[i] {
				if !allClose(want[i][j], oracle[i][j]) {
					t.Fatalf("output %d (%s) float %d = %v, want %v", i, compile(t, c, 1).outputs[i].Layout, j, oracle[i][j], want[i][j])
				}
			}
		}
	}
	for _, n := range nativeThreads {
		got, err := compile(t, c, n).Forward(c.in)
		if err != nil {
			t.Fatalf("native forward (%d threads): %v", n, err)
		}
		sameBits(t, fmt.Sprintf("native forward, %d threads", n), oracle, got)
	}
	if CUDAAvailable {
		got, err := compile(t, c, 1).ForwardWith(CUDA, c.in, nil)
		if err != nil {
			t.Fatalf("CUDA forward: %v", err)
		}
		sameBits(t, "CUDA forward", oracle, got)
	}
	return oracle
}

// checkBackward runs the gradient op with layout gradients grads on every engine: native equals
// oracle bit for bit, for any number of threads.
func checkBackward(t *testing.T, c *refCase, grads [][]float32) [][]float32 {
	t.Helper()
	oracle, err := compile(t, c, 1).BackwardWith(Oracle, c.in, grads, nil)
	if err != nil {
		t.Fatalf("oracle backward: %v", err)
	}
	for _, n := range nativeThreads {
		got, err := compile(t, c, n).Backward(c.in, grads)
		if err != nil {
			t.Fatalf("native backward (%d threads): %v", n, err)
		}
		sameBits(t, fmt.Sprintf("native backward, %d threads", n), oracle, got)
	}
	if CUDAAvailable {
		// Atomic adds in any order: equal within float rounding.
		got, err := compile(t, c, 1).BackwardWith(CUDA, c.in, grads, nil)
		if err != nil {
			t.Fatalf("CUDA backward: %v", err)
		}
		for i := range oracle {
			for j := range oracle[i] {
				if d := math.Abs(float64(got[i][j] - oracle[i][j])); d > 1e-5*(1+math.Abs(float64(oracle[i][j]))) {
					t.Fatalf("CUDA backward: tensor %d float %d = %v, want %v", i, j, got[i][j], oracle[i][j])
				}
			}
		}
	}
	return oracle
}

func ones(p *Plan, batch int) [][]float32 {
	out := make([][]float32, len(p.outputs))
	for i, o := range p.outputs {
		out[i] = make([]float32, batch*o.RowSize)
		for j := range out[i] {
			out[i][j] = 1
		}
	}
	return out
}

// TestReferenceForward ports test_fused_embedding_to_layout (its shard op and parallel variants)
// and FusedEmbeddingToLayoutFitPreTest.test_fused_embedding_to_layout.
func TestReferenceForward(t *testing.T) {
	tests := []struct {
		name string
		c    func() *refCase
	}{
		{"fused_embedding_to_layout_v2", func() *refCase { return mainCase(1, 0, 2, 1) }},
		{"use_shard_op_v2", func() *refCase { return mainCase(2, 2, 2, 1) }},
		{"use_shard_op3_v3", func() *refCase { return mainCase(3, 3, 3, 1) }},
		{"use_shard_op4_v4", func() *refCase { return mainCase(4, 4, 4, 1) }},
		{"parallel_flag_0", func() *refCase { return mainCase(5, 0, 2, 0) }},
		{"fit_pre_v1_example_batch", func() *refCase { return fitPreCase(6, false) }},
		{"fit_pre_v1_firstn_none_concat_stack", func() *refCase { return fitPreCase(7, true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c()
			out := checkForward(t, c)
			nonzero := 0
			for _, o := range out {
				for _, v := range o {
					if v != 0 {
						nonzero++
					}
				}
			}
			if nonzero == 0 {
				t.Fatal("all outputs are zero")
			}
		})
	}
}

// splitV4 turns a version 4 gradient (one tensor, (ps, table) parts) into per (table, ps) parts,
// as the reference test does with tf.split.
func splitV4(g []float32, lengths []int32, tables, psNum int) [][]float32 {
	out := make([][]float32, tables*psNum)
	at := 0
	for k, l := range lengths {
		t, ps := k%tables, k/tables
		out[t*psNum+ps] = g[at : at+int(l)]
		at += int(l)
	}
	return out
}

// TestReferenceGrad ports test_fused_embedding_to_layout_grad (its variants) and
// FusedEmbeddingToLayoutFitPreTest.test_fused_embedding_to_layout_grad: with all layout gradients
// 1, every float of a fid's embedding gradient equals the fid's use count (1/n per use for MEAN,
// FIRSTN uses beyond max_sequence_length excluded).
func TestReferenceGrad(t *testing.T) {
	tests := []struct {
		name string
		c    func() *refCase
	}{
		{"grad_v2", func() *refCase { return gradCase(11, 0, 2, 1) }},
		{"grad_no_parallel", func() *refCase { return gradCase(12, 0, 2, 0) }},
		{"grad_use_shard_op_v2", func() *refCase { return gradCase(13, 2, 2, 1) }},
		{"grad_use_shard_op3_v3", func() *refCase { return gradCase(14, 3, 3, 1) }},
		{"grad_use_shard_op4_v4", func() *refCase { return gradCase(15, 4, 4, 1) }},
		{"fit_pre_grad_v1", func() *refCase { return fitPreGradCase(16) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c()
			checkForward(t, c)
			p := compile(t, c, 1)
			grads := checkBackward(t, c, ones(p, c.in.BatchSize))
			if c.opts.Version == 4 {
				grads = splitV4(grads[0], c.in.FidListEmbRowLength, len(p.tables), c.opts.PSNum)
			}
			if len(grads) != len(c.gradTruth) {
				t.Fatalf("%d gradient parts, want %d", len(grads), len(c.gradTruth))
			}
			used := 0
			for i, truth := range c.gradTruth {
				offset := 0
				for j, want := range truth {
					dim := c.gradRowDims[i][j]
					row := grads[i][offset : offset+dim]
					for _, v := range row {
						if v != row[0] {
							t.Fatalf("part %d fid %d: gradient %v is not uniform", i, j, row)
						}
					}
					if !allClose(want, row[0]) {
						t.Fatalf("part %d fid %d: gradient %v, want the use count %v", i, j, row[0], want)
					}
					if want != 0 {
						used++
					}
					offset += dim
				}
				if offset != len(grads[i]) {
					t.Fatalf("part %d: %d gradient floats, the rows cover %d", i, len(grads[i]), offset)
				}
			}
			if used == 0 {
				t.Fatal("no fid is used")
			}
		})
	}
}

// TestRandom checks random configurations and batches for every version: outputs against the
// expectations, native against oracle (bit for bit, for every thread count), and the gradient
// against the forward op through the adjoint identity <F(E), G> = <E, B(G)>.
func TestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for version := 1; version <= 4; version++ {
		for i := range 16 {
			spec := randomSpec{version: version, tables: randint(rng, 1, 3), psNum: randint(rng, 1, 4),
				features: randint(rng, 2, 10), batch: randint(rng, 0, 40), exampleIn: i%2 == 0, unique: i%3 != 0}
			if i >= 12 { // large enough for the native kernel to use several threads and blocks
				spec.features, spec.batch = 10, 200
			}
			spec.wide = i >= 14
			t.Run(fmt.Sprintf("v%d_%d", version, i), func(t *testing.T) {
				c := randomCase(rng, spec)
				out := checkForward(t, c)
				p := compile(t, c, 1)
				grads := make([][]float32, len(p.outputs))
				for k, o := range p.outputs {
					grads[k] = make([]float32, c.in.BatchSize*o.RowSize)
					for j := range grads[k] {
						grads[k][j] = float32(rng.NormFloat64())
					}
				}
				embGrads := checkBackward(t, c, grads)
				lhs, labs := dot(out, grads)
				rhs, rabs := dot(c.in.Embeddings, embGrads)
				if math.Abs(lhs-rhs) > 1e-4*(labs+rabs)+1e-9 {
					t.Fatalf("adjoint: <F(E), G> = %v, <E, B(G)> = %v", lhs, rhs)
				}
			})
		}
	}
}

// TestEveryFloatWritten: outputs and gradients given to the op are overwritten completely.
func TestEveryFloatWritten(t *testing.T) {
	if !NativeAvailable {
		t.Skip("built without cgo: no native kernel")
	}
	rng := rand.New(rand.NewPCG(8, 8))
	for version := 1; version <= 4; version++ {
		c := randomCase(rng, randomSpec{version: version, tables: 2, psNum: 3, features: 8, batch: 33, unique: true})
		p := compile(t, c, 3)
		fresh, err := p.Forward(c.in)
		if err != nil {
			t.Fatal(err)
		}
		dirty := make([][]float32, len(fresh))
		for i := range fresh {
			dirty[i] = make([]float32, len(fresh[i]))
			for j := range dirty[i] {
				dirty[i][j] = float32(math.NaN())
			}
		}
		got, err := p.ForwardWith(Native, c.in, dirty)
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("v%d forward into dirty outputs", version), fresh, got)
		grads := ones(p, c.in.BatchSize)
		freshGrad, err := p.Backward(c.in, grads)
		if err != nil {
			t.Fatal(err)
		}
		dirtyGrad := make([][]float32, len(freshGrad))
		for i := range freshGrad {
			dirtyGrad[i] = make([]float32, len(freshGrad[i]))
			for j := range dirtyGrad[i] {
				dirtyGrad[i][j] = float32(math.Inf(1))
			}
		}
		gotGrad, err := p.BackwardWith(Native, c.in, grads, dirtyGrad)
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("v%d backward into dirty gradients", version), freshGrad, gotGrad)
	}
}

// sameError runs forward (or backward with grads) on every engine and returns the common
// *InputError, failing when the engines disagree or one of them succeeds.
func sameError(t *testing.T, c *refCase, grads [][]float32, out [][]float32) *InputError {
	t.Helper()
	var first *InputError
	for _, e := range engines() {
		for _, n := range []int{1, 3} {
			p := compile(t, c, n)
			var err error
			if grads != nil {
				_, err = p.BackwardWith(e, c.in, grads, out)
			} else {
				_, err = p.ForwardWith(e, c.in, out)
			}
			ie, ok := AsInputError(err)
			if !ok {
				t.Fatalf("%s (%d threads): got %v, want an InputError", e, n, err)
			}
			if errkind.Of(err) != errkind.Value {
				t.Fatalf("%s: error kind %v, want Value", e, errkind.Of(err))
			}
			if first == nil {
				first = ie
			} else if *ie != *first {
				t.Fatalf("%s (%d threads) reports %+v (%v), the oracle %+v (%v)", e, n, *ie, ie, *first, first)
			}
		}
	}
	return first
}

func cloneInput(in *Input) *Input {
	c := *in
	c.Embeddings = append([][]float32(nil), in.Embeddings...)
	c.EmbeddingDims = append([]int(nil), in.EmbeddingDims...)
	c.FidListRowSplit = make([][]int64, len(in.FidListRowSplit))
	for i, s := range in.FidListRowSplit {
		c.FidListRowSplit[i] = append([]int64(nil), s...)
	}
	c.FidListEmbRowLength = append([]int32(nil), in.FidListEmbRowLength...)
	c.FidOffset = append([]uint64(nil), in.FidOffset...)
	c.FeatureOffset = append([]int32(nil), in.FeatureOffset...)
	c.NflOffset = append([]uint32(nil), in.NflOffset...)
	return &c
}

// TestBackwardOverlappingFeatures: v3/v4 backward on several threads splits the work by feature
// when features' embedding regions are disjoint (as sharding makes them); here every fid of every
// feature points at the same embedding row, so it must fall back to the split by parts, with the
// same bits as the oracle.
func TestBackwardOverlappingFeatures(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for _, v := range []int{3, 4} {
		c := randomCase(rng, randomSpec{version: v, tables: 2, psNum: 2, features: 8, batch: 200, exampleIn: true, unique: true})
		p := compile(t, c, 1)
		part := 0 // v4: one embedding; the first part with room for the widest feature
		for len(c.in.Embeddings) > 1 && len(c.in.Embeddings[part]) < slices.Max(p.maxEnd) {
			part++
		}
		for k := range c.in.FidOffset {
			c.in.FidOffset[k] = uint64(part) << 32
		}
		grads := make([][]float32, len(p.outputs))
		for k, o := range p.outputs {
			grads[k] = make([]float32, c.in.BatchSize*o.RowSize)
			for j := range grads[k] {
				grads[k][j] = float32(rng.NormFloat64())
			}
		}
		checkBackward(t, c, grads)
	}
}

// TestInvalidFidsLate: the native forward pass checks the fids of a block of rows as it reads
// them (validation leaves them out), on several threads. Faults in late rows and in several
// features still give the error the oracle reports: the first in feature, row, fid order.
func TestInvalidFidsLate(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for v := 1; v <= 4; v++ {
		base := randomCase(rng, randomSpec{version: v, tables: 2, psNum: 2, features: 6, batch: 300, exampleIn: true, unique: true})
		p := compile(t, base, 1)
		// The fid ranges of (feature, batch row) for features that slices read.
		rowFids := func(f, r int) (int, int) {
			row := int(base.in.NflOffset[f]&^SharedBit) + r
			end := len(base.in.FidOffset)
			if row+1 < len(base.in.FeatureOffset) {
				end = int(base.in.FeatureOffset[row+1])
			}
			return int(base.in.FeatureOffset[row]), end
		}
		var read []int
		for f, e := range p.maxEnd {
			if e > 0 {
				read = append(read, f)
			}
		}
		if len(read) < 2 {
			t.Fatalf("v%d: %d features read; pick another seed", v, len(read))
		}
		for _, tc := range []struct {
			name   string
			faults [][2]int // (index into read, batch row)
		}{
			{"last row", [][2]int{{len(read) - 1, 299}}},
			{"second thread's rows, two features", [][2]int{{len(read) - 1, 10}, {0, 250}}},
			{"both threads", [][2]int{{1, 280}, {1, 20}, {0, 299}}},
		} {
			t.Run(fmt.Sprintf("v%d/%s", v, tc.name), func(t *testing.T) {
				c := *base
				c.in = cloneInput(base.in)
				marked := 0
				for _, fr := range tc.faults {
					b, e := rowFids(read[fr[0]], fr[1])
					if b < e {
						c.in.FidOffset[e-1] |= 0xfffffff
						marked++
					}
				}
				if marked == 0 {
					t.Skip("the chosen rows have no fids")
				}
				if ie := sameError(t, &c, nil, nil); ie.Code != CodeFidOffset {
					t.Fatalf("got %v (code %d), want code %d", ie, ie.Code, CodeFidOffset)
				}
			})
		}
	}
}

// TestInvalidInputs: inputs that do not fit are errors naming the problem, the same from every
// engine, and nothing is read out of bounds (run under go test -asan, see native/README.md).
func TestInvalidInputs(t *testing.T) {
	base := map[int]*refCase{}
	rng := rand.New(rand.NewPCG(9, 9))
	for v := 1; v <= 4; v++ {
		// Examples: every feature has batch rows (no shared features), all present.
		base[v] = randomCase(rng, randomSpec{version: v, tables: 2, psNum: 2, features: 6, batch: 8, exampleIn: true, unique: true})
		p := compile(t, base[v], 1)
		if p.maxEnd[len(p.maxEnd)-1] == 0 || len(base[v].in.FidOffset) == 0 {
			t.Fatalf("v%d base case: the last feature is not read or there are no fids; pick another seed", v)
		}
	}
	firstFidOf := func(in *Input) int {
		for k := range in.FidOffset {
			return k
		}
		return -1
	}
	tests := []struct {
		name     string
		versions []int
		mutate   func(in *Input)
		want     Code
	}{
		{"v1 dims count", []int{1}, func(in *Input) { in.EmbeddingDims = in.EmbeddingDims[1:] }, CodeEmbeddingDims},
		{"v1 zero dim", []int{1}, func(in *Input) { in.EmbeddingDims[0] = 0 }, CodeEmbeddingShape},
		{"v1 ragged", []int{1}, func(in *Input) { in.Embeddings[0] = append(in.Embeddings[0], 1) }, CodeEmbeddingShape},
		{"v1 narrow rows", []int{1}, func(in *Input) {
			for i := range in.EmbeddingDims {
				in.EmbeddingDims[i] = 1
			}
		}, CodeFidWidth},
		{"v2 embedding count", []int{2}, func(in *Input) { in.Embeddings = in.Embeddings[1:] }, CodeEmbeddingCount},
		{"v2 row split count", []int{2}, func(in *Input) { in.FidListRowSplit = in.FidListRowSplit[1:] }, CodeRowSplitCount},
		{"v2 row split length", []int{2}, func(in *Input) { in.FidListRowSplit[1] = in.FidListRowSplit[1][1:] }, CodeRowSplitLength},
		{"v2 row split order", []int{2}, func(in *Input) { in.FidListRowSplit[0][1] = -1 }, CodeRowSplitOrder},
		{"v2 row split size", []int{2}, func(in *Input) {
			s := in.FidListRowSplit[0]
			s[len(s)-1] += 1000
		}, CodeRowSplitSize},
		{"v4 embedding count", []int{4}, func(in *Input) { in.Embeddings = append(in.Embeddings, nil) }, CodeEmbeddingCount},
		{"v4 length count", []int{4}, func(in *Input) { in.FidListEmbRowLength = in.FidListEmbRowLength[1:] }, CodeEmbRowLengthCount},
		{"v4 negative length", []int{4}, func(in *Input) {
			in.FidListEmbRowLength[0] -= 1 << 20
			in.FidListEmbRowLength[1] += 1 << 20
		}, CodeEmbRowLengthValue},
		{"v4 length sum", []int{4}, func(in *Input) { in.FidListEmbRowLength[0]++ }, CodeEmbRowLengthSum},
		{"negative batch", nil, func(in *Input) { in.BatchSize = -1 }, CodeBatchSize},
		{"short nfl_offset", nil, func(in *Input) { in.NflOffset = in.NflOffset[:1] }, CodeNflLength},
		{"nfl_offset decreasing", nil, func(in *Input) { in.NflOffset[0] = in.NflOffset[1] + 1 }, CodeNflOrder},
		{"batch larger than rows", nil, func(in *Input) { in.BatchSize = len(in.FeatureOffset) }, CodeFeatureRows},
		{"rows past feature_offset", nil, func(in *Input) {
			// The last feature (read by a slice in every base case) starts two rows before the end
			// and nfl_offset claims more rows after it.
			f := len(in.NflOffset) - 2
			in.NflOffset[f] = uint32(len(in.FeatureOffset) - 2)
			in.NflOffset[f+1] = uint32(len(in.FeatureOffset) + 100)
		}, CodeFeatureRange},
		{"fid range", nil, func(in *Input) { in.FeatureOffset[1] = int32(len(in.FidOffset) + 5) }, CodeFidRange},
		{"negative fid start", nil, func(in *Input) { in.FeatureOffset[0] = -3 }, CodeFidRange},
		{"fid part", nil, func(in *Input) { in.FidOffset[firstFidOf(in)] |= 0xffff << 32 }, CodeFidPart},
		{"fid position", nil, func(in *Input) { in.FidOffset[firstFidOf(in)] |= 0xfffffff }, CodeFidOffset},
		{"fid position sign bit", nil, func(in *Input) { in.FidOffset[firstFidOf(in)] |= 0x80000000 }, CodeFidOffset},
	}
	for _, tc := range tests {
		versions := tc.versions
		if versions == nil {
			versions = []int{1, 2, 3, 4}
		}
		for _, v := range versions {
			t.Run(fmt.Sprintf("%s/v%d", tc.name, v), func(t *testing.T) {
				c := *base[v]
				c.in = cloneInput(base[v].in)
				tc.mutate(c.in)
				ie := sameError(t, &c, nil, nil)
				if ie.Code != tc.want {
					t.Fatalf("got %v (code %d), want code %d", ie, ie.Code, tc.want)
				}
				p := compile(t, &c, 1)
				ie = sameError(t, &c, ones(p, max(c.in.BatchSize, 0)), nil)
				if ie.Code != tc.want {
					t.Fatalf("backward: got %v (code %d), want code %d", ie, ie.Code, tc.want)
				}
			})
		}
	}

	// Tensors of the wrong number or size.
	c := base[3]
	p := compile(t, c, 1)
	good := ones(p, c.in.BatchSize)
	short := append([][]float32(nil), good...)
	short[0] = short[0][1:]
	for _, tc := range []struct {
		name          string
		out, grads    [][]float32
		want          Code
		backwardInput bool
	}{
		{"output count", good[1:], nil, CodeOutputCount, false},
		{"output size", short, nil, CodeOutputSize, false},
		{"layout gradient count", nil, good[1:], CodeOutputCount, true},
		{"layout gradient size", nil, short, CodeOutputSize, true},
		{"embedding gradient count", c.in.Embeddings[1:], good, CodeGradCount, true},
		{"embedding gradient size", [][]float32{c.in.Embeddings[0][1:]}, good, CodeGradCount, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out [][]float32
			if tc.out != nil {
				out = make([][]float32, len(tc.out))
				for i := range tc.out {
					out[i] = make([]float32, len(tc.out[i]))
				}
			}
			ie := sameError(t, c, tc.grads, out)
			if ie.Code != tc.want {
				t.Fatalf("got %v (code %d), want code %d", ie, ie.Code, tc.want)
			}
		})
	}
	t.Run("batch too large", func(t *testing.T) {
		big := *c
		big.in = cloneInput(c.in)
		big.in.BatchSize = 1 << 50
		if ie := sameError(t, &big, nil, nil); ie.Code != CodeBatchTooLarge {
			t.Fatalf("got %v, want code %d", ie, CodeBatchTooLarge)
		}
	})
	t.Run("embedding gradient size", func(t *testing.T) {
		out := make([][]float32, len(c.in.Embeddings))
		for i := range out {
			out[i] = make([]float32, len(c.in.Embeddings[i]))
		}
		out[len(out)-1] = append(out[len(out)-1], 0)
		if ie := sameError(t, c, good, out); ie.Code != CodeGradSize {
			t.Fatalf("got %v, want code %d", ie, CodeGradSize)
		}
	})
}

// TestCorruptOffsets mutates offsets at random: every engine must agree, either on the same error
// or on the same outputs, and must never read out of bounds (go test -asan checks the reads).
func TestCorruptOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	rounds := 150
	if testing.Short() {
		rounds = 30
	}
	for v := 1; v <= 4; v++ {
		base := randomCase(rng, randomSpec{version: v, tables: 2, psNum: 2, features: 6, batch: 48, exampleIn: v%2 == 0, unique: true})
		accepted, rejected := 0, 0
		for range rounds {
			c := *base
			c.in = cloneInput(base.in)
			in := c.in
			for range randint(rng, 1, 3) {
				switch rng.IntN(4) {
				case 0:
					if len(in.FidOffset) > 0 {
						k := rng.IntN(len(in.FidOffset))
						part := int64(in.FidOffset[k]>>32) + int64(randint(rng, -1, 2))
						pos := int64(in.FidOffset[k]&0xffffffff) + int64(randint(rng, -3, 40))
						in.FidOffset[k] = uint64(part)<<32 | uint64(uint32(pos))
					}
				case 1:
					k := rng.IntN(len(in.FeatureOffset))
					in.FeatureOffset[k] += int32(randint(rng, -3, 3))
				case 2:
					k := rng.IntN(len(in.NflOffset))
					in.NflOffset[k] = uint32(int64(in.NflOffset[k]) + int64(randint(rng, -3, 3)))
					if rng.IntN(4) == 0 {
						in.NflOffset[k] ^= SharedBit
					}
				default:
					in.BatchSize += randint(rng, -2, 2)
				}
			}
			var results, gradResults [][][]float32
			var errs []*InputError
			for _, e := range engines() {
				for _, n := range []int{1, 3} {
					p := compile(t, &c, n)
					out, err := p.ForwardWith(e, in, nil)
					ie, _ := AsInputError(err)
					if err != nil && ie == nil {
						t.Fatalf("%s: %v", e, err)
					}
					results, errs = append(results, out), append(errs, ie)
					if err == nil && e != CUDA { // CUDA gradients round differently (atomics)
						g, err := p.BackwardWith(e, in, out, nil)
						if err != nil {
							t.Fatalf("%s backward of an accepted input: %v", e, err)
						}
						gradResults = append(gradResults, g)
					}
				}
			}
			for i := 1; i < len(errs); i++ {
				if (errs[i] == nil) != (errs[0] == nil) || errs[i] != nil && *errs[i] != *errs[0] {
					t.Fatalf("v%d: engines disagree: %v vs %v", v, errs[0], errs[i])
				}
				if errs[0] == nil {
					sameBits(t, "corrupt offsets accepted", results[0], results[i])
				}
			}
			for i := 1; i < len(gradResults); i++ {
				sameBits(t, "gradients of corrupt offsets accepted", gradResults[0], gradResults[i])
			}
			if errs[0] == nil {
				accepted++
			} else {
				rejected++
			}
		}
		if accepted == 0 || rejected == 0 {
			t.Errorf("v%d: %d corruptions accepted, %d rejected: the mutations should give both", v, accepted, rejected)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	feature := func(table string, pooling examplepb.PoolingType, maxSeq int32, dims ...int32) *examplepb.FeatureConfig {
		return &examplepb.FeatureConfig{Table: table, PoolingType: pooling, MaxSequenceLength: maxSeq, SliceDims: dims}
	}
	base := func() *examplepb.FeatureConfigs {
		return &examplepb.FeatureConfigs{
			FeatureConfigs: map[string]*examplepb.FeatureConfig{
				"a": feature("t", examplepb.PoolingType_SUM, 0, 1, 4),
				"b": feature("t", examplepb.PoolingType_FIRSTN, 2, 1, 4),
			},
			OutConfigs: map[string]*examplepb.OutConfig{},
		}
	}
	out := func(t examplepb.OutType, shapes [][]int32, slices ...*examplepb.SliceConfig) *examplepb.OutConfig {
		oc := &examplepb.OutConfig{OutType: t, SliceConfigs: slices}
		for _, s := range shapes {
			oc.Shape = append(oc.Shape, &examplepb.TensorShape{Dims: s})
		}
		return oc
	}
	sc := func(f string, s, e int32) *examplepb.SliceConfig {
		return &examplepb.SliceConfig{FeatureName: f, Start: s, End: e}
	}
	v2 := Options{Version: 2, PSNum: 2, VariantType: "example"}
	tests := []struct {
		name   string
		opts   Options
		layout *examplepb.OutConfig
		edit   func(*examplepb.FeatureConfigs)
		want   string
	}{
		{"version 5", Options{Version: 5, PSNum: 1, VariantType: "example"}, nil, nil, "version 5"},
		{"version 0", Options{Version: 0, VariantType: "example"}, nil, nil, "unknown version"},
		{"variant", Options{Version: 3, VariantType: "tfrecord"}, nil, nil, "variant_type"},
		{"ps_num", Options{Version: 4, VariantType: "example"}, nil, nil, "ps_num"},
		{"unknown feature", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 1}}, sc("zz", 0, 1)), nil, "unknown feature"},
		{"columns past dims", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 2}}, sc("a", 4, 6)), nil, "columns [4, 6)"},
		{"empty columns", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 0}}, sc("a", 2, 2)), nil, "columns [2, 2)"},
		{"none shape count", v2, out(examplepb.OutType_NONE, nil, sc("a", 0, 1)), nil, "0 shapes for 1 slices"},
		{"none shape dims", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 2}}, sc("a", 0, 1)), nil, "want [-1 [1]]"},
		{"firstn shape", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 5}}, sc("b", 0, 5)), nil, "want [-1 [2 5]]"},
		{"batch dim", v2, out(examplepb.OutType_NONE, [][]int32{{0, 1}}, sc("a", 0, 1)), nil, "first dimension is the batch"},
		{"concat sum", v2, out(examplepb.OutType_CONCAT, [][]int32{{-1, 3}}, sc("a", 0, 1), sc("a", 1, 3), sc("a", 0, 1)), nil, "want [-1 [4]]"},
		{"concat mixed", v2, out(examplepb.OutType_CONCAT, [][]int32{{-1, 2}}, sc("a", 0, 1), sc("b", 0, 1)), nil, "cannot be mixed"},
		{"stack widths", v2, out(examplepb.OutType_STACK, [][]int32{{-1, 2, 1}}, sc("a", 0, 1), sc("a", 0, 2)), nil, "2 columns"},
		{"addn firstn", v2, out(examplepb.OutType_ADDN, [][]int32{{-1, 1}}, sc("b", 0, 1)), nil, "cannot be added"},
		{"two shapes", v2, out(examplepb.OutType_ADDN, [][]int32{{-1, 1}, {-1, 1}}, sc("a", 0, 1)), nil, "2 shapes, want 1"},
		{"no slices", v2, out(examplepb.OutType_CONCAT, [][]int32{{-1, 1}}), nil, "no slices"},
		{"unknown out type", v2, out(examplepb.OutType(9), [][]int32{{-1, 1}}, sc("a", 0, 1)), nil, "unknown out type"},
		{"bad slice dims", v2, nil, func(c *examplepb.FeatureConfigs) { c.FeatureConfigs["a"].SliceDims = []int32{2, 0} }, "slice_dims[1] = 0"},
		{"firstn length", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 0, 1}}, sc("b", 0, 1)),
			func(c *examplepb.FeatureConfigs) { c.FeatureConfigs["b"].MaxSequenceLength = 0 }, "max_sequence_length > 0"},
		{"pooling", v2, out(examplepb.OutType_NONE, [][]int32{{-1, 1}}, sc("a", 0, 1)),
			func(c *examplepb.FeatureConfigs) { c.FeatureConfigs["a"].PoolingType = 2 }, "unknown pooling type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfgs := base()
			if tc.layout != nil {
				cfgs.OutConfigs["x"] = tc.layout
			}
			if tc.edit != nil {
				tc.edit(cfgs)
			}
			_, err := Compile(cfgs, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile: %v, want an error containing %q", err, tc.want)
			}
			if errkind.Of(err) != errkind.Value {
				t.Fatalf("kind %v, want Value", errkind.Of(err))
			}
		})
	}
}

func TestInferShape(t *testing.T) {
	slices := func(widths ...int32) *examplepb.OutConfig {
		oc := &examplepb.OutConfig{}
		for i, w := range widths {
			addSlice(oc, fmt.Sprint("f", i), 1, 1+w)
		}
		return oc
	}
	tests := []struct {
		name    string
		oc      *examplepb.OutConfig
		outType examplepb.OutType
		seq     int
		want    string
		kind    errkind.Kind
	}{
		{"none", slices(1, 4), examplepb.OutType_NONE, 0, "[[-1 1] [-1 4]]", 0},
		{"none seq", slices(1, 4), examplepb.OutType_NONE, 3, "[[-1 3 1] [-1 3 4]]", 0},
		{"concat", slices(1, 4, 8), examplepb.OutType_CONCAT, 0, "[[-1 13]]", 0},
		{"concat seq", slices(1, 4), examplepb.OutType_CONCAT, 2, "[[-1 2 5]]", 0},
		{"stack", slices(8, 8, 8), examplepb.OutType_STACK, 0, "[[-1 3 8]]", 0},
		{"stack seq", slices(8, 8), examplepb.OutType_STACK, 3, "[[-1 2 3 8]]", 0},
		{"addn", slices(1, 1), examplepb.OutType_ADDN, 0, "[[-1 1]]", 0},
		{"stack widths", slices(8, 4), examplepb.OutType_STACK, 0, "", errkind.Precondition},
		{"addn widths", slices(1, 2), examplepb.OutType_ADDN, 0, "", errkind.Precondition},
		{"bad type", slices(1), examplepb.OutType(7), 0, "", errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := InferShape(tc.oc, tc.outType, tc.seq)
			if tc.kind != 0 {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("err %v, want kind %v", err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int32
			for _, s := range tc.oc.Shape {
				got = append(got, s.Dims)
			}
			if fmt.Sprint(got) != tc.want || tc.oc.OutType != tc.outType {
				t.Fatalf("shapes %v, out type %v; want %s, %v", got, tc.oc.OutType, tc.want, tc.outType)
			}
		})
	}
}

// TestOutputs checks the output order (layouts sorted, then their shapes) and a fixed batch
// dimension.
func TestOutputs(t *testing.T) {
	c := fitPreCase(20, true)
	p := compile(t, c, 1)
	var names []string
	for _, o := range p.Outputs() {
		names = append(names, fmt.Sprintf("%s:%d", o.Layout, o.Index))
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "bias:0 ffm1:0 ffm2:0 ffm2:1 ") || !strings.HasSuffix(got, "seq_stack:0 vec:0") {
		t.Fatalf("outputs %s", got)
	}
	c.cfgs.OutConfigs["bias"].Shape[0].Dims[0] = int32(c.in.BatchSize)
	if _, err := compile(t, c, 1).ForwardWith(Oracle, c.in, nil); err != nil {
		t.Fatalf("fixed batch dimension equal to the batch size: %v", err)
	}
	c.cfgs.OutConfigs["bias"].Shape[0].Dims[0] = int32(c.in.BatchSize + 1)
	ie := sameError(t, c, nil, nil)
	if ie.Code != CodeOutputBatch {
		t.Fatalf("got %v, want code %d", ie, CodeOutputBatch)
	}
}

// TestConcurrentUse: plans used by several goroutines at once (each call pins its own inputs),
// forward and backward, asking the native kernel for 1 to 4 threads: one call at a time uses the
// process's team of C++ threads, the others start their own.
func TestConcurrentUse(t *testing.T) {
	c := randomCase(rand.New(rand.NewPCG(30, 30)), randomSpec{version: 3, tables: 2, psNum: 2, features: 6, batch: 200, unique: true})
	oracle := compile(t, c, 1)
	want, err := oracle.ForwardWith(Oracle, c.in, nil)
	if err != nil {
		t.Fatal(err)
	}
	grads := ones(oracle, c.in.BatchSize)
	wantGrads, err := oracle.BackwardWith(Oracle, c.in, grads, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine := engines()[len(engines())-1]
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for g := range 8 {
		p := compile(t, c, 1+g%4)
		wg.Go(func() {
			for range 5 {
				got, err := p.ForwardWith(engine, c.in, nil)
				if err == nil {
					err = firstDifference("forward", want, got)
				}
				if err == nil {
					got, err = p.BackwardWith(engine, c.in, grads, nil)
				}
				if err == nil {
					err = firstDifference("backward", wantGrads, got)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d (%d threads): %w", g, 1+g%4, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEmpty: no features and no layouts is a valid op with no outputs, on every engine.
func TestEmpty(t *testing.T) {
	for v := 1; v <= 4; v++ {
		p, err := Compile(&examplepb.FeatureConfigs{}, Options{Version: v, PSNum: 2, VariantType: "example"})
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		in := &Input{BatchSize: 3, Embeddings: [][]float32{{1, 2}}, EmbeddingDims: []int{2}}
		switch v {
		case 2: // tables * ps_num = 0 embeddings
			in.Embeddings, in.EmbeddingDims = nil, nil
		case 4: // one (empty) embedding tensor, no parts
			in.Embeddings, in.EmbeddingDims = [][]float32{{}}, nil
		}
		for _, e := range engines() {
			out, err := p.ForwardWith(e, in, nil)
			if err != nil || len(out) != 0 {
				t.Fatalf("v%d %s forward: %v, %d outputs", v, e, err, len(out))
			}
			g, err := p.BackwardWith(e, in, nil, nil)
			if err != nil || len(g) != len(in.Embeddings) {
				t.Fatalf("v%d %s backward: %v, %d gradients", v, e, err, len(g))
			}
			for _, x := range g {
				for _, f := range x {
					if f != 0 {
						t.Fatalf("v%d %s backward: gradient %v, want zeros", v, e, x)
					}
				}
			}
		}
	}
}

func TestEngines(t *testing.T) {
	c := fitPreCase(21, false)
	p := compile(t, c, 1)
	_, err := p.ForwardWith(CUDA, c.in, nil)
	if CUDAAvailable {
		if err != nil {
			t.Fatalf("CUDA forward: %v", err)
		}
	} else if errkind.Of(err) != errkind.Runtime || !strings.Contains(err.Error(), "without the CUDA kernel") {
		t.Fatalf("CUDA engine without CUDA: %v", err)
	}
	if _, err := p.ForwardWith(Engine(42), c.in, nil); errkind.Of(err) != errkind.Value {
		t.Fatalf("unknown engine: %v", err)
	}
	if _, err := p.ForwardWith(Oracle, nil, nil); errkind.Of(err) != errkind.Value {
		t.Fatalf("nil input: %v", err)
	}
}
