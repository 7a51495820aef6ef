package ps

import (
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The server's side of real-time parameter sync (pkg/paramsync): with touched tracking on, its
// tables mark the entries that ApplyGradients updates, and a pusher running next to the server
// takes them, with their current embeddings, to push them to the serving PS replicas of this
// shard. The methods below are that pusher's source (paramsync.Source).

// SetTrackTouched turns the tables' touched tracking on or off, for the tables there are and those
// created later.
func (s *Server) SetTrackTouched(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.track = on
	for _, tb := range s.tables {
		tb.t.TrackTouched(on)
	}
}

// SyncTables are the server's tables by name, with their dimensions.
func (s *Server) SyncTables() map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]int, len(s.tables))
	for name, tb := range s.tables {
		out[name] = tb.t.Dim()
	}
	return out
}

// TakeTouched hands the entries of table updated since they were last taken to fn, in batches of
// at most max ids (embedding.Table.TakeTouched). An unknown table is an error of kind NotFound.
func (s *Server) TakeTouched(table string, max int, fn func(ids []int64, embs []float32) error) (int, error) {
	tb, err := s.syncTable(table)
	if err != nil {
		return 0, err
	}
	return tb.t.TakeTouched(max, fn)
}

// Retouch marks the entries of ids in table touched again (ids taken but pushed nowhere).
func (s *Server) Retouch(table string, ids []int64) {
	if tb, err := s.syncTable(table); err == nil {
		tb.t.Retouch(ids)
	}
}

// NewestEventTime is the newest event time (Unix milliseconds) of the gradients applied so far,
// 0 when none carried one. A pusher reads it before it takes the touched entries: every apply it
// covers has marked its entries by then.
func (s *Server) NewestEventTime() int64 { return s.newest.Load() }

// TouchedPending is how many ids table's touched lists hold (0 for an unknown table).
func (s *Server) TouchedPending(table string) int {
	tb, err := s.syncTable(table)
	if err != nil {
		return 0
	}
	return tb.t.TouchedPending()
}

func (s *Server) syncTable(name string) (*table, error) {
	s.mu.RLock()
	tb, ok := s.tables[name]
	s.mu.RUnlock()
	if !ok {
		return nil, errkind.New(errkind.NotFound, "ps %d: no table %q", s.cfg.Index, name)
	}
	return tb, nil
}
