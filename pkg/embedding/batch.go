package embedding

import (
	"sync"
	"sync/atomic"
)

// minIDsPerWorker keeps small batches on fewer goroutines: below it, starting one costs more than
// the lookups it would take over.
const minIDsPerWorker = 2048

// plan groups a batch's ids by stripe: stripe s's share is [starts[s], starts[s+1]) of ids (the
// ids), hashes (their hashes) and pos (their positions in the batch), in batch order. Copying the
// ids and hashes into stripe order makes the per-stripe passes read them sequentially; keeping
// batch order within a stripe makes duplicate gradients sum in the order the reference sums them.
type plan struct {
	ids    []int64
	hashes []uint64
	pos    []int32
	starts []int32
	// counts is workers x stripes histogram scratch (then write offsets).
	counts []int32
	// scratch is the workers' apply buffers, kept with the plan between batches.
	scratch []applyScratch
	// missing lists, per stripe, the distinct ids (positions in the stripe's combined ids) an
	// apply found without an entry.
	missing [][]int32
}

// stripeGroup is stripe s's share of the plan.
func (p *plan) stripeGroup(s int) group {
	lo, hi := p.starts[s], p.starts[s+1]
	return group{ids: p.ids[lo:hi], hashes: p.hashes[lo:hi], pos: p.pos[lo:hi]}
}

// group is one stripe's share of a plan.
type group struct {
	ids    []int64
	hashes []uint64
	pos    []int32
}

var planPool = sync.Pool{New: func() any { return new(plan) }}

// workersFor is how many goroutines a batch of n ids gets.
func (t *Table) workersFor(n int) int {
	w := int(t.workers.Load())
	if most := (n + minIDsPerWorker - 1) / minIDsPerWorker; w > most {
		w = most
	}
	return max(w, 1)
}

// parallel runs fn(0..workers-1), the first on the calling goroutine, and waits for all.
func parallel(workers int, fn func(w int)) {
	if workers <= 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			fn(w)
		}()
	}
	fn(0)
	wg.Wait()
}

// span is worker w's share [lo, hi) of n items among workers.
func span(n, workers, w int) (lo, hi int) {
	return n * w / workers, n * (w + 1) / workers
}

// makePlan groups ids by stripe with a counting sort, in parallel over workers: each worker
// counts its share's ids per stripe, then places them at offsets that put the workers' shares of
// a stripe one after the other (so batch order is kept).
func (t *Table) makePlan(ids []int64, workers int) *plan {
	p := planPool.Get().(*plan)
	n := len(ids)
	ns := len(t.stripes)
	p.ids = grow(p.ids, n)
	p.hashes = grow(p.hashes, n)
	p.pos = grow(p.pos, n)
	p.starts = grow(p.starts, ns+1)
	p.counts = grow(p.counts, workers*ns)
	clear(p.counts)
	shift := t.stripeShift
	parallel(workers, func(w int) {
		lo, hi := span(n, workers, w)
		cnt := p.counts[w*ns : (w+1)*ns]
		for _, id := range ids[lo:hi] {
			cnt[mix(id)>>shift]++
		}
	})
	var off int32
	for s := 0; s < ns; s++ {
		p.starts[s] = off
		for w := 0; w < workers; w++ {
			c := p.counts[w*ns+s]
			p.counts[w*ns+s] = off
			off += c
		}
	}
	p.starts[ns] = off
	parallel(workers, func(w int) {
		lo, hi := span(n, workers, w)
		next := p.counts[w*ns : (w+1)*ns]
		for i := lo; i < hi; i++ {
			id := ids[i]
			h := mix(id)
			k := next[h>>shift]
			next[h>>shift]++
			p.ids[k], p.hashes[k], p.pos[k] = id, h, int32(i)
		}
	})
	return p
}

func (p *plan) release() { planPool.Put(p) }

// eachStripe runs fn for every stripe with ids in the plan, spreading stripes over workers that
// take the next unclaimed stripe until none is left.
func (t *Table) eachStripe(p *plan, workers int, fn func(w, s int, gr group)) {
	var next atomic.Int32
	ns := int32(len(t.stripes))
	parallel(workers, func(w int) {
		for {
			s := next.Add(1) - 1
			if s >= ns {
				return
			}
			if p.starts[s+1] > p.starts[s] {
				fn(w, int(s), p.stripeGroup(int(s)))
			}
		}
	})
}

// grow returns b with length n, reusing its array when large enough.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
