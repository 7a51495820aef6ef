package dnn

import (
	"context"
	"fmt"
	"time"

	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TableStore is an EmbeddingStore over embedding tables in this process: a worker that trains
// without parameter servers. Its methods are safe for concurrent use (the tables' are).
type TableStore struct {
	tables map[string]*embedding.Table
	// now gives Apply's update time (the entries' last_update_ts_sec, which expiry measures).
	now func() time.Time
}

// NewTableStore returns a store of the named tables.
func NewTableStore(tables map[string]*embedding.Table) (*TableStore, error) {
	s := &TableStore{tables: make(map[string]*embedding.Table, len(tables)), now: time.Now}
	for name, t := range tables {
		if t == nil {
			return nil, errkind.New(errkind.Value, "dnn: table store: table %q is nil", name)
		}
		s.tables[name] = t
	}
	return s, nil
}

// Table returns the named table (to save or restore it), nil when the store has none.
func (s *TableStore) Table(name string) *embedding.Table { return s.tables[name] }

func (s *TableStore) table(name string) (*embedding.Table, error) {
	t, ok := s.tables[name]
	if !ok {
		return nil, errkind.New(errkind.Value, "dnn: table store has no table %q", name)
	}
	return t, nil
}

// Lookup reads the embeddings of ids (zeros for ids without an entry).
func (s *TableStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dnn: lookup in table %q: %w", table, err)
	}
	t, err := s.table(table)
	if err != nil {
		return err
	}
	if _, err := t.Lookup(ids, out); err != nil {
		return fmt.Errorf("dnn: lookup in table %q: %w", table, err)
	}
	return nil
}

// Apply updates the entries of ids with the table's optimizer, stamped with the current time.
func (s *TableStore) Apply(ctx context.Context, table string, ids []int64, grads []float32, step int64, lr []float32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dnn: apply to table %q: %w", table, err)
	}
	t, err := s.table(table)
	if err != nil {
		return err
	}
	if err := t.Apply(ids, grads, lr, step, s.now().Unix()); err != nil {
		return fmt.Errorf("dnn: apply to table %q: %w", table, err)
	}
	return nil
}
