package embedding

import "github.com/monolith-go/monolith/pkg/errkind"

// EachEntry hands every entry of the table to fn, in batches of at most max ids: ids[k] and its
// current embedding, embs[k*Dim:(k+1)*Dim] (parameter sync's catch-up push of a serving replica
// that missed updates). fn must not keep the slices and runs without the table's locks held; each
// stripe is copied under its read lock (applies to it wait that long), so an entry updated during
// the call is handed with its value before or after the update. It returns how many ids it handed
// to fn without error; an error from fn ends the walk and is returned.
func (t *Table) EachEntry(max int, fn func(ids []int64, embs []float32) error) (int, error) {
	if max <= 0 {
		return 0, errkind.New(errkind.Value, "embedding each entry: batch of %d ids, want > 0", max)
	}
	g := t.g
	var ids []int64
	var embs []float32
	handed := 0
	for i := range t.stripes {
		s := &t.stripes[i]
		ids, embs = ids[:0], embs[:0]
		s.mu.RLock()
		s.each(g, func(hd *slotHeader, p int) bool {
			ids = append(ids, hd.key)
			embs = append(embs, s.emb(g, p)...)
			return true
		})
		s.mu.RUnlock()
		for lo := 0; lo < len(ids); lo += max {
			hi := min(lo+max, len(ids))
			if err := fn(ids[lo:hi], embs[lo*g.dim:hi*g.dim]); err != nil {
				return handed, err
			}
			handed += hi - lo
		}
	}
	return handed, nil
}
