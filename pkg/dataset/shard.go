package dataset

import (
	"hash/fnv"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Shard says which part of the input one of several workers reads.
//
// A Reader over a fixed list of files (Open, OpenFiles) applies this rule to the list in its
// order (sorted, for patterns):
//   - Count files or more: worker Index reads the files Index, Index+Count, Index+2*Count, ...
//     of the list, every record of each (the reference's files_list.shard(n, i));
//   - fewer files than workers: every worker reads every file, and keeps the records whose
//     index j, counted from 0 over all the files in list order, has j % Count == Index (so no
//     worker is left without data, where the reference's file sharding would give it none).
//
// A Reader that watches for files (Watch) cannot know how many files will come, so it shards by
// file only: a file belongs to worker fnv32a(path) % Count, with path as the patterns matched it.
// Every worker computes the same owner without coordination, however its matching interleaves
// with the files' arrival; give every worker the same patterns.
type Shard struct {
	// Index is this worker's index, 0 <= Index < Count.
	Index int
	// Count is the number of workers; 0 or 1 means no sharding.
	Count int
}

func (s Shard) validate() error {
	if s.Count < 0 || (s.Count > 1 && (s.Index < 0 || s.Index >= s.Count)) || (s.Count <= 1 && s.Index != 0) {
		return errkind.New(errkind.Value, "dataset: shard index %d of %d workers is outside [0, %d)", s.Index, s.Count, max(s.Count, 1))
	}
	return nil
}

// Files returns the files of list that worker s reads, and whether it keeps only every Count-th
// record of them (see Shard).
func (s Shard) Files(list []string) (files []string, byRecord bool) {
	if s.Count <= 1 {
		return list, false
	}
	if len(list) < s.Count {
		return list, true
	}
	for i := s.Index; i < len(list); i += s.Count {
		files = append(files, list[i])
	}
	return files, false
}

// OwnsFile reports whether a watching Reader of worker s reads the file at path (see Shard).
func (s Shard) OwnsFile(path string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New32a()
	h.Write([]byte(path))
	return int(h.Sum32()%uint32(s.Count)) == s.Index
}
