package layout

// Ports of the reference test's fixtures (fused_embedding_to_layout_test.py): the feature configs,
// the random fids, the hand-built offsets (or sharding_sparse_fids), and the expected outputs and
// gradients computed from the fids directly, the way the reference computes them with numpy.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
)

// randint is Python's random.randint: a uniform integer in [a, b].
func randint(rng *rand.Rand, a, b int) int { return a + rng.IntN(b-a+1) }

// featureCfg is the reference test's get_feature_cfg entry.
type featureCfg struct {
	tableIndex          int
	featureInTableIndex int
	tableFeatureCount   int
	preOutputIndex      int
	dimSum              int
}

// getFeatureCfg is FusedEmbeddingToLayoutTest.get_feature_cfg: indices by sorted table and
// feature names, and the v2 output index of every feature.
func getFeatureCfg(cfgs *examplepb.FeatureConfigs, psNum int) (map[string]*featureCfg, []string, []string) {
	var names []string
	tables := map[string][]string{}
	for n, fc := range cfgs.GetFeatureConfigs() {
		names = append(names, n)
		tables[fc.GetTable()] = nil
	}
	sort.Strings(names)
	var tableNames []string
	for t := range tables {
		tableNames = append(tableNames, t)
	}
	sort.Strings(tableNames)
	out := map[string]*featureCfg{}
	for _, n := range names {
		fc := cfgs.GetFeatureConfigs()[n]
		sum := 0
		for _, d := range fc.GetSliceDims() {
			sum += int(d)
		}
		ti := sort.SearchStrings(tableNames, fc.GetTable())
		out[n] = &featureCfg{tableIndex: ti, featureInTableIndex: len(tables[fc.GetTable()]), dimSum: sum}
		tables[fc.GetTable()] = append(tables[fc.GetTable()], n)
	}
	pre := 0
	for _, t := range tableNames {
		for _, n := range tables[t] {
			out[n].preOutputIndex = pre
			out[n].tableFeatureCount = len(tables[t])
		}
		pre += max(len(tables[t]), 1) * psNum
	}
	return out, names, tableNames
}

// getPreOutputOffset is FusedEmbeddingToLayoutTest.get_pre_output_offset.
func (c *featureCfg) getPreOutputOffset(shard int) int {
	return c.preOutputIndex + shard*c.tableFeatureCount + c.featureInTableIndex
}

func addSlice(oc *examplepb.OutConfig, feature string, start, end int32) {
	oc.SliceConfigs = append(oc.SliceConfigs, &examplepb.SliceConfig{FeatureName: feature, Start: start, End: end})
}

// pooledLayouts are the layouts of the reference tests' pooled slots: bias (ADDN of column 0), vec
// (CONCAT of columns 1-5), ffm1 (STACK of table_one's columns 5-13) and ffm2 (NONE of table_two's
// columns 5-21).
type pooledLayouts struct{ bias, vec, ffm1, ffm2 *examplepb.OutConfig }

func newPooledLayouts() pooledLayouts {
	return pooledLayouts{&examplepb.OutConfig{}, &examplepb.OutConfig{}, &examplepb.OutConfig{}, &examplepb.OutConfig{}}
}

// slot configures one pooled slot, table_one SUM into ffm1 or (mean) table_two MEAN into ffm2,
// and both into bias and vec.
func (l pooledLayouts) slot(name string, mean bool) *examplepb.FeatureConfig {
	fc := &examplepb.FeatureConfig{}
	if mean {
		fc.Table, fc.SliceDims, fc.PoolingType = "table_two", []int32{1, 4, 16}, examplepb.PoolingType_MEAN
		addSlice(l.ffm2, name, 5, 21)
	} else {
		fc.Table, fc.SliceDims, fc.PoolingType = "table_one", []int32{1, 4, 8}, examplepb.PoolingType_SUM
		addSlice(l.ffm1, name, 5, 13)
	}
	addSlice(l.bias, name, 0, 1)
	addSlice(l.vec, name, 1, 5)
	return fc
}

// addTo adds the four layouts, shapes inferred, to cfgs.
func (l pooledLayouts) addTo(cfgs *examplepb.FeatureConfigs) {
	cfgs.OutConfigs["bias"] = mustInferShape(l.bias, examplepb.OutType_ADDN, 0)
	cfgs.OutConfigs["vec"] = mustInferShape(l.vec, examplepb.OutType_CONCAT, 0)
	cfgs.OutConfigs["ffm1"] = mustInferShape(l.ffm1, examplepb.OutType_STACK, 0)
	cfgs.OutConfigs["ffm2"] = mustInferShape(l.ffm2, examplepb.OutType_NONE, 0)
}

func mustInferShape(oc *examplepb.OutConfig, t examplepb.OutType, maxSeq int) *examplepb.OutConfig {
	if err := InferShape(oc, t, maxSeq); err != nil {
		panic(err)
	}
	return oc
}

func fidV2(fids []uint64) *examplepb.Feature {
	return &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: fids}}}
}

// refCase is one ported reference test run: the op's inputs and what it must produce.
type refCase struct {
	cfgs *examplepb.FeatureConfigs
	opts Options
	in   *Input
	// rows[feature] are the fids of each example (one row for a shared feature), value the
	// embedding of a fid: the inputs of the numpy-style expectations (value is nil when the
	// embeddings are random, in the gradient cases).
	rows  map[string][][]uint64
	value func(fid uint64, col int) float64
	// gradTruth (gradient cases): per embedding tensor, per embedding row, the gradient every
	// float of the row must have when all layout gradients are 1 (the fid's use count).
	gradTruth [][]float64
	// gradRowDims: the floats of each embedding row of each tensor, to walk gradTruth.
	gradRowDims [][]int
}

// refConfigs builds the feature configs both reference tests share: slots [1, split0) table_one
// SUM, [split0, split1) table_two MEAN, [split1, slots) table_one FIRSTN of maxSeqLen; layouts
// bias (ADDN), vec (CONCAT), ffm1 (STACK), ffm2 (NONE) of the pooled slots and firstN (NONE) of
// the sequences, whose slices start at column firstNStart (the two tests differ there).
func refConfigs(slots, split0, split1, maxSeqLen int, firstNStart int32, name func(slot int) string) *examplepb.FeatureConfigs {
	cfgs := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	pooled, firstN := newPooledLayouts(), &examplepb.OutConfig{}
	for slot := 1; slot < slots; slot++ {
		name := name(slot)
		if slot < split1 {
			cfgs.FeatureConfigs[name] = pooled.slot(name, slot >= split0)
			continue
		}
		cfgs.FeatureConfigs[name] = &examplepb.FeatureConfig{Table: "table_one", SliceDims: []int32{1, 4, 16},
			MaxSequenceLength: int32(maxSeqLen), PoolingType: examplepb.PoolingType_FIRSTN}
		addSlice(firstN, name, firstNStart, 21)
	}
	pooled.addTo(cfgs)
	cfgs.OutConfigs["firstN"] = mustInferShape(firstN, examplepb.OutType_NONE, maxSeqLen)
	return cfgs
}

// mainCase ports FusedEmbeddingToLayoutTest.test_fused_embedding_to_layout (ExampleBatch with
// shared features; table_one SUM and FIRSTN, table_two MEAN; layouts bias ADDN, vec CONCAT, ffm1
// STACK, ffm2 NONE, firstN NONE with sequences). shardVersion 0 builds the v2 offsets by hand as
// the reference does; 2-4 run sharding_sparse_fids.
func mainCase(seed uint64, shardVersion, opVersion, parallel int) *refCase {
	rng := rand.New(rand.NewPCG(seed, 2))
	const (
		batch     = 256
		numPS     = 5
		slotCount = 200
		maxSeqLen = 3
		split0    = 50
		split1    = 100
	)
	cfgs := refConfigs(slotCount, split0, split1, maxSeqLen, 1, func(slot int) string { return fmt.Sprintf("fc_slot_%d", slot) })
	featureCfg, featureNames, tableNames := getFeatureCfg(cfgs, numPS)

	var fidOffset []uint64
	featureOffset := []int32{0}
	nflOffset := []uint32{0}
	eb := &examplepb.ExampleBatch{BatchSize: batch}
	rows := map[string][][]uint64{}
	fidsDict := make([][][]uint64, len(tableNames)) // [table][ps] fids in embedding order
	for t := range fidsDict {
		fidsDict[t] = make([][]uint64, numPS)
	}
	rowSplit := make([][]int64, numPS*len(tableNames))
	for i := range rowSplit {
		rowSplit[i] = []int64{0}
	}
	for _, name := range featureNames {
		slot := 0
		fmt.Sscanf(strings.TrimPrefix(name, "fc_slot_"), "%d", &slot)
		isShared := slot%2 == 0
		nfl := &examplepb.NamedFeatureList{Id: int32(slot), Name: name, Type: examplepb.FeatureListType_INDIVIDUAL}
		if isShared {
			nfl.Type = examplepb.FeatureListType_SHARED
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, nfl)
		fcfg := featureCfg[name]
		index2 := make([]int, numPS*len(tableNames))
		makeFids := func() {
			var fids []uint64
			seen := map[uint64]bool{}
			for i := range randint(rng, 1, maxSeqLen*2) {
				fid := uint64(slot*10000 + (i+1)*1000 + randint(rng, 1, 9)*100)
				if !seen[fid] {
					seen[fid] = true
					fids = append(fids, fid)
				}
			}
			nfl.Feature = append(nfl.Feature, fidV2(fids))
			rows[name] = append(rows[name], fids)
			for _, fid := range fids {
				idx := int(fid % numPS)
				full := fcfg.getPreOutputOffset(idx)
				index1 := fcfg.tableIndex*numPS + idx
				fidOffset = append(fidOffset, uint64(full)<<32|uint64(index2[index1]))
				index2[index1]++
				fidsDict[fcfg.tableIndex][idx] = append(fidsDict[fcfg.tableIndex][idx], fid)
			}
			featureOffset = append(featureOffset, int32(len(fidOffset)))
		}
		if isShared {
			makeFids()
		} else {
			for range batch {
				makeFids()
			}
		}
		for ps := range numPS {
			i := fcfg.tableIndex*numPS + ps
			rowSplit[i] = append(rowSplit[i], int64(len(fidsDict[fcfg.tableIndex][ps])))
		}
		if isShared {
			nflOffset[len(nflOffset)-1] |= SharedBit
		}
		nflOffset = append(nflOffset, uint32(len(featureOffset)-1))
	}
	value := func(fid uint64, col int) float64 { return float64(fid) + float64(col) }
	opts := Options{Version: opVersion, PSNum: numPS, VariantType: "example_batch", ParallelFlag: parallel}
	c := &refCase{cfgs: cfgs, opts: opts, rows: rows, value: value}
	plan, err := Compile(cfgs, opts)
	if err != nil {
		panic(err)
	}
	if shardVersion != 0 {
		s := shardSparseFids(cfgs, numPS, shardVersion, false, eb, nil)
		c.in = s.embeddings(plan, func(fid uint64, col int) float32 { return float32(value(fid, col)) })
		return c
	}
	if opVersion != 2 {
		panic("the reference builds offsets by hand for version 2 only ('Not imple')")
	}
	var embeddings [][]float32
	for t := range tableNames {
		for ps := range numPS {
			var emb []float32
			for _, fid := range fidsDict[t][ps] {
				for col := range featureCfg[featureOfFid(fid)].dimSum {
					emb = append(emb, float32(value(fid, col)))
				}
			}
			embeddings = append(embeddings, emb)
		}
	}
	c.in = &Input{Embeddings: embeddings, FidListRowSplit: rowSplit, FidOffset: fidOffset,
		FeatureOffset: featureOffset, NflOffset: nflOffset, BatchSize: batch}
	return c
}

// featureOfFid is the feature of a mainCase fid (slot * 10000 + ...).
func featureOfFid(fid uint64) string { return fmt.Sprintf("fc_slot_%d", fid/10000) }

var alphabetName = append(strings.Split("abcdefghijklmnopqrstuvwxyz", ""), "za", "zb", "zc", "zd")

// gradCase ports FusedEmbeddingToLayoutTest.test_fused_embedding_to_layout_grad (Examples, 3 PS,
// every example uses a sliding window of its slot's fids; the truth is each fid's use count).
func gradCase(seed uint64, shardVersion, opVersion, parallel int) *refCase {
	rng := rand.New(rand.NewPCG(seed, 3))
	const (
		batch     = 256
		numPS     = 3
		slotNum   = 30
		maxSeqLen = 3
		split0    = 10
		split1    = 20
	)
	cfgs := refConfigs(slotNum, split0, split1, maxSeqLen, 0, func(slot int) string { return "fc_slot_" + alphabetName[slot-1] })
	featureCfg, _, tableNames := getFeatureCfg(cfgs, numPS)

	slot2fid := map[int][]uint64{}
	examples := make([]*examplepb.Example, batch)
	for i := range examples {
		examples[i] = &examplepb.Example{}
	}
	window := map[int][][]int{}
	for slot := 1; slot < slotNum; slot++ {
		name := "fc_slot_" + alphabetName[slot-1]
		seen := map[uint64]bool{}
		var fids []uint64
		for range randint(rng, batch+1, batch+10) {
			fid := uint64(slot)<<48 + uint64(randint(rng, 100, 1000000))
			if !seen[fid] {
				seen[fid] = true
				fids = append(fids, fid)
			}
		}
		slot2fid[slot] = fids
		window[slot] = make([][]int, batch)
		for bi := range batch {
			var idx []int
			for i := bi; i < len(fids)-batch+1+bi; i++ {
				idx = append(idx, i)
			}
			window[slot][bi] = idx
			var list []uint64
			for _, i := range idx {
				list = append(list, fids[i])
			}
			examples[bi].NamedFeature = append(examples[bi].NamedFeature, &examplepb.NamedFeature{Name: name, Feature: fidV2(list)})
		}
	}
	type fidPos struct{ index1, index2, full, featureIndex int }
	slotOffsets := map[int][]fidPos{}
	parts := numPS * len(tableNames)
	embeddingFids := make([][]uint64, parts)
	rowSplit := make([][]int64, parts)
	for i := range rowSplit {
		rowSplit[i] = []int64{0}
	}
	counts := make([][]float64, parts)
	for slot := 1; slot < slotNum; slot++ {
		fcfg := featureCfg["fc_slot_"+alphabetName[slot-1]]
		perPS := make([]int, numPS)
		for _, fid := range slot2fid[slot] {
			ps := int(fid % numPS)
			index1 := fcfg.tableIndex*numPS + ps
			embeddingFids[index1] = append(embeddingFids[index1], fid)
			counts[index1] = append(counts[index1], 0)
			slotOffsets[slot] = append(slotOffsets[slot], fidPos{index1, len(embeddingFids[index1]) - 1, fcfg.getPreOutputOffset(ps), perPS[ps]})
			perPS[ps]++
		}
		for ps := range numPS {
			i := fcfg.tableIndex*numPS + ps
			rowSplit[i] = append(rowSplit[i], int64(len(embeddingFids[i])))
		}
	}
	var fidOffset []uint64
	featureOffset := []int32{0}
	nflOffset := []uint32{0}
	rows := map[string][][]uint64{}
	for slot := 1; slot < slotNum; slot++ {
		name := "fc_slot_" + alphabetName[slot-1]
		fc := cfgs.FeatureConfigs[name]
		for bi := range batch {
			idx := window[slot][bi]
			var row []uint64
			for i, j := range idx {
				pos := slotOffsets[slot][j]
				fidOffset = append(fidOffset, uint64(pos.full)<<32|uint64(pos.featureIndex))
				row = append(row, slot2fid[slot][j])
				switch {
				case fc.PoolingType == examplepb.PoolingType_FIRSTN && i >= int(fc.MaxSequenceLength):
				case fc.PoolingType == examplepb.PoolingType_MEAN:
					counts[pos.index1][pos.index2] += 1 / float64(len(idx))
				default:
					counts[pos.index1][pos.index2]++
				}
			}
			rows[name] = append(rows[name], row)
			featureOffset = append(featureOffset, int32(len(fidOffset)))
		}
		nflOffset = append(nflOffset, uint32(len(featureOffset)-1))
	}
	rowDims := make([][]int, parts)
	embeddings := make([][]float32, parts)
	for i, list := range embeddingFids {
		for _, fid := range list {
			d := featureCfg["fc_slot_"+alphabetName[fid>>48-1]].dimSum
			rowDims[i] = append(rowDims[i], d)
			for range d {
				embeddings[i] = append(embeddings[i], rng.Float32())
			}
		}
	}
	opts := Options{Version: opVersion, PSNum: numPS, VariantType: "example", ParallelFlag: parallel}
	c := &refCase{cfgs: cfgs, opts: opts, rows: rows, gradTruth: counts, gradRowDims: rowDims}
	if shardVersion == 0 {
		if opVersion != 2 {
			panic("the reference builds offsets by hand for version 2 only ('Not imple')")
		}
		c.in = &Input{Embeddings: embeddings, FidListRowSplit: rowSplit, FidOffset: fidOffset,
			FeatureOffset: featureOffset, NflOffset: nflOffset, BatchSize: batch}
		return c
	}
	// The reference feeds the same embeddings: sharding_sparse_fids (unique) lists every part's
	// fids in the same order as embeddingFids, which the test checks.
	s := shardSparseFids(cfgs, numPS, shardVersion, true, nil, examples)
	for i := range embeddingFids {
		if fmt.Sprint(s.fidList[i]) != fmt.Sprint(embeddingFids[i]) {
			panic(fmt.Sprintf("sharding_sparse_fids part %d lists other fids than the test", i))
		}
	}
	in := &Input{FidOffset: s.fidOffset, FeatureOffset: s.featureOffset, NflOffset: s.nflOffset, BatchSize: s.batch}
	switch shardVersion {
	case 2:
		in.Embeddings, in.FidListRowSplit = embeddings, s.rowSplits
	case 3:
		in.Embeddings = embeddings
	case 4:
		var all []float32
		for ps := range numPS {
			for t := range tableNames {
				all = append(all, embeddings[t*numPS+ps]...)
			}
		}
		in.Embeddings, in.FidListEmbRowLength = [][]float32{all}, s.embRowLength
	}
	c.in = in
	return c
}

// fitPreCase ports FusedEmbeddingToLayoutFitPreTest.test_fused_embedding_to_layout (version 1,
// ExampleBatch with shared features, [rows, dim] embeddings per (table, ps)). withSeq adds FIRSTN
// features of a third table, laid out in a NONE, a CONCAT and a STACK layout (not in the
// reference, whose FIRSTN kernels handle NONE layouts only).
func fitPreCase(seed uint64, withSeq bool) *refCase {
	rng := rand.New(rand.NewPCG(seed, 4))
	const batch = 10
	cfgs := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	pooled := newPooledLayouts()
	seqNone, seqConcat, seqStack := &examplepb.OutConfig{}, &examplepb.OutConfig{}, &examplepb.OutConfig{}
	lastSlot := 50
	if withSeq {
		lastSlot = 60
	}
	var names []string
	for slot := 1; slot < lastSlot; slot++ {
		names = append(names, fmt.Sprintf("fc_slot_%d", slot))
	}
	sort.Strings(names)
	// table_one: parts 0-4 (13 floats per row); table_two: 5-9 (21); table_three: 10-14 (21).
	const parts = 15
	partRows := make([][]uint64, parts)
	eb := &examplepb.ExampleBatch{BatchSize: batch}
	var fidOffset []uint64
	featureOffset := []int32{0}
	nflOffset := []uint32{0}
	rows := map[string][][]uint64{}
	fidAt := map[uint64][2]int{} // fid -> (part, row)
	for _, name := range names {
		slot := 0
		fmt.Sscanf(strings.TrimPrefix(name, "fc_slot_"), "%d", &slot)
		var fc *examplepb.FeatureConfig
		base := 0 // the first of the five parts of the slot's table
		switch {
		case slot < 50:
			fc = pooled.slot(name, slot >= 25)
			if slot >= 25 {
				base = 5
			}
		default:
			fc = &examplepb.FeatureConfig{Table: "table_three", SliceDims: []int32{1, 4, 16},
				PoolingType: examplepb.PoolingType_FIRSTN, MaxSequenceLength: 3}
			addSlice(seqNone, name, 1, 21)
			addSlice(seqConcat, name, 0, 1+int32(slot%4))
			addSlice(seqStack, name, 5, 21)
			base = 10
		}
		cfgs.FeatureConfigs[name] = fc
		nfl := &examplepb.NamedFeatureList{Id: int32(slot), Name: name, Type: examplepb.FeatureListType_INDIVIDUAL}
		shared := slot%2 == 0
		if shared {
			nfl.Type = examplepb.FeatureListType_SHARED
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, nfl)
		// Fids are drawn without replacement within a slot: the reference draws with replacement
		// and then keys its expectations by fid, which fails when two examples draw the same fid.
		used := map[uint64]bool{}
		featureRow := func() {
			seen := map[uint64]bool{}
			var fids []uint64
			for range randint(rng, 1, 5) {
				fid := uint64(slot)<<48 + uint64(randint(rng, 100, 1000000))
				for used[fid] && !seen[fid] {
					fid = uint64(slot)<<48 + uint64(randint(rng, 100, 1000000))
				}
				if !seen[fid] {
					seen[fid], used[fid] = true, true
					fids = append(fids, fid)
				}
			}
			nfl.Feature = append(nfl.Feature, fidV2(fids))
			rows[name] = append(rows[name], fids)
			for _, fid := range fids {
				index1 := base + int(fid%5)
				fidOffset = append(fidOffset, uint64(index1)<<32|uint64(len(partRows[index1])))
				fidAt[fid] = [2]int{index1, len(partRows[index1])}
				partRows[index1] = append(partRows[index1], fid)
			}
			featureOffset = append(featureOffset, int32(len(fidOffset)))
		}
		if shared {
			featureRow()
		} else {
			for range batch {
				featureRow()
			}
		}
		nflOffset = append(nflOffset, uint32(len(featureOffset)-1))
	}
	for i, name := range names {
		slot := 0
		fmt.Sscanf(strings.TrimPrefix(name, "fc_slot_"), "%d", &slot)
		if slot%2 == 0 {
			nflOffset[i] |= SharedBit
		}
	}
	pooled.addTo(cfgs)
	if withSeq {
		cfgs.OutConfigs["seq_none"] = mustInferShape(seqNone, examplepb.OutType_NONE, 3)
		cfgs.OutConfigs["seq_concat"] = mustInferShape(seqConcat, examplepb.OutType_CONCAT, 3)
		cfgs.OutConfigs["seq_stack"] = mustInferShape(seqStack, examplepb.OutType_STACK, 3)
	}
	embeddings := make([][]float32, parts)
	dims := make([]int, parts)
	values := map[uint64][]float64{}
	for i, list := range partRows {
		dims[i] = 21
		if i < 5 {
			dims[i] = 13
		}
		for _, fid := range list {
			v := make([]float64, dims[i])
			for c := range v {
				f := float32(rng.Float64())
				v[c] = float64(f)
				embeddings[i] = append(embeddings[i], f)
			}
			values[fid] = v
		}
	}
	return &refCase{
		cfgs: cfgs,
		opts: Options{Version: 1, PSNum: -1, VariantType: "example_batch"},
		in: &Input{Embeddings: embeddings, EmbeddingDims: dims, FidOffset: fidOffset, FeatureOffset: featureOffset,
			NflOffset: nflOffset, BatchSize: batch},
		rows:  rows,
		value: func(fid uint64, col int) float64 { return values[fid][col] },
	}
}

// fitPreGradCase ports FusedEmbeddingToLayoutFitPreTest.test_fused_embedding_to_layout_grad
// (version 1, Examples; fids picked with repetition, some examples without fids).
func fitPreGradCase(seed uint64) *refCase {
	rng := rand.New(rand.NewPCG(seed, 5))
	const (
		batch   = 4
		slotNum = 30
	)
	cfgs := &examplepb.FeatureConfigs{FeatureConfigs: map[string]*examplepb.FeatureConfig{}, OutConfigs: map[string]*examplepb.OutConfig{}}
	pooled := newPooledLayouts()
	embeddingFids := make([][]uint64, 4) // 13, 13, 21, 21 floats per row
	type pos struct{ index1, index2 int }
	slot2fid := map[int][]uint64{}
	slotPos := map[int][]pos{}
	for slot := 1; slot < slotNum; slot++ {
		tableIdx := 0
		if float64(slot) >= slotNum/2.0 {
			tableIdx = 2
		}
		seen := map[uint64]bool{}
		var fids []uint64
		// Distinct fids (at least two: the reference picks fids 1..len-1 of them).
		for n := randint(rng, 2, 10); len(fids) < n; {
			fid := uint64(slot)<<48 + uint64(randint(rng, 100, 1000000))
			if !seen[fid] {
				seen[fid] = true
				fids = append(fids, fid)
			}
		}
		slot2fid[slot] = fids
		for _, fid := range fids {
			index1 := tableIdx
			if fid%2 == 0 {
				index1++
			}
			embeddingFids[index1] = append(embeddingFids[index1], fid)
			slotPos[slot] = append(slotPos[slot], pos{index1, len(embeddingFids[index1]) - 1})
		}
		name := "fc_slot_" + alphabetName[slot-1]
		cfgs.FeatureConfigs[name] = pooled.slot(name, float64(slot) >= slotNum/2.0)
	}
	pooled.addTo(cfgs)

	counts := make([][]float64, 4)
	for i := range counts {
		counts[i] = make([]float64, len(embeddingFids[i]))
	}
	var fidOffset []uint64
	featureOffset := []int32{0}
	nflOffset := []uint32{0}
	rows := map[string][][]uint64{}
	for slot := 1; slot < slotNum; slot++ {
		name := "fc_slot_" + alphabetName[slot-1]
		fc := cfgs.FeatureConfigs[name]
		all := slot2fid[slot]
		for range batch {
			n := randint(rng, 0, len(all))
			var row []uint64
			var idx []int
			for range n {
				idx = append(idx, randint(rng, 1, len(all)-1))
			}
			for _, j := range idx {
				p := slotPos[slot][j]
				fidOffset = append(fidOffset, uint64(p.index1)<<32|uint64(p.index2))
				row = append(row, all[j])
				if fc.PoolingType == examplepb.PoolingType_MEAN {
					counts[p.index1][p.index2] += 1 / float64(len(idx))
				} else {
					counts[p.index1][p.index2]++
				}
			}
			rows[name] = append(rows[name], row)
			featureOffset = append(featureOffset, int32(len(fidOffset)))
		}
		nflOffset = append(nflOffset, uint32(len(featureOffset)-1))
	}
	embeddings := make([][]float32, 4)
	dims := []int{13, 13, 21, 21}
	rowDims := make([][]int, 4)
	for i, list := range embeddingFids {
		for range list {
			rowDims[i] = append(rowDims[i], dims[i])
			for range dims[i] {
				embeddings[i] = append(embeddings[i], rng.Float32())
			}
		}
	}
	return &refCase{
		cfgs: cfgs,
		opts: Options{Version: 1, PSNum: -1, VariantType: "example"},
		in: &Input{Embeddings: embeddings, EmbeddingDims: dims, FidOffset: fidOffset, FeatureOffset: featureOffset,
			NflOffset: nflOffset, BatchSize: batch},
		rows:        rows,
		gradTruth:   counts,
		gradRowDims: rowDims,
	}
}

// pooling is the reference test's pooling(): SUM and MEAN of the rows, or FIRSTN's first maxLen
// rows padded to maxLen (as a flat [maxLen * dim] slice). An empty input pools to zeros.
func pooling(t examplepb.PoolingType, data [][]float64, dim, maxLen int) []float64 {
	if maxLen > 0 && len(data) > maxLen {
		data = data[:maxLen]
	}
	switch t {
	case examplepb.PoolingType_SUM, examplepb.PoolingType_MEAN:
		out := make([]float64, dim)
		for _, d := range data {
			for c := range out {
				out[c] += d[c]
			}
		}
		if t == examplepb.PoolingType_MEAN && len(data) > 0 {
			for c := range out {
				out[c] /= float64(len(data))
			}
		}
		return out
	default:
		out := make([]float64, maxLen*dim)
		for i, d := range data {
			copy(out[i*dim:], d)
		}
		return out
	}
}

// expectedOutputs computes the layout tensors from the fids and their embeddings, as the reference
// test does with numpy (layouts sorted by name; a shared feature's one row is copied down the
// batch; ADDN sums its slices). FIRSTN slices of CONCAT and STACK layouts are placed as their
// shapes say: [batch, seq, concatenated columns] and [batch, slice, seq, columns].
func expectedOutputs(c *refCase) [][]float64 {
	var names []string
	for n := range c.cfgs.GetOutConfigs() {
		names = append(names, n)
	}
	sort.Strings(names)
	batch := c.in.BatchSize
	var out [][]float64
	for _, ln := range names {
		oc := c.cfgs.GetOutConfigs()[ln]
		// Each slice's tensor, and where (sequence position k, column j) of its pooled value goes
		// in a row of it.
		type place struct {
			tensor  []float64
			rowSize int
			at      func(k, j int) int
		}
		places := make([]place, len(oc.GetSliceConfigs()))
		rowSize := func(shape *examplepb.TensorShape) int {
			n := 1
			for _, d := range shape.GetDims()[1:] {
				n *= int(d)
			}
			return n
		}
		if oc.GetOutType() == examplepb.OutType_NONE {
			for i, sc := range oc.GetSliceConfigs() {
				rs := rowSize(oc.GetShape()[i])
				t := make([]float64, batch*rs)
				out = append(out, t)
				dim := int(sc.GetEnd() - sc.GetStart())
				places[i] = place{t, rs, func(k, j int) int { return k*dim + j }}
			}
		} else {
			shape := oc.GetShape()[0]
			dims := shape.GetDims()
			rs := rowSize(shape)
			t := make([]float64, batch*rs)
			out = append(out, t)
			offset := 0
			for i, sc := range oc.GetSliceConfigs() {
				dim := int(sc.GetEnd() - sc.GetStart())
				switch oc.GetOutType() {
				case examplepb.OutType_CONCAT:
					last, off := int(dims[len(dims)-1]), offset
					places[i] = place{t, rs, func(k, j int) int { return k*last + off + j }}
					offset += dim
				case examplepb.OutType_STACK:
					per, idx := rs/int(dims[1]), i
					places[i] = place{t, rs, func(k, j int) int { return idx*per + k*dim + j }}
				default: // ADDN
					places[i] = place{t, rs, func(k, j int) int { return j }}
				}
			}
		}
		for i, sc := range oc.GetSliceConfigs() {
			fc := c.cfgs.GetFeatureConfigs()[sc.GetFeatureName()]
			features := c.rows[sc.GetFeatureName()]
			dim := int(sc.GetEnd() - sc.GetStart())
			maxLen := int(fc.GetMaxSequenceLength())
			seqLen := 1
			if fc.GetPoolingType() == examplepb.PoolingType_FIRSTN {
				seqLen = maxLen
			}
			p := places[i]
			var prev []float64
			for r := range batch {
				pooled := prev // shared: copy the previous example
				if r < len(features) {
					var data [][]float64
					for _, fid := range features[r] {
						v := make([]float64, dim)
						for j := range v {
							v[j] = c.value(fid, int(sc.GetStart())+j)
						}
						data = append(data, v)
					}
					pooled = pooling(fc.GetPoolingType(), data, dim, maxLen)
				}
				prev = pooled
				for k := range seqLen {
					for j := range dim {
						p.tensor[r*p.rowSize+p.at(k, j)] += pooled[k*dim+j]
					}
				}
			}
		}
	}
	return out
}

// allClose is np.allclose(want, got, rtol=1e-4, atol=1e-7), the reference test's comparison.
func allClose(want float64, got float32) bool {
	return math.Abs(float64(got)-want) <= 1e-7+1e-4*math.Abs(want)
}
