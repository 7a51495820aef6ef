package embedding

import (
	"sync"
	"unsafe"
)

// A stripe keeps its entries in an open-addressing table with linear probing, in two parallel
// arrays indexed by slot: the 16-byte headers (id, last update time, used flag), four to a cache
// line, and the rows (the embedding, then the optimizer state). The home slot of an id is known
// from its hash alone, so its header line and its row can be fetched at the same time, and a row
// of 16 floats with 16 of state is exactly two aligned cache lines (a header inside the row made
// it three). Probing reads the compact headers, which hold a displaced id's slot on the home line
// most of the time. An index pointing into a row store would cost a second, dependent miss per id;
// measured on the machine this was written on (1M random ids, cold cache), it reached a third of
// a gather's rate. The price is memory: empty slots (a quarter to five eighths of them) are as
// large as full ones.
const (
	// A stripe grows (doubling its slots) before more than maxLoadNum/maxLoadDen of them are
	// used.
	maxLoadNum = 3
	maxLoadDen = 4
	// usedBit marks a used slot in slotHeader.meta.
	usedBit = 1
	// touchedBit marks an entry updated since parameter sync last took it (touched.go).
	touchedBit = 2
)

// slotHeader is a slot's header.
type slotHeader struct {
	key int64
	// ts is the entry's last update time in seconds (uint32, as the reference's entries keep it).
	ts   uint32
	meta uint32
}

func init() {
	if unsafe.Sizeof(slotHeader{}) != 16 {
		panic("embedding: slot header is not 16 bytes")
	}
}

// minSlots is the size of a stripe's first table.
const minSlots = 8

// stripe is one lock's share of the table: the ids whose hash's top bits select it.
type stripe struct {
	mu sync.RWMutex
	// hdrs and rows hold nslots slots (rows of the table's row stride); nslots is 0 or a power
	// of two.
	hdrs   []slotHeader
	rows   []float32
	nslots int
	count  int
	// touched lists the ids whose touchedBit was set, in that order (touched.go).
	touched []int64
	// pad keeps neighbouring stripes' locks off one cache line.
	_ [64]byte
}

// geom is the table's slot geometry, which every stripe operation needs.
type geom struct {
	dim, stateSize, rowStride int
}

func newGeom(dim, stateSize int) geom {
	return geom{dim: dim, stateSize: stateSize, rowStride: dim + stateSize}
}

// mix is the hash of an id (MurmurHash3's 64-bit finalizer): ids are often structured (a slot in
// the top bits, a small counter below), so every bit of the result must depend on every bit of
// the id. Its top bits pick the stripe, its low bits the home slot within the stripe.
func mix(id int64) uint64 {
	h := uint64(id)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// hdr returns slot p's header.
func (s *stripe) hdr(p int) *slotHeader { return &s.hdrs[p] }

// home is the home slot of hash h (the stripe has slots).
func (s *stripe) home(h uint64) int { return int(h) & (s.nslots - 1) }

// find returns id's slot, or -1.
func (s *stripe) find(g geom, id int64, h uint64) int {
	if s.nslots == 0 {
		return -1
	}
	mask := s.nslots - 1
	for p := int(h) & mask; ; p = (p + 1) & mask {
		hd := s.hdr(p)
		if hd.meta&usedBit == 0 {
			return -1
		}
		if hd.key == id {
			return p
		}
	}
}

// emb returns the embedding of slot p.
func (s *stripe) emb(g geom, p int) []float32 {
	off := p * g.rowStride
	return s.rows[off : off+g.dim : off+g.dim]
}

// reserve makes room for n more entries, growing the table when its load would pass its bound,
// so that inserting them moves nothing.
func (s *stripe) reserve(g geom, n int) {
	need := s.count + n
	if need*maxLoadDen <= s.nslots*maxLoadNum {
		return
	}
	ns := max(s.nslots, minSlots)
	for need*maxLoadDen > ns*maxLoadNum {
		ns *= 2
	}
	s.rehash(g, ns)
}

// rehash moves every entry into a new table of ns slots (a power of two that holds them).
func (s *stripe) rehash(g geom, ns int) {
	oldH, oldR, oldN := s.hdrs, s.rows, s.nslots
	s.hdrs = make([]slotHeader, ns)
	s.rows = make([]float32, ns*g.rowStride)
	s.nslots = ns
	mask := ns - 1
	rs := g.rowStride
	for q := 0; q < oldN; q++ {
		hd := &oldH[q]
		if hd.meta&usedBit == 0 {
			continue
		}
		p := int(mix(hd.key)) & mask
		for s.hdrs[p].meta&usedBit != 0 {
			p = (p + 1) & mask
		}
		s.hdrs[p] = *hd
		copy(s.rows[p*rs:(p+1)*rs], oldR[q*rs:(q+1)*rs])
	}
}

// insert adds id (absent) with a new state row, growing the table when needed, and returns its
// slot; the embedding, state and time are the caller's to set.
func (s *stripe) insert(g geom, id int64, h uint64) int {
	s.reserve(g, 1)
	mask := s.nslots - 1
	p := int(h) & mask
	for s.hdr(p).meta&usedBit != 0 {
		p = (p + 1) & mask
	}
	*s.hdr(p) = slotHeader{key: id, meta: usedBit}
	s.count++
	return p
}

// remove deletes the entry in slot p, frees its state row, and shifts the entries of its probe
// run back so that every remaining id stays reachable from its home slot (backward-shift
// deletion: no tombstones). Slots after p may move.
func (s *stripe) remove(g geom, p int) {
	mask := s.nslots - 1
	i := p
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		hj := s.hdr(j)
		if hj.meta&usedBit == 0 {
			break
		}
		home := int(mix(hj.key)) & mask
		// The entry at j may stay when its home lies cyclically in (i, j].
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		s.hdrs[i] = *hj
		rs := g.rowStride
		copy(s.rows[i*rs:(i+1)*rs], s.rows[j*rs:(j+1)*rs])
		i = j
	}
	*s.hdr(i) = slotHeader{}
	s.count--
}

// state returns the optimizer state of slot p (empty when the optimizer keeps none).
func (s *stripe) state(g geom, p int) []float32 {
	off := p*g.rowStride + g.dim
	return s.rows[off : off+g.stateSize : off+g.stateSize]
}

// rowLines stores the address of each cache line of slot p's row (embedding and optimizer state)
// in addrs from k on (as far as addrs has room) and returns the new k.
func (s *stripe) rowLines(g geom, p int, addrs []uintptr, k int) int {
	return lines(s.rows[p*g.rowStride:(p+1)*g.rowStride], addrs, k)
}

// embLines is rowLines for the embedding alone.
func (s *stripe) embLines(g geom, p int, addrs []uintptr, k int) int {
	return lines(s.emb(g, p), addrs, k)
}

// lines stores the address of each cache line of v (not empty) in addrs from k on, as far as
// addrs has room, and returns the new k.
func lines(v []float32, addrs []uintptr, k int) int {
	for off := 0; off < len(v) && k < len(addrs); off += cacheLineFloats {
		addrs[k] = uintptr(unsafe.Pointer(&v[off]))
		k++
	}
	if k < len(addrs) {
		addrs[k] = uintptr(unsafe.Pointer(&v[len(v)-1]))
		k++
	}
	return k
}

// cacheLineFloats is a cache line in floats.
const cacheLineFloats = 16

// each calls fn for every used slot, until fn returns false. fn must not insert or remove.
func (s *stripe) each(g geom, fn func(hd *slotHeader, p int) bool) {
	for p := 0; p < s.nslots; p++ {
		if hd := s.hdr(p); hd.meta&usedBit != 0 && !fn(hd, p) {
			return
		}
	}
}

// reset empties the stripe and drops its memory.
func (s *stripe) reset() {
	s.hdrs, s.rows, s.nslots, s.count, s.touched = nil, nil, 0, 0, nil
}

// memoryBytes is what the stripe's slots occupy.
func (s *stripe) memoryBytes() int64 {
	return int64(cap(s.hdrs))*int64(unsafe.Sizeof(slotHeader{})) + int64(cap(s.rows))*4
}
