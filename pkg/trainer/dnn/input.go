package dnn

import (
	"context"
	"fmt"
	"math"
	"time"

	"golang.org/x/sync/errgroup"
	"gonum.org/v1/gonum/mat"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/layout"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/hashbucket"
)

// fidIDMask is a v2 fid's id bits.
const fidIDMask = 1<<fidSlotShift - 1

// tableBatch is one embedding table's share of a batch.
type tableBatch struct {
	name string
	dim  int
	// ids are the batch's distinct ids of the table, in order of first appearance; index maps
	// an id to its position (its row in emb and grad).
	ids   []int64
	index map[int64]uint32
	// emb holds the looked-up embeddings, grad their gradients (len(ids)*dim each).
	emb, grad []float32
}

// inputBuffers are a batch's layout op input and outputs, reused from batch to batch.
type inputBuffers struct {
	in     layout.Input
	cursor []int32     // per feature row: next free fid position while filling
	pooled [][]float32 // the op's one output: [batch, pooledDim]
	dPool  [][]float32 // its gradient
	embs   [][]float32 // per table: emb (the op's embeddings_list)
	grads  [][]float32 // per table: grad
	x      []float64   // the MLP's input, [batch, pooledDim+DenseDim]
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// featureOf is the feature index of fid's slot, -1 when no feature takes it.
func (m *Model) featureOf(fid uint64) int {
	return int(m.slotFeature[fid>>fidSlotShift&maxSlot])
}

// prepare builds the layout op's input for b: per table its distinct ids; per feature row
// (feature-major: the rows of feature f are f*B .. f*B+B-1, features by name) the positions of
// its fids, part<<32 | row, where part is the table and row the id's row among its distinct ids.
func (m *Model) prepare(b *batch.Batch) error {
	n := b.Size()
	if n == 0 {
		return errkind.New(errkind.Value, "dnn: empty batch")
	}
	if b.DenseDim != m.cfg.DenseDim || len(b.Dense) != n*b.DenseDim || len(b.Fids) != n {
		return errkind.New(errkind.Value, "dnn: batch of %d examples with %d dense values each (%d in all) and %d fid lists; the model takes %d dense values",
			n, b.DenseDim, len(b.Dense), len(b.Fids), m.cfg.DenseDim)
	}
	nf := len(m.features)
	buf := &m.in
	counts := grow(buf.cursor, nf*n)
	clear(counts)
	total := 0
	for i, fids := range b.Fids {
		for _, fid := range fids {
			f := m.featureOf(fid)
			if f < 0 {
				return errkind.New(errkind.Value, "dnn: example %d: fid %#x is in slot %d, which no feature takes", i, fid, fid>>fidSlotShift&maxSlot)
			}
			counts[f*n+i]++
		}
		total += len(fids)
	}
	if total > math.MaxInt32 {
		return errkind.New(errkind.Value, "dnn: %d fids in one batch, more than the layout op's int32 offsets hold", total)
	}
	in := &buf.in
	in.BatchSize = n
	in.FeatureOffset = grow(in.FeatureOffset, nf*n)
	next := int32(0)
	for r, c := range counts {
		in.FeatureOffset[r] = next
		counts[r] = next // from here on, the fill cursor of row r
		next += c
	}
	in.NflOffset = grow(in.NflOffset, nf)
	for f := range in.NflOffset {
		in.NflOffset[f] = uint32(f * n)
	}
	for t := range m.tables {
		tb := &m.tables[t]
		tb.ids = tb.ids[:0]
		clear(tb.index)
	}
	in.FidOffset = grow(in.FidOffset, total)
	for i, fids := range b.Fids {
		for _, fid := range fids {
			f := m.featureOf(fid)
			t := m.features[f].table
			tb := &m.tables[t]
			id := int64(fid)
			if nb := m.features[f].Buckets; nb > 0 {
				id = int64(fid&^fidIDMask | hashbucket.Bucket(fid, nb))
			}
			row, ok := tb.index[id]
			if !ok {
				row = uint32(len(tb.ids))
				tb.index[id] = row
				tb.ids = append(tb.ids, id)
			}
			r := f*n + i
			in.FidOffset[counts[r]] = uint64(t)<<32 | uint64(row)
			counts[r]++
		}
	}
	buf.cursor = counts
	buf.embs = grow(buf.embs, len(m.tables))
	buf.grads = grow(buf.grads, len(m.tables))
	in.EmbeddingDims = grow(in.EmbeddingDims, len(m.tables))
	for t := range m.tables {
		tb := &m.tables[t]
		tb.emb = grow(tb.emb, len(tb.ids)*tb.dim)
		tb.grad = grow(tb.grad, len(tb.ids)*tb.dim)
		buf.embs[t], buf.grads[t], in.EmbeddingDims[t] = tb.emb, tb.grad, tb.dim
	}
	in.Embeddings = buf.embs
	return nil
}

// eachTable runs fn for every table with ids, in parallel when there are several, and returns
// the first error.
func (m *Model) eachTable(ctx context.Context, fn func(ctx context.Context, tb *tableBatch) error) error {
	var busy []*tableBatch
	for t := range m.tables {
		if len(m.tables[t].ids) > 0 {
			busy = append(busy, &m.tables[t])
		}
	}
	if len(busy) == 1 {
		return fn(ctx, busy[0])
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, tb := range busy {
		g.Go(func() error { return fn(gctx, tb) })
	}
	return g.Wait()
}

// lookup reads the embeddings of every table's distinct ids from the store.
func (m *Model) lookup(ctx context.Context) error {
	return m.eachTable(ctx, func(ctx context.Context, tb *tableBatch) error {
		start := time.Now()
		err := m.store.Lookup(ctx, tb.name, tb.ids, tb.emb)
		m.stats.addLookup(len(tb.ids), time.Since(start))
		if err != nil {
			return fmt.Errorf("dnn: lookup of %d ids in table %q: %w", len(tb.ids), tb.name, err)
		}
		return nil
	})
}

// pool runs the layout op: the pooled embeddings of every (example, feature).
func (m *Model) pool() error {
	buf := &m.in
	buf.pooled = grow(buf.pooled, 1)
	buf.pooled[0] = grow(buf.pooled[0], buf.in.BatchSize*m.pooledDim)
	if _, err := m.plan.ForwardWith(m.engine, &buf.in, buf.pooled); err != nil {
		return fmt.Errorf("dnn: pooling: %w", err)
	}
	return nil
}

// inputMatrix is the MLP's input: each example's pooled embeddings, its dense values, then the
// dot products of the pairs.
func (m *Model) inputMatrix(b *batch.Batch) *mat.Dense {
	n, width := b.Size(), m.pooledDim+m.cfg.DenseDim+len(m.pairs)
	x := grow(m.in.x, n*width)
	pooled := m.in.pooled[0]
	for i := range n {
		row := x[i*width : (i+1)*width]
		for j, v := range pooled[i*m.pooledDim : (i+1)*m.pooledDim] {
			row[j] = float64(v)
		}
		for j, v := range b.Row(i) {
			row[m.pooledDim+j] = float64(v)
		}
		dots := row[m.pooledDim+m.cfg.DenseDim:]
		for k, pr := range m.pairs {
			fa, fb := &m.features[pr[0]], &m.features[pr[1]]
			ea, eb := row[fa.offset:fa.offset+fa.Dim], row[fb.offset:fb.offset+fb.Dim]
			var dot float64
			for j := range ea {
				dot += ea[j] * eb[j]
			}
			dots[k] = dot
		}
	}
	m.in.x = x
	return mat.NewDense(n, width, x)
}

// unpool runs the layout op's gradient: from the gradient of the MLP's input (its pooled
// columns) to one gradient per distinct id of every table.
func (m *Model) unpool(dx *mat.Dense) error {
	buf := &m.in
	n := buf.in.BatchSize
	buf.dPool = grow(buf.dPool, 1)
	d := grow(buf.dPool[0], n*m.pooledDim)
	raw := dx.RawMatrix()
	width := m.pooledDim + m.cfg.DenseDim + len(m.pairs)
	for i := range n {
		row := raw.Data[i*raw.Stride : i*raw.Stride+width]
		if len(m.pairs) > 0 {
			// d dot(a, b) / d a = b: each pair's gradient flows to both embeddings (into row's
			// pooled columns, which this batch's backward no longer needs).
			x := m.in.x[i*width : (i+1)*width]
			dots := row[m.pooledDim+m.cfg.DenseDim:]
			for k, pr := range m.pairs {
				fa, fb := &m.features[pr[0]], &m.features[pr[1]]
				ea, eb := x[fa.offset:fa.offset+fa.Dim], x[fb.offset:fb.offset+fb.Dim]
				da, db := row[fa.offset:fa.offset+fa.Dim], row[fb.offset:fb.offset+fb.Dim]
				for j := range ea {
					da[j] += dots[k] * eb[j]
					db[j] += dots[k] * ea[j]
				}
			}
		}
		for j, v := range row[:m.pooledDim] {
			d[i*m.pooledDim+j] = float32(v)
		}
	}
	buf.dPool[0] = d
	if _, err := m.plan.BackwardWith(m.engine, &buf.in, buf.dPool, buf.grads); err != nil {
		return fmt.Errorf("dnn: pooling gradient: %w", err)
	}
	return nil
}

// apply sends every table's id gradients to the store.
func (m *Model) apply(ctx context.Context, step int64) error {
	return m.eachTable(ctx, func(ctx context.Context, tb *tableBatch) error {
		start := time.Now()
		err := m.store.Apply(ctx, tb.name, tb.ids, tb.grad, step, m.cfg.EmbeddingLearningRates)
		m.stats.addApply(len(tb.ids), time.Since(start))
		if err != nil {
			return fmt.Errorf("dnn: apply of %d ids to table %q: %w", len(tb.ids), tb.name, err)
		}
		return nil
	})
}
