package layout

// Random configurations and inputs beyond the reference's fixed ones: every version, pooling type
// and out type (FIRSTN in CONCAT and STACK layouts too), Examples and ExampleBatches with shared
// and missing features, rows without fids, repeated fids.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
)

// hashValue is a deterministic embedding value for (fid, column) in [-1, 1), exact in float32.
func hashValue(fid uint64, col int) float64 {
	x := fid*0x9E3779B97F4A7C15 + uint64(col)*0xBF58476D1CE4E5B9
	x ^= x >> 31
	x *= 0x94D049BB133111EB
	x ^= x >> 29
	return float64(int32(x>>32)) / (1 << 31)
}

type randomSpec struct {
	version   int
	tables    int
	psNum     int
	features  int
	batch     int
	exampleIn bool // Examples (else an ExampleBatch with shared and missing features)
	unique    bool
	wide      bool // slices up to 72 floats wide and ADDN/STACK widths up to 20: the kernel's vector paths
}

// randomCase draws a configuration and a batch for spec.
func randomCase(rng *rand.Rand, spec randomSpec) *refCase {
	cfgs := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	tableDims := make([][]int32, spec.tables) // v1: one row width per table
	for t := range tableDims {
		tableDims[t] = randomSliceDims(rng, spec.wide)
	}
	seqLen := randint(rng, 1, 4) // one FIRSTN length, so FIRSTN slices can share CONCAT/STACK layouts
	type feat struct {
		name    string
		dims    int
		pooling examplepb.PoolingType
	}
	var feats []feat
	for i := range spec.features {
		name := fmt.Sprintf("f%02d", i)
		t := rng.IntN(spec.tables)
		dims := tableDims[t]
		if spec.version != 1 {
			dims = randomSliceDims(rng, spec.wide)
		}
		fc := &examplepb.FeatureConfig{Table: fmt.Sprintf("t%d", t), SliceDims: dims}
		switch rng.IntN(3) {
		case 0:
			fc.PoolingType = examplepb.PoolingType_SUM
		case 1:
			fc.PoolingType = examplepb.PoolingType_MEAN
		default:
			fc.PoolingType, fc.MaxSequenceLength = examplepb.PoolingType_FIRSTN, int32(seqLen)
		}
		cfgs.FeatureConfigs[name] = fc
		sum := 0
		for _, d := range dims {
			sum += int(d)
		}
		feats = append(feats, feat{name, sum, fc.PoolingType})
	}
	randomColumns := func(dims int) (int32, int32) {
		start := rng.IntN(dims)
		return int32(start), int32(start + 1 + rng.IntN(dims-start))
	}
	maxWidth := 3
	if spec.wide {
		maxWidth = 20
	}
	// Layouts: NONE (any slices), CONCAT of pooled or of FIRSTN slices, STACK and ADDN of equal
	// widths.
	for l := range 6 {
		oc := &examplepb.OutConfig{}
		name := fmt.Sprintf("layout_%d", l)
		seqOnly := l%2 == 1
		switch l / 2 {
		case 0: // NONE, then CONCAT
			outType := examplepb.OutType_NONE
			if seqOnly {
				outType = examplepb.OutType_CONCAT
			}
			for range randint(rng, 1, 6) {
				f := feats[rng.IntN(len(feats))]
				if outType == examplepb.OutType_CONCAT && f.pooling == examplepb.PoolingType_FIRSTN {
					continue
				}
				s, e := randomColumns(f.dims)
				addSlice(oc, f.name, s, e)
			}
			if len(oc.SliceConfigs) == 0 {
				continue
			}
			if outType == examplepb.OutType_NONE {
				// NONE shapes differ per slice: write them by hand.
				oc.OutType = outType
				for _, sc := range oc.SliceConfigs {
					d := sc.End - sc.Start
					if cfgs.FeatureConfigs[sc.FeatureName].PoolingType == examplepb.PoolingType_FIRSTN {
						oc.Shape = append(oc.Shape, &examplepb.TensorShape{Dims: []int32{-1, int32(seqLen), d}})
					} else {
						oc.Shape = append(oc.Shape, &examplepb.TensorShape{Dims: []int32{-1, d}})
					}
				}
			} else {
				mustInferShape(oc, outType, 0)
			}
		case 1: // CONCAT of FIRSTN, STACK of FIRSTN
			outType := examplepb.OutType_CONCAT
			if seqOnly {
				outType = examplepb.OutType_STACK
			}
			width := randint(rng, 1, maxWidth)
			for range randint(rng, 1, 5) {
				f := feats[rng.IntN(len(feats))]
				if f.pooling != examplepb.PoolingType_FIRSTN {
					continue
				}
				s, e := randomColumns(f.dims)
				if outType == examplepb.OutType_STACK {
					if f.dims < width {
						continue
					}
					s = int32(rng.IntN(f.dims - width + 1))
					e = s + int32(width)
				}
				addSlice(oc, f.name, s, e)
			}
			if len(oc.SliceConfigs) == 0 {
				continue
			}
			mustInferShape(oc, outType, seqLen)
		default: // STACK, ADDN of pooled slices
			outType := examplepb.OutType_STACK
			if seqOnly {
				outType = examplepb.OutType_ADDN
			}
			width := randint(rng, 1, maxWidth)
			for range randint(rng, 1, 6) {
				f := feats[rng.IntN(len(feats))]
				if f.pooling == examplepb.PoolingType_FIRSTN || f.dims < width {
					continue
				}
				s := int32(rng.IntN(f.dims - width + 1))
				addSlice(oc, f.name, s, s+int32(width))
			}
			if len(oc.SliceConfigs) == 0 {
				continue
			}
			mustInferShape(oc, outType, 0)
		}
		cfgs.OutConfigs[name] = oc
	}

	// The batch: fids drawn from a small pool per feature, so they repeat.
	names := make([]string, len(feats))
	for i, f := range feats {
		names[i] = f.name
	}
	sort.Strings(names)
	rows := map[string][][]uint64{}
	drawRow := func(f int) []uint64 {
		var row []uint64
		for range rng.IntN(5) { // 0-4 fids
			row = append(row, uint64(f+1)<<48|uint64(rng.IntN(12)))
		}
		return row
	}
	var eb *examplepb.ExampleBatch
	var exs []*examplepb.Example
	if spec.exampleIn {
		exs = make([]*examplepb.Example, spec.batch)
		for i := range exs {
			exs[i] = &examplepb.Example{}
		}
		for f, name := range names {
			for b := range spec.batch {
				row := drawRow(f)
				rows[name] = append(rows[name], row)
				if len(row) > 0 || rng.IntN(2) == 0 {
					exs[b].NamedFeature = append(exs[b].NamedFeature, &examplepb.NamedFeature{Name: name, Feature: fidV2(row)})
				}
			}
		}
	} else {
		eb = &examplepb.ExampleBatch{BatchSize: int32(spec.batch)}
		for f, name := range names {
			switch rng.IntN(5) {
			case 0: // missing from the batch
				rows[name] = [][]uint64{nil}
			case 1, 2: // shared
				row := drawRow(f)
				rows[name] = [][]uint64{row}
				eb.NamedFeatureList = append(eb.NamedFeatureList, &examplepb.NamedFeatureList{Name: name,
					Type: examplepb.FeatureListType_SHARED, Feature: []*examplepb.Feature{fidV2(row)}})
			default:
				nfl := &examplepb.NamedFeatureList{Name: name, Type: examplepb.FeatureListType_INDIVIDUAL}
				for range spec.batch {
					row := drawRow(f)
					rows[name] = append(rows[name], row)
					nfl.Feature = append(nfl.Feature, fidV2(row))
				}
				eb.NamedFeatureList = append(eb.NamedFeatureList, nfl)
			}
		}
		rng.Shuffle(len(eb.NamedFeatureList), func(i, j int) {
			eb.NamedFeatureList[i], eb.NamedFeatureList[j] = eb.NamedFeatureList[j], eb.NamedFeatureList[i]
		})
	}
	variant := "example_batch"
	if spec.exampleIn {
		variant = "example"
	}
	c := &refCase{cfgs: cfgs, rows: rows, value: hashValue,
		opts: Options{Version: spec.version, PSNum: spec.psNum, VariantType: variant, ParallelFlag: 1}}
	plan, err := Compile(cfgs, c.opts)
	if err != nil {
		panic(err)
	}
	value32 := func(fid uint64, col int) float32 { return float32(hashValue(fid, col)) }
	if spec.version >= 2 {
		c.in = shardSparseFids(cfgs, spec.psNum, spec.version, spec.unique, eb, exs).embeddings(plan, value32)
		return c
	}
	// Version 1: the offsets by hand (one [rows, dim] part per (table, ps), one row per distinct fid).
	s := shardSparseFids(cfgs, spec.psNum, 3, true, eb, exs)
	parts := make([][]uint64, spec.tables*spec.psNum)
	at := map[uint64]int{}
	in := &Input{FeatureOffset: s.featureOffset, NflOffset: s.nflOffset, BatchSize: s.batch}
	for f, name := range names {
		t := plan.features[f].table
		for _, row := range rows[name] {
			for _, fid := range row {
				part := t*spec.psNum + int(fid%uint64(spec.psNum))
				pos, ok := at[fid]
				if !ok {
					pos = len(parts[part])
					at[fid] = pos
					parts[part] = append(parts[part], fid)
				}
				in.FidOffset = append(in.FidOffset, uint64(part)<<32|uint64(pos))
			}
		}
	}
	if len(in.FidOffset) != len(s.fidOffset) {
		panic(fmt.Sprintf("v1 offsets: %d fids, sharding gives %d", len(in.FidOffset), len(s.fidOffset)))
	}
	for i, list := range parts {
		dim := 0
		for _, d := range tableDims[i/spec.psNum] {
			dim += int(d)
		}
		var emb []float32
		for _, fid := range list {
			for c := range dim {
				emb = append(emb, value32(fid, c))
			}
		}
		in.Embeddings = append(in.Embeddings, emb)
		in.EmbeddingDims = append(in.EmbeddingDims, dim)
	}
	c.in = in
	return c
}

func randomSliceDims(rng *rand.Rand, wide bool) []int32 {
	dims := make([]int32, randint(rng, 1, 3))
	maxDim := 6
	if wide {
		maxDim = 24
	}
	for i := range dims {
		dims[i] = int32(randint(rng, 1, maxDim))
	}
	return dims
}

// dot is the float64 inner product of two tensor lists.
func dot(a [][]float32, b [][]float32) (sum, abs float64) {
	for i := range a {
		for j := range a[i] {
			x := float64(a[i][j]) * float64(b[i][j])
			sum += x
			abs += math.Abs(x)
		}
	}
	return sum, abs
}
