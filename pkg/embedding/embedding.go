// Package embedding is Monolith's collisionless embedding hash table
// (monolith/native_training/runtime/hash_table): every int64 id gets an entry of its own (an
// embedding, its optimizer state and its last update time), created when a gradient is first
// applied to it, evicted when it has not been updated for its slot's expire time, and dumped to
// and restored from sharded EntryDump TFRecord files. Ids can be held back from the table until
// they have been seen often enough (the reference's hash filters: filter.go).
//
// Layout, for cache-friendly batches: the table is split into stripes by the top bits of the id's
// hash, each with its own lock and an open-addressing table (linear probing) whose slots hold the
// entry inline: id, update time, embedding and optimizer state (stripe.go). Batched calls work
// through their ids in blocks, prefetching each block's slots a few blocks ahead, and spread the
// ids over worker goroutines, so a batch runs on all cores and takes each lock once per worker.
package embedding

import (
	"fmt"

	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
)

// Optimizer updates an entry's embedding from its gradient, keeping StateSize floats of state
// per entry (pkg/embedding/optimizer implements the reference's optimizers). Apply and Init are
// called with the entry's stripe locked, possibly for different entries at once: an Optimizer
// must be safe for concurrent use on distinct rows.
type Optimizer interface {
	// Dim is the embedding dimension the optimizer was configured for.
	Dim() int
	// StateSize is how many floats of optimizer state an entry keeps.
	StateSize() int
	// Init sets the state of a new entry.
	Init(state []float32)
	// Apply updates emb and state by grad (the sum of the batch's gradients for the entry).
	Apply(emb, state, grad []float32, learningRates []float32, globalStep int64)
	// Dump returns the state as the EntryDump's optimizer dump.
	Dump(state []float32) *optimizerpb.OptimizerDump
	// Load sets the state from an optimizer dump; a dump that does not fit is an error.
	Load(state []float32, dump *optimizerpb.OptimizerDump) error
}

// Initializer sets the embedding of a new entry (the reference's zeros, constants and random
// uniform initializers). It must be safe for concurrent use.
type Initializer interface {
	Initialize(emb []float32)
}

// Shard is the parameter server an id belongs to among n: tf.math.floormod(id, n), the rule of
// the reference's DistributedHashTable (distributed_ps.py), so negative ids map to [0, n) too.
func Shard(id int64, n int) int {
	m := id % int64(n)
	if m < 0 {
		m += int64(n)
	}
	return int(m)
}

// SlotIDv2 is the feature slot of a v2 feature id (reader_util.h's slot_id_v2): bits 48..62.
// Per-slot expire times and occurrence thresholds are looked up by it.
func SlotIDv2(id int64) int {
	return int((uint64(id) >> 48) & (1<<15 - 1))
}

// maxSlotNumber is the number of v2 slots (get_max_slot_number).
const maxSlotNumber = 1 << 15

// checkDim reports a vector whose length is not n rows of dim floats.
func checkDim(what string, got, rows, dim int) error {
	if got != rows*dim {
		return fmt.Errorf("%s: %d floats for %d ids of dimension %d, want %d", what, got, rows, dim, rows*dim)
	}
	return nil
}
