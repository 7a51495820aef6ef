package trainstatus

import (
	"context"
	"time"

	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// timedStore is an embedding store whose calls are timed into the status's histograms.
type timedStore struct {
	store dnn.EmbeddingStore
	s     *Status
}

// TimedStore is store with each call's latency recorded in s (ps_lookup_seconds,
// ps_apply_seconds, by table).
func TimedStore(store dnn.EmbeddingStore, s *Status) dnn.EmbeddingStore {
	return timedStore{store: store, s: s}
}

func (t timedStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	start := time.Now()
	err := t.store.Lookup(ctx, table, ids, out)
	t.s.lookup.WithLabelValues(table).Observe(time.Since(start).Seconds())
	return err
}

func (t timedStore) Apply(ctx context.Context, table string, ids []int64, grads []float32, step int64, lr []float32) error {
	start := time.Now()
	err := t.store.Apply(ctx, table, ids, grads, step, lr)
	t.s.apply.WithLabelValues(table).Observe(time.Since(start).Seconds())
	return err
}
