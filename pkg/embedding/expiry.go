package embedding

import (
	"context"
	"log/slog"
	"time"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/pkg/errkind"
)

const secPerDay = 24 * 60 * 60

// expiry holds the expire time of every v2 slot in seconds (SlotExpireTimeConfig's days).
type expiry struct {
	secs []int64
}

func newExpiry(cfg *hashtablepb.SlotExpireTimeConfig) (expiry, error) {
	if cfg == nil {
		cfg = &hashtablepb.SlotExpireTimeConfig{}
	}
	secs := make([]int64, maxSlotNumber)
	def := int64(cfg.GetDefaultExpireTime()) * secPerDay
	for i := range secs {
		secs[i] = def
	}
	for _, se := range cfg.GetSlotExpireTimes() {
		if se.GetSlot() >= maxSlotNumber {
			return expiry{}, errkind.New(errkind.Value, "slot expire time: slot %d, want < %d", se.GetSlot(), maxSlotNumber)
		}
		secs[se.GetSlot()] = int64(se.GetExpireTime()) * secPerDay
	}
	return expiry{secs: secs}, nil
}

// expired is the reference's rule: an entry is stale when the time since its last update,
// measured from maxUpdateTs, reaches its slot's expire time.
func (e expiry) expired(id int64, ts uint32, maxUpdateTs int64) bool {
	return maxUpdateTs-int64(ts) >= e.secs[SlotIDv2(id)]
}

// Evict removes the entries not updated for their slot's expire time as of maxUpdateTsSec (the
// reference evicts as of the table's latest update time: MaxUpdateTsSec) and returns how many it
// removed. Their rows are reused by later entries.
func (t *Table) Evict(maxUpdateTsSec int64) int {
	workers := min(int(t.workers.Load()), len(t.stripes))
	counts := make([]int, workers)
	parallel(workers, func(w int) {
		lo, hi := span(len(t.stripes), workers, w)
		for si := lo; si < hi; si++ {
			counts[w] += t.evictStripe(&t.stripes[si], maxUpdateTsSec)
		}
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func (t *Table) evictStripe(s *stripe, maxUpdateTs int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stale []int64
	s.each(t.g, func(hd *slotHeader, _ int) bool {
		if t.expire.expired(hd.key, hd.ts, maxUpdateTs) {
			stale = append(stale, hd.key)
		}
		return true
	})
	// Removing shifts slots, so each stale id is found again rather than removed where the scan
	// saw it.
	for _, id := range stale {
		s.remove(t.g, s.find(t.g, id, mix(id)))
	}
	// A stripe that shrank to under a quarter of its bound gives memory back.
	if ns := s.nslots; ns > minSlots && 4*s.count*maxLoadDen <= ns*maxLoadNum {
		for ns > minSlots && 2*s.count*maxLoadDen <= (ns/2)*maxLoadNum {
			ns /= 2
		}
		s.rehash(t.g, ns)
	}
	return len(stale)
}

// RunEviction evicts stale entries every interval (the reference's feature eviction thread,
// enable_feature_eviction with feature_evict_every_n_hours), as of MaxUpdateTsSec, until ctx is
// done.
func (t *Table) RunEviction(ctx context.Context, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			max := t.MaxUpdateTsSec()
			start := time.Now()
			n := t.Evict(max)
			log.Info("embedding table eviction", "evicted", n, "max_update_ts_sec", max, "entries", t.Size(), "took", time.Since(start))
		}
	}
}
