package dnn

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// memStore is an in-memory EmbeddingStore for tests: per table a map from id to embedding, with
// the collisionless table's semantics (a missing id reads as zeros; Apply creates it, drawn
// uniformly from [-initRange, initRange] by a generator seeded by the table and id, then updates
// it) and per-entry Adagrad (or SGD when sgd is set). It rejects a batch that repeats an id, since
// the model promises distinct ids per call.
type memStore struct {
	seed      uint64
	initRange float32
	sgd       bool
	// frozen stores apply calls in applied instead of updating.
	frozen bool

	mu      sync.Mutex
	tables  map[string]map[int64]*memEntry
	dims    map[string]int
	applied []appliedCall
	// failLookup and failApply, when set, make calls on that table fail.
	failLookup, failApply string
}

type memEntry struct{ emb, acc []float32 }

type appliedCall struct {
	table string
	ids   []int64
	grads []float32
	step  int64
	lr    []float32
}

const memInitialAccumulator = 0.1

func newMemStore(seed uint64) *memStore {
	return &memStore{seed: seed, initRange: 0.05, tables: map[string]map[int64]*memEntry{}, dims: map[string]int{}}
}

// checkCall checks the buffer fits the ids and the table's dimension, recording it on first use.
func (s *memStore) checkCall(table string, ids []int64, n int) (int, error) {
	if len(ids) == 0 || n%len(ids) != 0 {
		return 0, fmt.Errorf("memstore: table %q: %d floats for %d ids", table, n, len(ids))
	}
	dim := n / len(ids)
	if d, ok := s.dims[table]; ok && d != dim {
		return 0, fmt.Errorf("memstore: table %q has dimension %d, call has %d", table, d, dim)
	}
	s.dims[table] = dim
	return dim, nil
}

func (s *memStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if table == s.failLookup {
		return fmt.Errorf("memstore: lookup in %q failed on purpose", table)
	}
	dim, err := s.checkCall(table, ids, len(out))
	if err != nil {
		return err
	}
	t := s.tables[table]
	for i, id := range ids {
		if e, ok := t[id]; ok {
			copy(out[i*dim:(i+1)*dim], e.emb)
		} else {
			clear(out[i*dim : (i+1)*dim])
		}
	}
	return nil
}

func (s *memStore) Apply(ctx context.Context, table string, ids []int64, grads []float32, step int64, lr []float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if table == s.failApply {
		return fmt.Errorf("memstore: apply to %q failed on purpose", table)
	}
	dim, err := s.checkCall(table, ids, len(grads))
	if err != nil {
		return err
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("memstore: table %q: id %d twice in one apply", table, id)
		}
		seen[id] = true
	}
	if s.frozen {
		s.applied = append(s.applied, appliedCall{table, slices.Clone(ids), slices.Clone(grads), step, slices.Clone(lr)})
		return nil
	}
	t := s.tables[table]
	if t == nil {
		t = map[int64]*memEntry{}
		s.tables[table] = t
	}
	for i, id := range ids {
		e, ok := t[id]
		if !ok {
			e = s.newEntry(table, id, dim)
			t[id] = e
		}
		for k, g := range grads[i*dim : (i+1)*dim] {
			if s.sgd {
				e.emb[k] -= lr[0] * g
				continue
			}
			e.acc[k] += g * g
			e.emb[k] -= lr[0] * g / float32(math.Sqrt(float64(e.acc[k])))
		}
	}
	return nil
}

func (s *memStore) newEntry(table string, id int64, dim int) *memEntry {
	h := fnv.New64a()
	h.Write([]byte(table))
	rng := rand.New(rand.NewPCG(s.seed^h.Sum64(), uint64(id)))
	e := &memEntry{emb: make([]float32, dim), acc: make([]float32, dim)}
	for k := range e.emb {
		e.emb[k] = (2*rng.Float32() - 1) * s.initRange
		e.acc[k] = memInitialAccumulator
	}
	return e
}

// set gives id an entry holding emb.
func (s *memStore) set(table string, id int64, emb []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[table]
	if t == nil {
		t = map[int64]*memEntry{}
		s.tables[table] = t
	}
	e, ok := t[id]
	if !ok {
		e = &memEntry{acc: make([]float32, len(emb))}
		t[id] = e
	}
	e.emb = slices.Clone(emb)
}

// get returns id's embedding, nil without an entry.
func (s *memStore) get(table string, id int64) []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.tables[table][id]; ok {
		return slices.Clone(e.emb)
	}
	return nil
}

// snapshot copies every table.
func (s *memStore) snapshot() map[string]map[int64][]float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[int64][]float32{}
	for name, t := range s.tables {
		out[name] = map[int64][]float32{}
		for id, e := range t {
			out[name][id] = slices.Concat(e.emb, e.acc)
		}
	}
	return out
}

// clone copies the store's entries into a new store with the same settings.
func (s *memStore) clone() *memStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := newMemStore(s.seed)
	c.initRange, c.sgd = s.initRange, s.sgd
	maps.Copy(c.dims, s.dims)
	for name, t := range s.tables {
		ct := map[int64]*memEntry{}
		for id, e := range t {
			ct[id] = &memEntry{emb: slices.Clone(e.emb), acc: slices.Clone(e.acc)}
		}
		c.tables[name] = ct
	}
	return c
}
