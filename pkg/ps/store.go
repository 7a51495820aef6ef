package ps

import (
	"context"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// RouterStore is a Router as a worker model's embedding store (pkg/trainer/dnn's
// EmbeddingStore): each call names one table, whose dimension follows from the buffer lengths.
type RouterStore struct {
	Router *Router
	// Now stamps the updates (the entries' update time, which expiry measures); nil: time.Now.
	Now func() time.Time
}

// Lookup writes the embeddings of ids to out (len(out)/len(ids) floats each).
func (s RouterStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	if len(ids) == 0 {
		return nil
	}
	if len(out)%len(ids) != 0 {
		return errkind.New(errkind.Value, "ps store: lookup in table %q: %d output floats for %d ids", table, len(out), len(ids))
	}
	_, err := s.Router.Lookup(ctx, table, len(out)/len(ids), ids, out)
	return err
}

// Apply applies grads (len(grads)/len(ids) per id) to the entries of ids at global step step with
// learning rates lr (one per segment of the table; none: the table's own).
func (s RouterStore) Apply(ctx context.Context, table string, ids []int64, grads []float32, step int64, lr []float32) error {
	if len(ids) == 0 {
		return nil
	}
	if len(grads)%len(ids) != 0 {
		return errkind.New(errkind.Value, "ps store: apply to table %q: %d gradient floats for %d ids", table, len(grads), len(ids))
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	return s.Router.ApplyGradients(ctx, table, len(grads)/len(ids), ids, grads,
		Update{GlobalStep: step, LearningRates: lr, UpdateTimeSec: now().Unix()})
}
