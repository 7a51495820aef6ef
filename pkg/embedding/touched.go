package embedding

import (
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Touched entries are what real-time parameter sync pushes (pkg/paramsync): the entries updated
// since the last push, with their current embeddings. With tracking on, an apply or assign that
// updates an entry sets the touchedBit in its slot header (a line the update writes anyway, for
// the update time) and, when the bit was clear, appends the id to its stripe's touched list; so an
// entry updated a thousand times between two pushes is listed once, and the hot path pays one
// predictable branch per id. Taking walks the lists, not the table: a push costs what was touched.
//
// The list may name ids that no longer have the bit: an entry removed (evicted, or assigned zeros
// with SkipZeroEmbedding) and created again is listed twice. Taking skips an id whose entry is gone
// or whose bit is clear, so such leftovers cost a lookup each and are dropped.

// takeChunk bounds how many listed ids TakeTouched resolves under one hold of a stripe's lock, so
// that the applies of that stripe wait at most that long.
const takeChunk = 1024

// TrackTouched turns on (or off) the marking of updated entries for TakeTouched. Entries updated
// while it is off are not marked; turning it off keeps what is marked.
func (t *Table) TrackTouched(on bool) { t.track.Store(on) }

// touch marks the entry whose header is hd as touched (s locked).
func (s *stripe) touch(hd *slotHeader) {
	if hd.meta&touchedBit == 0 {
		hd.meta |= touchedBit
		s.touched = append(s.touched, hd.key)
	}
}

// TouchedPending is how many ids the touched lists hold: an upper bound of what TakeTouched would
// hand now (an id listed twice or removed since counts too).
func (t *Table) TouchedPending() int {
	n := 0
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.RLock()
		n += len(s.touched)
		s.mu.RUnlock()
	}
	return n
}

// TakeTouched hands the entries updated since they were last taken to fn, in batches of at most
// max ids: ids[k] and its current embedding, embs[k*Dim:(k+1)*Dim]. fn must not keep the slices
// (they are reused) and runs without any of the table's locks held. Each entry is handed once
// however often it was updated, and is no longer touched once handed: an update after that marks
// it again, for the next call. The entries updated during the call may or may not be handed by
// it. It returns how many ids it handed to fn without error.
//
// An error from fn ends the walk: the ids of the failed batch are marked touched again (Retouch)
// and so are those not handed yet, so nothing is lost; the error is returned.
func (t *Table) TakeTouched(max int, fn func(ids []int64, embs []float32) error) (int, error) {
	if max <= 0 {
		return 0, errkind.New(errkind.Value, "embedding take touched: batch of %d ids, want > 0", max)
	}
	g := t.g
	ids := make([]int64, 0, min(max, takeChunk))
	embs := make([]float32, 0, cap(ids)*g.dim)
	handed := 0
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		if err := fn(ids, embs); err != nil {
			t.Retouch(ids)
			return err
		}
		handed += len(ids)
		ids, embs = ids[:0], embs[:0]
		return nil
	}
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		listed := s.touched
		s.touched = nil
		s.mu.Unlock()
		for lo := 0; lo < len(listed); {
			s.mu.Lock()
			hi := min(lo+takeChunk, len(listed))
			for k := lo; k < hi && len(ids) < max; k++ {
				id := listed[k]
				lo = k + 1
				p := s.find(g, id, mix(id))
				if p < 0 {
					continue
				}
				hd := s.hdr(p)
				if hd.meta&touchedBit == 0 {
					continue
				}
				hd.meta &^= touchedBit
				ids = append(ids, id)
				embs = append(embs, s.emb(g, p)...)
			}
			s.mu.Unlock()
			if len(ids) < max {
				continue
			}
			if err := flush(); err != nil {
				// The ids of listed[lo:] still have their bit: they go back on the list.
				s.mu.Lock()
				s.touched = append(s.touched, listed[lo:]...)
				s.mu.Unlock()
				return handed, err
			}
		}
	}
	return handed, flush()
}

// Retouch marks the entries of ids touched again (a push that reached no replica gives them back).
// Ids without an entry are skipped.
func (t *Table) Retouch(ids []int64) {
	g := t.g
	for _, id := range ids {
		h := mix(id)
		s := t.stripeOf(h)
		s.mu.Lock()
		if p := s.find(g, id, h); p >= 0 {
			s.touch(s.hdr(p))
		}
		s.mu.Unlock()
	}
}
