package layout

// A test-only port of the reference's sharding_sparse_fids op (ShardingSparseFidsOp V2-V4 in
// monolith/native_training/data/kernels/parse_sparse_feature.{h,cc}) for fid_v2 lists: it turns
// Examples or an ExampleBatch into the fid lists and offsets the layout op reads, exactly as the
// reference's tests produce them with parse_examples / parse_example_batch + sharding_sparse_fids.

import (
	"sort"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
)

type sharded struct {
	version int
	psNum   int
	// Per (table, ps) part, table-major: the fids whose embeddings the parameter servers return,
	// grouped by feature (table order), and the prefix fid counts of those features.
	fidList   [][]uint64
	rowSplits [][]int64
	// embRowLength (v4): floats of each (ps, table) part, ps-major.
	embRowLength  []int32
	fidOffset     []uint64
	featureOffset []int32
	nflOffset     []uint32
	batch         int
}

type shardFeature struct {
	name     string
	table    int
	fit      int // index within its table
	dimsSum  int
	outPre   int
	tableCnt int
}

func (sf *shardFeature) outIndex(version, ps int) int {
	if version == 2 {
		return sf.outPre + ps*sf.tableCnt + sf.fit
	}
	return sf.outPre + ps
}

type shardTask struct {
	present bool
	shards  [][]uint64       // non-unique: every fid, per ps
	uniq    []map[uint64]int // unique: fid -> position, per ps
	order   [][]uint64       // unique: insertion order, per ps
	items   []*examplepb.NamedFeature
	samples []int // feature_offset position of each item (Example input)
}

func (t *shardTask) count(ps int, unique bool) int {
	if unique {
		return len(t.order[ps])
	}
	return len(t.shards[ps])
}

func (t *shardTask) list(ps int, unique bool) []uint64 {
	if unique {
		return t.order[ps]
	}
	return t.shards[ps]
}

func fidsOf(f *examplepb.Feature) []uint64 {
	if l := f.GetFidV2List(); l != nil {
		return l.GetValue()
	}
	return nil
}

// shardSparseFids is the reference op for version 2, 3 or 4 on either an ExampleBatch (eb) or
// Examples (exs).
func shardSparseFids(cfgs *examplepb.FeatureConfigs, psNum, version int, unique bool,
	eb *examplepb.ExampleBatch, exs []*examplepb.Example) *sharded {
	var names []string
	for n := range cfgs.GetFeatureConfigs() {
		names = append(names, n)
	}
	sort.Strings(names)
	tableIdx := map[string]int{}
	var tableNames []string
	for _, n := range names {
		t := cfgs.GetFeatureConfigs()[n].GetTable()
		if _, ok := tableIdx[t]; !ok {
			tableIdx[t] = 0
			tableNames = append(tableNames, t)
		}
	}
	sort.Strings(tableNames)
	for i, t := range tableNames {
		tableIdx[t] = i
	}
	T, F := len(tableNames), len(names)
	feats := make([]shardFeature, F)
	tableFeats := make([][]int, T)
	featIdx := map[string]int{}
	for i, n := range names {
		fc := cfgs.GetFeatureConfigs()[n]
		sum := 0
		for _, d := range fc.GetSliceDims() {
			sum += int(d)
		}
		t := tableIdx[fc.GetTable()]
		feats[i] = shardFeature{name: n, table: t, fit: len(tableFeats[t]), dimsSum: sum}
		tableFeats[t] = append(tableFeats[t], i)
		featIdx[n] = i
	}
	pre := 0
	for t := range tableNames {
		for _, f := range tableFeats[t] {
			feats[f].tableCnt = len(tableFeats[t])
			if version == 2 {
				feats[f].outPre = pre
			} else {
				feats[f].outPre = t * psNum
			}
		}
		pre += max(len(tableFeats[t]), 1) * psNum
	}

	tasks := make([]shardTask, F)
	for i := range tasks {
		tasks[i].shards = make([][]uint64, psNum)
		tasks[i].uniq = make([]map[uint64]int, psNum)
		tasks[i].order = make([][]uint64, psNum)
		for p := range psNum {
			tasks[i].uniq[p] = map[uint64]int{}
		}
	}
	counters := make([][]int, F)
	shared := make([]bool, F)
	listOf := make([]int, F) // ExampleBatch: named_feature_list index of each feature
	var batch int
	if eb != nil {
		batch = int(eb.GetBatchSize())
		for i := range listOf {
			listOf[i] = -1
		}
		for n, nfl := range eb.GetNamedFeatureList() {
			if f, ok := featIdx[nfl.GetName()]; ok {
				listOf[f] = n
			}
		}
		for f := range F {
			if listOf[f] < 0 {
				counters[f] = []int{0}
				shared[f] = true
				continue
			}
			tasks[f].present = true
			nfl := eb.GetNamedFeatureList()[listOf[f]]
			if nfl.GetType() == examplepb.FeatureListType_SHARED {
				counters[f] = []int{len(fidsOf(nfl.GetFeature()[0]))}
				shared[f] = true
			} else {
				for _, ft := range nfl.GetFeature() {
					counters[f] = append(counters[f], len(fidsOf(ft)))
				}
			}
		}
	} else {
		batch = len(exs)
		for f := range F {
			counters[f] = make([]int, batch)
			tasks[f].present = true
		}
		for ex, e := range exs {
			for _, nf := range e.GetNamedFeature() {
				n := len(fidsOf(nf.GetFeature()))
				if n == 0 {
					continue
				}
				f, ok := featIdx[nf.GetName()]
				if !ok {
					continue
				}
				counters[f][ex] = n
				tasks[f].items = append(tasks[f].items, nf)
				tasks[f].samples = append(tasks[f].samples, f*batch+ex)
			}
		}
	}

	// CreateOffsetTensor.
	out := &sharded{version: version, psNum: psNum, batch: batch}
	out.nflOffset = make([]uint32, F+1)
	nflFidOffset := make([]int, F)
	rows, fidSize := 0, 0
	for f := range F {
		out.nflOffset[f] = uint32(rows)
		if shared[f] {
			out.nflOffset[f] |= SharedBit
		}
		nflFidOffset[f] = fidSize
		for _, c := range counters[f] {
			out.featureOffset = append(out.featureOffset, int32(fidSize))
			fidSize += c
			rows++
		}
	}
	out.featureOffset = append(out.featureOffset, int32(fidSize))
	out.nflOffset[F] = uint32(rows + 1) // as the reference writes it
	out.fidOffset = make([]uint64, fidSize)

	fill := func(value uint64, f int, offset *int) {
		t := &tasks[f]
		mod := int(value % uint64(psNum))
		var pos int
		if unique {
			p, ok := t.uniq[mod][value]
			if !ok {
				p = len(t.order[mod])
				t.uniq[mod][value] = p
				t.order[mod] = append(t.order[mod], value)
			}
			pos = p
		} else {
			pos = len(t.shards[mod])
			t.shards[mod] = append(t.shards[mod], value)
		}
		if version >= 3 {
			pos *= feats[f].dimsSum
		}
		out.fidOffset[*offset] = uint64(feats[f].outIndex(version, mod))<<32 | uint64(pos)
		*offset++
	}
	for f := range F {
		if !tasks[f].present {
			continue
		}
		if eb != nil {
			offset := nflFidOffset[f]
			nfl := eb.GetNamedFeatureList()[listOf[f]]
			features := nfl.GetFeature()
			if nfl.GetType() == examplepb.FeatureListType_SHARED {
				features = features[:1]
			}
			for _, ft := range features {
				for _, v := range fidsOf(ft) {
					fill(v, f, &offset)
				}
			}
		} else {
			for i, nf := range tasks[f].items {
				offset := int(out.featureOffset[tasks[f].samples[i]])
				for _, v := range fidsOf(nf.GetFeature()) {
					fill(v, f, &offset)
				}
			}
		}
	}

	// Fid lists, row splits, and (v3, v4) the float offsets of every feature in its part.
	out.fidList = make([][]uint64, T*psNum)
	out.rowSplits = make([][]int64, T*psNum)
	if version == 4 {
		out.embRowLength = make([]int32, T*psNum)
	}
	tableOffset := make([][]int, F)
	for f := range tableOffset {
		tableOffset[f] = make([]int, psNum)
	}
	for t := range T {
		for p := range psNum {
			split := make([]int64, len(tableFeats[t])+1)
			preOff, size := 0, 0
			for _, f := range tableFeats[t] {
				if !tasks[f].present {
					continue
				}
				tableOffset[f][p] = preOff
				cur := tasks[f].count(p, unique)
				size += cur
				if version >= 3 {
					emb := cur * feats[f].dimsSum
					if version == 4 {
						out.embRowLength[p*T+t] += int32(emb)
					}
					preOff += emb
				} else {
					preOff = size
				}
				split[feats[f].fit+1] = int64(cur)
				out.fidList[t*psNum+p] = append(out.fidList[t*psNum+p], tasks[f].list(p, unique)...)
			}
			for z := 2; z < len(split); z++ {
				split[z] += split[z-1]
			}
			out.rowSplits[t*psNum+p] = split
		}
	}
	if version != 2 {
		for f := range F {
			if !tasks[f].present {
				continue
			}
			end := fidSize
			if f+1 < F {
				end = nflFidOffset[f+1]
			}
			for k := nflFidOffset[f]; k < end; k++ {
				cur := out.fidOffset[k]
				ps := int(cur>>32) - feats[f].outPre
				out.fidOffset[k] = cur + uint64(tableOffset[f][ps])
			}
		}
	}
	return out
}

// embeddings builds the op's embedding inputs for a sharded batch: every fid's embedding row (its
// feature's dims) holds value(fid, column).
func (s *sharded) embeddings(plan *Plan, value func(fid uint64, col int) float32) *Input {
	T := len(plan.tables)
	parts := make([][]float32, T*s.psNum)
	for t, tab := range plan.tables {
		for p := range s.psNum {
			i := t*s.psNum + p
			split, list := s.rowSplits[i], s.fidList[i]
			var emb []float32
			for j, f := range tab.features {
				for _, fid := range list[split[j]:split[j+1]] {
					for c := range plan.features[f].dimsSum {
						emb = append(emb, value(fid, c))
					}
				}
			}
			parts[i] = emb
		}
	}
	in := &Input{FidOffset: s.fidOffset, FeatureOffset: s.featureOffset, NflOffset: s.nflOffset, BatchSize: s.batch}
	switch s.version {
	case 2:
		in.Embeddings, in.FidListRowSplit = parts, s.rowSplits
	case 3:
		in.Embeddings = parts
	case 4:
		var all []float32
		for p := range s.psNum {
			for t := range T {
				all = append(all, parts[t*s.psNum+p]...)
			}
		}
		in.Embeddings, in.FidListEmbRowLength = [][]float32{all}, s.embRowLength
	}
	return in
}
