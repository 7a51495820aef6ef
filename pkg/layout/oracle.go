package layout

// The Go oracle: a plain transcription of the reference kernel (fused_embedding_to_layout.cc:
// GatherEmb, ForwardTaskRunImpl, ScatterGrad), written for clarity rather than speed. The native
// kernels are tested against it bit for bit, so its float operations follow the reference's order:
// the first term of a pooled value is copied, later terms added; MEAN divides every term by the fid
// count before adding it.

import (
	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
)

// part is the reference's PtrWrapper: a block of embedding floats addressed by fid positions.
type part struct {
	data   []float32 // the part's floats
	stride int       // floats per position: the row width (v1, v2) or 1 (v3, v4)
	width  int       // row width slices must fit in (v1, v2), -1 when positions are float offsets
}

// featureRows locates one feature's rows in feature_offset.
type featureRows struct {
	first   int  // first feature row
	present bool // false: no rows (its layout regions stay zero)
	shared  bool // one row for the whole batch
}

// oracleParts maps the version-specific embedding inputs to parts, in the order fid offsets number
// them. bases are the tensors the parts point into (the embeddings, or their gradients).
func (p *Plan) oracleParts(in *Input, bases [][]float32) ([]part, *InputError) {
	n := len(in.Embeddings)
	tables, ps := len(p.tables), p.opts.PSNum
	var parts []part
	switch p.opts.Version {
	case 1: // [rows, dim] tensors
		for i, emb := range in.Embeddings {
			dim := in.EmbeddingDims[i]
			if dim <= 0 || len(emb)%dim != 0 {
				return nil, &InputError{Code: CodeEmbeddingShape, A: int64(i), B: int64(len(emb)), C: int64(dim)}
			}
			parts = append(parts, part{data: bases[i], stride: dim, width: dim})
		}
	case 2: // per (table, ps), split into features by the row splits
		if n != tables*ps {
			return nil, &InputError{Code: CodeEmbeddingCount, A: int64(n), B: int64(tables * ps)}
		}
		if len(in.FidListRowSplit) != n {
			return nil, &InputError{Code: CodeRowSplitCount, A: int64(len(in.FidListRowSplit)), B: int64(n)}
		}
		for t, tab := range p.tables {
			for ps_i := 0; ps_i < ps; ps_i++ {
				i := t*ps + ps_i
				split := in.FidListRowSplit[i]
				if len(split) != len(tab.features)+1 {
					return nil, &InputError{Code: CodeRowSplitLength, A: int64(i), B: int64(len(split)), C: int64(len(tab.features) + 1)}
				}
				prev, used := int64(0), 0
				for j, f := range tab.features {
					v := split[j+1]
					if v < prev {
						return nil, &InputError{Code: CodeRowSplitOrder, A: int64(i), B: int64(j + 1), C: v}
					}
					dim := p.features[f].dimsSum
					count := v - prev
					if dim > 0 && count > int64((len(in.Embeddings[i])-used)/dim) {
						return nil, &InputError{Code: CodeRowSplitSize, A: int64(i), B: int64(j + 1), C: int64(len(in.Embeddings[i]))}
					}
					size := int(count) * dim
					parts = append(parts, part{data: bases[i][used : used+size], stride: dim, width: dim})
					used += size
					prev = v
				}
			}
		}
	case 3: // per (table, ps), positions are float offsets
		for i := range in.Embeddings {
			parts = append(parts, part{data: bases[i], stride: 1, width: -1})
		}
	case 4: // one tensor: (ps, table) parts concatenated
		if n != 1 {
			return nil, &InputError{Code: CodeEmbeddingCount, A: int64(n), B: 1}
		}
		lengths := in.FidListEmbRowLength
		if len(lengths) != tables*ps {
			return nil, &InputError{Code: CodeEmbRowLengthCount, A: int64(len(lengths)), B: int64(tables * ps)}
		}
		sum := int64(0)
		for k, l := range lengths {
			if l < 0 {
				return nil, &InputError{Code: CodeEmbRowLengthValue, A: int64(k), B: int64(l)}
			}
			sum += int64(l)
		}
		if sum != int64(len(in.Embeddings[0])) {
			return nil, &InputError{Code: CodeEmbRowLengthSum, A: sum, B: int64(len(in.Embeddings[0]))}
		}
		parts = make([]part, tables*ps)
		offset := 0
		for k, l := range lengths {
			t, ps_i := k%tables, k/tables
			parts[t*ps+ps_i] = part{data: bases[0][offset : offset+int(l)], stride: 1, width: -1}
			offset += int(l)
		}
	}
	return parts, nil
}

// oracleFeatures checks nfl_offset, feature_offset and fid_offset for every feature a slice reads
// (sorted feature order) against the parts, and says where each feature's rows are.
func (p *Plan) oracleFeatures(in *Input, parts []part) ([]featureRows, *InputError) {
	if len(in.NflOffset) < len(p.features) {
		return nil, &InputError{Code: CodeNflLength, A: int64(len(in.NflOffset)), B: int64(len(p.features))}
	}
	rowsTotal := len(in.FeatureOffset)
	features := make([]featureRows, len(p.features))
	for f := range p.features {
		maxEnd := p.maxEnd[f]
		if maxEnd == 0 {
			continue // no slice reads this feature
		}
		shared := in.NflOffset[f]&SharedBit != 0
		first := int64(in.NflOffset[f] &^ SharedBit)
		next := int64(rowsTotal)
		if f+1 < len(in.NflOffset) {
			next = int64(in.NflOffset[f+1] &^ SharedBit)
		}
		count := next - first
		if count < 0 {
			return nil, &InputError{Code: CodeNflOrder, A: int64(f), B: count}
		}
		if count == 0 {
			continue // absent
		}
		rows := int64(in.BatchSize)
		if shared {
			rows = min(1, rows)
		} else if count < rows {
			return nil, &InputError{Code: CodeFeatureRows, A: int64(f), B: count, C: rows}
		}
		if first+rows > int64(rowsTotal) {
			return nil, &InputError{Code: CodeFeatureRange, A: int64(f), B: first, C: int64(rowsTotal)}
		}
		for r := first; r < first+rows; r++ {
			begin := int64(in.FeatureOffset[r])
			end := int64(len(in.FidOffset))
			if r+1 < int64(rowsTotal) {
				end = int64(in.FeatureOffset[r+1])
			}
			if begin < 0 || end < begin || end > int64(len(in.FidOffset)) {
				return nil, &InputError{Code: CodeFidRange, A: r, B: begin, C: end}
			}
			for k := begin; k < end; k++ {
				index1, index2 := int64(in.FidOffset[k]>>32), int64(in.FidOffset[k]&0xffffffff)
				if index1 >= int64(len(parts)) {
					return nil, &InputError{Code: CodeFidPart, A: k, B: index1, C: int64(len(parts))}
				}
				pt := parts[index1]
				if pt.width >= 0 && maxEnd > pt.width {
					return nil, &InputError{Code: CodeFidWidth, A: k, B: index1, C: int64(pt.width)}
				}
				// index2*stride + maxEnd <= len(data), without overflow.
				if size := int64(len(pt.data)); int64(maxEnd) > size || pt.stride > 0 && index2 > (size-int64(maxEnd))/int64(pt.stride) {
					return nil, &InputError{Code: CodeFidOffset, A: k, B: index2, C: int64(len(pt.data))}
				}
			}
		}
		features[f] = featureRows{first: int(first), present: true, shared: shared}
	}
	return features, nil
}

// oraclePrepare runs the checks in the order every implementation uses.
func (p *Plan) oraclePrepare(in *Input, bases [][]float32) ([]part, []featureRows, *InputError) {
	parts, ie := p.oracleParts(in, bases)
	if ie != nil {
		return nil, nil, ie
	}
	if in.BatchSize < 0 {
		return nil, nil, &InputError{Code: CodeBatchSize, A: int64(in.BatchSize)}
	}
	features, ie := p.oracleFeatures(in, parts)
	if ie != nil {
		return nil, nil, ie
	}
	return parts, features, nil
}

func (p *Plan) checkTensors(batch int, tensors [][]float32) *InputError {
	if len(tensors) != len(p.outputs) {
		return &InputError{Code: CodeOutputCount, A: int64(len(tensors)), B: int64(len(p.outputs))}
	}
	for i, t := range tensors {
		if want := batch * p.outputs[i].RowSize; len(t) != want {
			return &InputError{Code: CodeOutputSize, A: int64(i), B: int64(len(t)), C: int64(want)}
		}
	}
	return nil
}

// fids returns the fid offsets of feature row r.
func fids(in *Input, r int) []uint64 {
	end := len(in.FidOffset)
	if r+1 < len(in.FeatureOffset) {
		end = int(in.FeatureOffset[r+1])
	}
	return in.FidOffset[in.FeatureOffset[r]:end]
}

// embedding returns columns [start, start+dims) of the fid at fid offset fo.
func embedding(parts []part, fo uint64, start, dims int) []float32 {
	pt := parts[fo>>32]
	at := int(fo&0xffffffff)*pt.stride + start
	return pt.data[at : at+dims]
}

// sumPool is the reference's OptimizedSumpooling: dst = src (when *init, which it clears) or
// dst += src; MEAN passes the fid count, which divides every term.
func sumPool(src, dst []float32, init *bool, meanCount int) {
	for i := range src {
		v := src[i]
		if meanCount > 0 {
			v /= float32(meanCount)
		}
		if *init {
			dst[i] = v
		} else {
			dst[i] += v
		}
	}
	*init = false
}

// gatherEmb is the reference's GatherEmb: pools the fids of feature row r into out.
func gatherEmb(in *Input, parts []part, r int, s *slice, out []float32, init bool) {
	ids := fids(in, r)
	for seq, fo := range ids {
		src := embedding(parts, fo, s.start, s.dims)
		switch s.pooling {
		case examplepb.PoolingType_SUM:
			sumPool(src, out[:s.dims], &init, 0)
		case examplepb.PoolingType_MEAN:
			sumPool(src, out[:s.dims], &init, len(ids))
		case examplepb.PoolingType_FIRSTN:
			if seq < s.maxSeq {
				copy(out[seq*s.seqStride:seq*s.seqStride+s.dims], src)
			}
		}
	}
}

// copyRegion copies a slice's region of one output row to another row.
func copyRegion(s *slice, out []float32, from, to int) {
	positions, stride := 1, 0
	if s.pooling == examplepb.PoolingType_FIRSTN {
		positions, stride = s.maxSeq, s.seqStride
	}
	for k := 0; k < positions; k++ {
		copy(out[to+k*stride:to+k*stride+s.dims], out[from+k*stride:from+k*stride+s.dims])
	}
}

func (p *Plan) forwardOracle(in *Input, out [][]float32) *InputError {
	parts, features, ie := p.oraclePrepare(in, in.Embeddings)
	if ie != nil {
		return ie
	}
	if ie := p.checkTensors(in.BatchSize, out); ie != nil {
		return ie
	}
	for _, t := range out {
		clear(t)
	}
	for i := range p.slices {
		s := &p.slices[i]
		fr := features[s.feature]
		if !fr.present {
			continue
		}
		tensor, rowSize := out[s.output], p.outputs[s.output].RowSize
		var tmp []float32 // the pooled shared feature of an ADDN layout
		if fr.shared && s.addn {
			tmp = make([]float32, s.dims)
		}
		for r := 0; r < in.BatchSize; r++ {
			region := r*rowSize + s.offset
			if !fr.shared || r == 0 {
				row := fr.first
				if !fr.shared {
					row += r
				}
				if tmp != nil {
					gatherEmb(in, parts, row, s, tmp, true)
				} else {
					// Non-ADDN regions are assigned; ADDN regions accumulate over the layout's slices.
					gatherEmb(in, parts, row, s, tensor[region:], !s.addn)
				}
			}
			switch {
			case tmp != nil:
				init := s.addnFirst
				sumPool(tmp, tensor[region:region+s.dims], &init, 0)
			case fr.shared && r > 0:
				copyRegion(s, tensor, s.offset, region)
			}
		}
	}
	return nil
}

func (p *Plan) backwardOracle(in *Input, grads, embGrads [][]float32) *InputError {
	parts, features, ie := p.oraclePrepare(in, embGrads)
	if ie != nil {
		return ie
	}
	if ie := p.checkTensors(in.BatchSize, grads); ie != nil {
		return ie
	}
	for _, g := range embGrads {
		clear(g)
	}
	for i := range p.slices {
		s := &p.slices[i]
		fr := features[s.feature]
		if !fr.present {
			continue
		}
		tensor, rowSize := grads[s.output], p.outputs[s.output].RowSize
		for r := 0; r < in.BatchSize; r++ {
			row := fr.first
			if !fr.shared { // every example of a shared feature adds to its one row
				row += r
			}
			g := tensor[r*rowSize+s.offset:]
			ids := fids(in, row)
			init := false
			for seq, fo := range ids {
				dst := embedding(parts, fo, s.start, s.dims)
				switch s.pooling {
				case examplepb.PoolingType_SUM:
					sumPool(g[:s.dims], dst, &init, 0)
				case examplepb.PoolingType_MEAN:
					sumPool(g[:s.dims], dst, &init, len(ids))
				case examplepb.PoolingType_FIRSTN:
					if seq < s.maxSeq {
						sumPool(g[seq*s.seqStride:seq*s.seqStride+s.dims], dst, &init, 0)
					}
				}
			}
		}
	}
	return nil
}
