package ps

// EachEntry hands every entry of table to fn, in batches of at most max ids, with their current
// embeddings (embedding.Table.EachEntry): parameter sync's catch-up push of a serving replica that
// missed updates (paramsync.Snapshotter). An unknown table is an error of kind NotFound.
func (s *Server) EachEntry(table string, max int, fn func(ids []int64, embs []float32) error) (int, error) {
	tb, err := s.syncTable(table)
	if err != nil {
		return 0, err
	}
	return tb.t.EachEntry(max, fn)
}
