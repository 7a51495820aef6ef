package dnn

import "context"

// EmbeddingStore holds the embedding tables: the parameter servers behind their router in a
// cluster, or a table in this process. Every call names one table; dimensions follow from the
// buffer lengths (len(out) and len(grads) are len(ids) times the table's dimension).
type EmbeddingStore interface {
	// Lookup writes the embedding of ids[i] to out[i*dim:(i+1)*dim]. An id without an entry
	// reads as zeros (the reference's lookup does not insert).
	Lookup(ctx context.Context, table string, ids []int64, out []float32) error
	// Apply updates the entries of ids by grads (dim floats per id) with the table's optimizer,
	// at global step step with learning rates lr, creating missing entries. The model sends each
	// id once per call, its gradients over the batch already summed.
	Apply(ctx context.Context, table string, ids []int64, grads []float32, step int64, lr []float32) error
}
