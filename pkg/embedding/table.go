package embedding

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Config configures a Table.
type Config struct {
	// Dim is the embedding dimension (the sum of the reference's segment dim_sizes).
	Dim int
	// Optimizer updates entries and holds their state; its Dim must be Dim.
	Optimizer Optimizer
	// Initializer sets the embedding of a new entry.
	Initializer Initializer
	// LearningRates is how many learning rates Apply takes: one per optimizer of a combined
	// optimizer (the reference's slice size); 0 means 1. An optimizer with a SliceSize method
	// says it itself.
	LearningRates int
	// Filter, when set, decides whether an id not in the table may become an entry (the
	// reference's hash filter with its per-slot occurrence thresholds: see SlotFilter).
	Filter EntryFilter
	// ExpireTime holds the per-slot expire times in days (nil: every slot's is the default,
	// 36500 days). Evict and Save leave out entries not updated for their slot's expire time.
	ExpireTime *hashtablepb.SlotExpireTimeConfig
	// SkipZeroEmbedding drops zero embeddings (squared L2 norm below the smallest normal float):
	// Assign erases the entry instead of storing zeros, Restore skips the dump
	// (skip_zero_embedding, for serving tables).
	SkipZeroEmbedding bool
	// InitialCapacity is how many entries the table makes room for up front.
	InitialCapacity int
	// Stripes is the number of independently locked parts, a power of two up to 1<<16
	// (0: 64, or 8 per CPU when that is more).
	Stripes int
	// Workers is how many goroutines a batched call uses at most (0: GOMAXPROCS).
	Workers int
}

// Table is the collisionless embedding hash table. Its methods are safe for concurrent use:
// lookups share the stripes' locks, updates of different stripes run in parallel.
type Table struct {
	g      geom
	opt    Optimizer
	init   Initializer
	filter EntryFilter
	expire expiry
	// nLR is the number of learning rates Apply takes.
	nLR int
	// skipZero is Config.SkipZeroEmbedding.
	skipZero bool

	stripes     []stripe
	stripeShift uint
	workers     atomic.Int32
	// maxUpdateTs is the latest update time seen (applies, assigns, restores): eviction measures
	// age from it rather than from the wall clock, as the reference does.
	maxUpdateTs atomic.Int64
	// track makes applies and assigns mark the entries they update (TrackTouched).
	track atomic.Bool
}

// New returns an empty table.
func New(cfg Config) (*Table, error) {
	switch {
	case cfg.Dim <= 0:
		return nil, errkind.New(errkind.Value, "embedding table: dimension %d, want > 0", cfg.Dim)
	case cfg.Optimizer == nil:
		return nil, errkind.New(errkind.Value, "embedding table: no optimizer")
	case cfg.Initializer == nil:
		return nil, errkind.New(errkind.Value, "embedding table: no initializer")
	case cfg.Optimizer.Dim() != cfg.Dim:
		return nil, errkind.New(errkind.Value, "embedding table: optimizer dimension %d, table dimension %d", cfg.Optimizer.Dim(), cfg.Dim)
	case cfg.Optimizer.StateSize() < 0:
		return nil, errkind.New(errkind.Value, "embedding table: optimizer state size %d", cfg.Optimizer.StateSize())
	}
	ns := stripeCount(cfg.Stripes)
	if ns < 1 || ns > 1<<16 || ns&(ns-1) != 0 {
		return nil, errkind.New(errkind.Value, "embedding table: %d stripes, want a power of two in [1, 65536]", ns)
	}
	nLR := max(cfg.LearningRates, 1)
	if ss, ok := cfg.Optimizer.(interface{ SliceSize() int }); ok {
		nLR = ss.SliceSize()
	}
	if cfg.InitialCapacity < 0 || cfg.InitialCapacity > MaxInitialCapacity {
		return nil, errkind.New(errkind.Value, "embedding table: initial capacity %d, want 0 to %d (MaxInitialCapacity)", cfg.InitialCapacity, MaxInitialCapacity)
	}
	if cfg.Workers < 0 {
		return nil, errkind.New(errkind.Value, "embedding table: %d workers", cfg.Workers)
	}
	exp, err := newExpiry(cfg.ExpireTime)
	if err != nil {
		return nil, fmt.Errorf("embedding table: %w", err)
	}
	t := &Table{
		g:           newGeom(cfg.Dim, cfg.Optimizer.StateSize()),
		opt:         cfg.Optimizer,
		init:        cfg.Initializer,
		filter:      cfg.Filter,
		expire:      exp,
		skipZero:    cfg.SkipZeroEmbedding,
		nLR:         nLR,
		stripes:     make([]stripe, ns),
		stripeShift: uint(64 - bits.TrailingZeros(uint(ns))),
	}
	t.SetWorkers(cfg.Workers)
	if cfg.InitialCapacity > 0 {
		per := (cfg.InitialCapacity + ns - 1) / ns
		for i := range t.stripes {
			t.stripes[i].reserve(t.g, per)
		}
	}
	return t, nil
}

// MaxInitialCapacity is the most entries a table may make room for up front (Config's
// InitialCapacity, the reference's initial_capacity): 1<<40, a thousand times the entries of the
// largest tables, so that the sizes computed from it cannot overflow. Its memory (ReserveBytes)
// is what bounds it in practice.
const MaxInitialCapacity = 1 << 40

// stripeCount is the number of stripes of Config.Stripes n (0: the default).
func stripeCount(n int) int {
	if n == 0 {
		return max(64, 1<<bits.Len(uint(8*runtime.GOMAXPROCS(0)-1)))
	}
	return n
}

// ReserveBytes is the memory New allocates up front for cfg's InitialCapacity (every stripe's
// slots and rows), in bytes, math.MaxInt64 when that does not fit; 0 without an initial capacity
// or an optimizer.
func (cfg Config) ReserveBytes() int64 {
	if cfg.InitialCapacity <= 0 || cfg.Optimizer == nil || cfg.Dim <= 0 {
		return 0
	}
	if cfg.InitialCapacity > MaxInitialCapacity {
		return math.MaxInt64
	}
	ns := max(stripeCount(cfg.Stripes), 1)
	per := (cfg.InitialCapacity + ns - 1) / ns
	slots := minSlots
	for per*maxLoadDen > slots*maxLoadNum {
		slots *= 2
	}
	perSlot := float64(unsafe.Sizeof(slotHeader{})) + 4*float64(cfg.Dim+max(cfg.Optimizer.StateSize(), 0))
	if b := float64(ns) * float64(slots) * perSlot; b < math.MaxInt64 {
		return int64(b)
	}
	return math.MaxInt64
}

// Dim is the embedding dimension.
func (t *Table) Dim() int { return t.g.dim }

// SetWorkers sets how many goroutines a batched call uses at most (0: GOMAXPROCS).
func (t *Table) SetWorkers(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	t.workers.Store(int32(n))
}

// stripeOf is the stripe of a hash.
func (t *Table) stripeOf(h uint64) *stripe { return &t.stripes[h>>t.stripeShift] }

// Batched calls work through their ids in blocks, in three stages a few blocks apart (a software
// pipeline): prefetch the headers of the ids' home slots; find each id's slot in those cached
// headers and prefetch its row; copy or update the row. Fetching the home slot's row along with
// its header instead fetched the wrong row for the quarter of the ids not in their home slot,
// which then missed the cache when used: the extra stage made lookups of 16 floats 1.3x as fast
// and applies 1.3x to 1.5x. The sizes were picked by measurement (within the noise of a shared
// machine: lookups from 16 to 64 ids per block and 1 to 2 blocks per stage; applies of fewer ids
// in flight, as they do more per id, and 8 per block did best).
const (
	lookupBlock   = 64
	lookupFindLag = 1
	lookupCopyLag = 1
	// lookupAddrs bounds the prefetch addresses of one block of a lookup: the lines of each id's
	// embedding, as many as fit.
	lookupAddrs    = lookupBlock * 6
	applyBlock     = 8
	applyFindLag   = 2
	applyUpdateLag = 2
	// addrsLen bounds the prefetch addresses of one block of an apply (a few per id: the
	// gradient's and the row's lines).
	addrsLen = applyBlock * 12
)

// Lookup writes the embedding of ids[i] to out[i*Dim:(i+1)*Dim] and returns how many ids have
// an entry. An id without one reads as zeros and is not inserted (the reference's lookup).
func (t *Table) Lookup(ids []int64, out []float32) (int, error) {
	if err := checkDim("embedding lookup", len(out), len(ids), t.g.dim); err != nil {
		return 0, errkind.Wrap(errkind.Value, err)
	}
	workers := t.workersFor(len(ids))
	hits := make([]int, workers)
	parallel(workers, func(w int) {
		lo, hi := span(len(ids), workers, w)
		// Each worker read-locks every stripe for its whole share, in stripe order (writers hold
		// one stripe at a time, so this cannot deadlock): 2 x stripes atomic operations per
		// worker and batch instead of two per id, and no grouping of the ids by stripe.
		unlock := t.lockAll(false)
		defer unlock()
		hits[w] = t.lookupRange(ids, out, lo, hi)
	})
	n := 0
	for _, h := range hits {
		n += h
	}
	return n, nil
}

// lookupRange looks up ids[lo:hi] with every stripe read-locked, lookupBlock ids at a time, so
// that the memory accesses of many ids overlap (the stages above). Loads instead of prefetches
// would not do: the CPU cannot retire a load before its data arrives, so the work on earlier
// blocks would wait behind them, and a mispredicted branch on a missing load throws away the
// loads issued after it.
func (t *Table) lookupRange(ids []int64, out []float32, lo, hi int) int {
	g, shift := t.g, t.stripeShift
	dim := g.dim
	stripes := t.stripes
	const ring = lookupFindLag + lookupCopyLag + 1
	var (
		hashes [ring][lookupBlock]uint64
		slots  [lookupCopyLag + 1][lookupBlock]int32
		addrs  [lookupAddrs]uintptr
		found  int
	)
	blk := func(b int) int { return (b - lo) / lookupBlock }
	for b := lo; b < hi+(lookupFindLag+lookupCopyLag)*lookupBlock; b += lookupBlock {
		// Stage 1: the home slots' headers.
		if b < hi {
			hs := &hashes[blk(b)%ring]
			e := min(b+lookupBlock, hi)
			n := 0
			for i := b; i < e; i++ {
				h := mix(ids[i])
				hs[i-b] = h
				if s := &stripes[h>>shift]; s.nslots > 0 {
					addrs[n] = uintptr(unsafe.Pointer(&s.hdrs[int(h)&(s.nslots-1)]))
					n++
				}
			}
			prefetch(addrs[:n])
		}
		// Stage 2: find the slots (their headers are cached) and fetch their rows.
		if fb := b - lookupFindLag*lookupBlock; fb >= lo && fb < hi {
			hs := &hashes[blk(fb)%ring]
			ps := &slots[blk(fb)%(lookupCopyLag+1)]
			e := min(fb+lookupBlock, hi)
			n := 0
			for i := fb; i < e; i++ {
				h := hs[i-fb]
				s := &stripes[h>>shift]
				p := s.find(g, ids[i], h)
				ps[i-fb] = int32(p)
				if p >= 0 {
					n = s.embLines(g, p, addrs[:], n)
				}
			}
			prefetch(addrs[:n])
		}
		// Stage 3: copy the rows.
		if cb := b - (lookupFindLag+lookupCopyLag)*lookupBlock; cb >= lo {
			hs := &hashes[blk(cb)%ring]
			ps := &slots[blk(cb)%(lookupCopyLag+1)]
			e := min(cb+lookupBlock, hi)
			for i := cb; i < e; i++ {
				dst := out[i*dim : i*dim+dim]
				if p := int(ps[i-cb]); p >= 0 {
					copy(dst, stripes[hs[i-cb]>>shift].emb(g, p))
					found++
				} else {
					clear(dst)
				}
			}
		}
	}
	return found
}

// applyScratch is one worker's buffers for a stripe's share of an apply.
type applyScratch struct {
	cells  []int32
	uniq   []int32
	counts []int64
	sumRow []int32
	sum    []float32
	at     []int32 // the slot found for each distinct id, -1 when it has none
}

// Apply applies gradients: grads[i*Dim:(i+1)*Dim] is the gradient for ids[i]. Gradients of an id
// that appears more than once are summed first (in batch order) and the optimizer runs once per
// id, with learningRates (Config.LearningRates of them) and globalStep. An id without an entry
// gets one (initialized, then updated) unless the filter holds it back, counting its occurrences
// in this batch. Updated entries take updateTimeSec as their last update time and, with
// TrackTouched on, are marked touched (touched.go).
func (t *Table) Apply(ids []int64, grads []float32, learningRates []float32, globalStep, updateTimeSec int64) error {
	if err := checkDim("embedding apply", len(grads), len(ids), t.g.dim); err != nil {
		return errkind.Wrap(errkind.Value, err)
	}
	if len(learningRates) != t.nLR {
		return errkind.New(errkind.Value, "embedding apply: %d learning rates, the optimizer takes %d", len(learningRates), t.nLR)
	}
	t.noteUpdate(updateTimeSec)
	workers := t.workersFor(len(ids))
	p := t.makePlan(ids, workers)
	defer p.release()
	if len(p.scratch) < workers {
		p.scratch = append(p.scratch, make([]applyScratch, workers-len(p.scratch))...)
	}
	scratch := p.scratch
	p.missing = grow(p.missing, len(t.stripes))
	for i := range p.missing {
		p.missing[i] = p.missing[i][:0] // a pooled plan's lists are an earlier batch's
	}
	t.eachStripe(p, workers, func(w, si int, gr group) {
		sc := &scratch[w]
		t.combine(sc, grads, gr)
		p.missing[si] = t.applyStripe(&t.stripes[si], sc, gr, grads, learningRates, globalStep, uint32(updateTimeSec), p.missing[si])
	})
	// New entries are created on this goroutine, stripe after stripe, so that their initializers
	// draw in the same order whatever goroutine updated which stripe: with a random initializer,
	// a run is then repeatable (the shared generator's draws are not interleaved by the
	// scheduler).
	for si, miss := range p.missing {
		if len(miss) > 0 {
			gr := p.stripeGroup(si)
			t.combine(&scratch[0], grads, gr)
			t.createStripe(&t.stripes[si], &scratch[0], gr, miss, grads, learningRates, globalStep, uint32(updateTimeSec))
		}
	}
	return nil
}

// applyStripe applies the combined gradients in sc to their entries in s, in one pass over the
// distinct ids that prefetches a few blocks ahead (the pipeline above), and appends the distinct
// ids without an entry (positions in sc.uniq) to missing, which it returns (Apply creates them).
func (t *Table) applyStripe(s *stripe, sc *applyScratch, gr group, grads []float32, learningRates []float32, globalStep int64, ts uint32, missing []int32) []int32 {
	g := t.g
	dim := g.dim
	n := len(sc.uniq)
	sc.at = grow(sc.at, n)
	var addrs [addrsLen]uintptr
	track := t.track.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nslots == 0 {
		for u := range n {
			missing = append(missing, int32(u))
		}
		n = 0
	}
	// As lookupRange: the home slots' headers and the gradients; a block later, the slots (found
	// in the cached headers) and their rows; another block later, the update.
	const updateLag = applyFindLag + applyUpdateLag
	for b := 0; b < n+updateLag*applyBlock; b += applyBlock {
		if b < n {
			k := 0
			for u := b; u < min(b+applyBlock, n); u++ {
				gv := sc.grad(grads, gr, dim, u)
				addrs[k] = uintptr(unsafe.Pointer(&gv[0]))
				addrs[k+1] = uintptr(unsafe.Pointer(&gv[dim-1]))
				addrs[k+2] = uintptr(unsafe.Pointer(s.hdr(s.home(gr.hashes[sc.uniq[u]]))))
				k += 3
			}
			prefetch(addrs[:k])
		}
		if fb := b - applyFindLag*applyBlock; fb >= 0 && fb < n {
			k := 0
			for u := fb; u < min(fb+applyBlock, n); u++ {
				i := sc.uniq[u]
				p := s.find(g, gr.ids[i], gr.hashes[i])
				sc.at[u] = int32(p)
				if p >= 0 {
					k = s.rowLines(g, p, addrs[:], k)
				}
			}
			prefetch(addrs[:k])
		}
		if pb := b - updateLag*applyBlock; pb >= 0 {
			for u := pb; u < min(pb+applyBlock, n); u++ {
				p := int(sc.at[u])
				if p < 0 {
					missing = append(missing, int32(u))
					continue
				}
				hd := s.hdr(p)
				hd.ts = ts
				if track {
					s.touch(hd)
				}
				t.opt.Apply(s.emb(g, p), s.state(g, p), sc.grad(grads, gr, dim, u), learningRates, globalStep)
			}
		}
	}
	return missing
}

// createStripe applies the combined gradients in sc of the distinct ids at missing (positions in
// sc.uniq), which had no entry in s: each gets one (initialized, then updated) unless the filter
// holds it back. An id another apply created meanwhile is updated instead.
func (t *Table) createStripe(s *stripe, sc *applyScratch, gr group, missing []int32, grads []float32, learningRates []float32, globalStep int64, ts uint32) {
	g := t.g
	track := t.track.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserve(g, len(missing))
	for _, u32 := range missing {
		u := int(u32)
		k := sc.uniq[u]
		id := gr.ids[k]
		p := s.find(g, id, gr.hashes[k])
		if p < 0 {
			if t.filter != nil && t.filter.ShouldBeFiltered(id, sc.counts[u], absent{}) {
				continue
			}
			p = t.create(s, id, gr.hashes[k])
		}
		hd := s.hdr(p)
		hd.ts = ts
		if track {
			s.touch(hd)
		}
		t.opt.Apply(s.emb(g, p), s.state(g, p), sc.grad(grads, gr, g.dim, u), learningRates, globalStep)
	}
}

// combine lists the distinct ids of a stripe's group in sc.uniq (group positions of first
// occurrences) with their occurrence counts. The gradient of an id seen once stays where it is in
// grads; the gradients of a repeated id are summed, in batch order, into a row of sc.sum
// (sc.sumRow[u]).
func (t *Table) combine(sc *applyScratch, grads []float32, gr group) {
	dim := t.g.dim
	m := 1 << bits.Len(uint(2*len(gr.ids)-1))
	sc.cells = grow(sc.cells, m)
	clear(sc.cells)
	sc.uniq = sc.uniq[:0]
	sc.counts = sc.counts[:0]
	sc.sumRow = sc.sumRow[:0]
	sc.sum = sc.sum[:0]
	mask := uint64(m - 1)
	for k, id := range gr.ids {
		for p := gr.hashes[k] & mask; ; p = (p + 1) & mask {
			u1 := sc.cells[p]
			if u1 == 0 {
				sc.cells[p] = int32(len(sc.uniq) + 1)
				sc.uniq = append(sc.uniq, int32(k))
				sc.counts = append(sc.counts, 1)
				sc.sumRow = append(sc.sumRow, -1)
				break
			}
			u := int(u1 - 1)
			if gr.ids[sc.uniq[u]] != id {
				continue
			}
			sc.counts[u]++
			if sc.sumRow[u] < 0 {
				first := int(gr.pos[sc.uniq[u]]) * dim
				sc.sumRow[u] = int32(len(sc.sum) / dim)
				sc.sum = append(sc.sum, grads[first:first+dim]...)
			}
			dst := sc.sum[int(sc.sumRow[u])*dim : int(sc.sumRow[u])*dim+dim]
			i := int(gr.pos[k]) * dim
			for j, v := range grads[i : i+dim] {
				dst[j] += v
			}
			break
		}
	}
}

// grad returns the combined gradient of sc.uniq[u].
func (sc *applyScratch) grad(grads []float32, gr group, dim, u int) []float32 {
	if r := int(sc.sumRow[u]); r >= 0 {
		return sc.sum[r*dim : r*dim+dim]
	}
	i := int(gr.pos[sc.uniq[u]]) * dim
	return grads[i : i+dim]
}

// create inserts a new entry for id into s (locked), initialized by the initializer and the
// optimizer, and returns its slot.
func (t *Table) create(s *stripe, id int64, h uint64) int {
	p := s.insert(t.g, id, h)
	t.init.Initialize(s.emb(t.g, p))
	t.opt.Init(s.state(t.g, p))
	return p
}

// absent is the table as the filter sees it for an id being admitted: the caller checked that
// the id has no entry, and holds its stripe's lock, so the filter must not ask the table itself.
type absent struct{}

func (absent) Contains(int64) bool { return false }

// noteUpdate raises maxUpdateTs to ts.
func (t *Table) noteUpdate(ts int64) {
	for {
		cur := t.maxUpdateTs.Load()
		if ts <= cur || t.maxUpdateTs.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// MaxUpdateTsSec is the latest update time the table has seen (0 before any).
func (t *Table) MaxUpdateTsSec() int64 { return t.maxUpdateTs.Load() }

// Assign sets the embeddings of ids to values (rows of Dim floats) with update time
// updateTimeSec, creating entries as needed (initialized optimizer state) unless the filter
// holds an id back, each occurrence counting once (the reference's assign). With
// SkipZeroEmbedding a zero value erases the id's entry instead. With TrackTouched on, the
// assigned entries are marked touched.
func (t *Table) Assign(ids []int64, values []float32, updateTimeSec int64) error {
	return t.assign("embedding assign", ids, values, updateTimeSec, false)
}

// AssignAdd adds values to the embeddings of ids, as Assign does otherwise.
func (t *Table) AssignAdd(ids []int64, values []float32, updateTimeSec int64) error {
	return t.assign("embedding assign add", ids, values, updateTimeSec, true)
}

func (t *Table) assign(what string, ids []int64, values []float32, updateTimeSec int64, add bool) error {
	if err := checkDim(what, len(values), len(ids), t.g.dim); err != nil {
		return errkind.Wrap(errkind.Value, err)
	}
	t.noteUpdate(updateTimeSec)
	g := t.g
	track := t.track.Load()
	for i, id := range ids {
		h := mix(id)
		s := t.stripeOf(h)
		v := values[i*g.dim : (i+1)*g.dim]
		s.mu.Lock()
		p := s.find(g, id, h)
		if !add && t.skipZero && isZero(v) {
			if p >= 0 {
				s.remove(g, p)
			}
			s.mu.Unlock()
			continue
		}
		if p < 0 {
			if t.filter != nil && t.filter.ShouldBeFiltered(id, 1, absent{}) {
				s.mu.Unlock()
				continue
			}
			p = t.create(s, id, h)
		}
		hd := s.hdr(p)
		hd.ts = uint32(updateTimeSec)
		if track {
			s.touch(hd)
		}
		emb := s.emb(g, p)
		if add {
			for k := range emb {
				emb[k] += v[k]
			}
		} else {
			copy(emb, v)
		}
		s.mu.Unlock()
	}
	return nil
}

// isZero is the reference's test of a zero embedding: IsAlmostEqual(L2NormSquare(v), 0), which
// holds when the float32 sum of squares is below the smallest normal float32.
func isZero(v []float32) bool {
	var sum float32
	for _, x := range v {
		sum += x * x
	}
	return sum < 0x1p-126
}

// Contains reports whether id has an entry.
func (t *Table) Contains(id int64) bool {
	h := mix(id)
	s := t.stripeOf(h)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.find(t.g, id, h) >= 0
}

// LookupEntry returns id's entry as the dump holds it, or false when it has none.
func (t *Table) LookupEntry(id int64) (*hashtablepb.EntryDump, bool) {
	h := mix(id)
	s := t.stripeOf(h)
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.find(t.g, id, h)
	if p < 0 {
		return nil, false
	}
	return t.entryDump(s, p), true
}

// entryDump builds the dump of slot p of s (locked).
func (t *Table) entryDump(s *stripe, p int) *hashtablepb.EntryDump {
	hd := s.hdr(p)
	id, ts := hd.key, int64(hd.ts)
	return &hashtablepb.EntryDump{
		Id:              &id,
		Num:             append([]float32(nil), s.emb(t.g, p)...),
		Opt:             t.opt.Dump(s.state(t.g, p)),
		LastUpdateTsSec: &ts,
	}
}

// Size is the number of entries.
func (t *Table) Size() int {
	n := 0
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.RLock()
		n += s.count
		s.mu.RUnlock()
	}
	return n
}

// MemoryBytes is the memory the table's entries occupy: indexes, rows (with their chunks'
// unused capacity) and free lists.
func (t *Table) MemoryBytes() int64 {
	var n int64
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.RLock()
		n += s.memoryBytes()
		s.mu.RUnlock()
	}
	return n
}

// Clear removes every entry and releases their memory.
func (t *Table) Clear() {
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		s.reset()
		s.mu.Unlock()
	}
}

// lockAll write-locks (or read-locks) every stripe in order and returns the matching unlock.
func (t *Table) lockAll(write bool) (unlock func()) {
	for i := range t.stripes {
		if write {
			t.stripes[i].mu.Lock()
		} else {
			t.stripes[i].mu.RLock()
		}
	}
	return func() {
		for i := range t.stripes {
			if write {
				t.stripes[i].mu.Unlock()
			} else {
				t.stripes[i].mu.RUnlock()
			}
		}
	}
}

var tmpVariant = 3
