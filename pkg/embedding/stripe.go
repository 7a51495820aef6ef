package embedding

import (
	"sync"
	"unsafe"
)

// A stripe keeps its entries in an open-addressing table with linear probing whose slots hold the
// entries themselves: a 16-byte header (id, last update time, used flag), the embedding, then the
// optimizer state, all in one []float32 arena. A lookup of an id in its home slot thus reads one
// place in memory (two adjacent cache lines for a 16-float embedding), as a plain gather of the
// row would, and an update finds the state next to the embedding; an index pointing into a row
// store costs a second, dependent cache miss per id. Measured on the machine this was written on
// (1M random ids, cold cache): a separate index reached a third of a gather's rate; buckets of 7
// headers followed by their embeddings, the same; slots with inline embeddings, 0.5 to 0.7 of
// it once their lines are prefetched a few blocks ahead (prefetch_amd64.s). The price is memory:
// empty slots (a quarter to five eighths of them) are as large as full ones.
const (
	slotHeaderFloats = 4
	// A stripe grows (doubling its slots) before more than maxLoadNum/maxLoadDen of them are
	// used.
	maxLoadNum = 3
	maxLoadDen = 4
	// usedBit marks a used slot in slotHeader.meta.
	usedBit = 1
	// touchedBit marks an entry updated since parameter sync last took it (touched.go).
	touchedBit = 2
)

// slotHeader is the first 16 bytes of a slot.
type slotHeader struct {
	key int64
	// ts is the entry's last update time in seconds (uint32, as the reference's entries keep it).
	ts   uint32
	meta uint32
}

func init() {
	if unsafe.Sizeof(slotHeader{}) != slotHeaderFloats*4 {
		panic("embedding: slot header is not 16 bytes")
	}
}

// minSlots is the size of a stripe's first table.
const minSlots = 8

// stripe is one lock's share of the table: the ids whose hash's top bits select it.
type stripe struct {
	mu sync.RWMutex
	// arena holds nslots slots of the table's slot stride; nslots is 0 or a power of two.
	arena  []float32
	nslots int
	count  int
	// touched lists the ids whose touchedBit was set, in that order (touched.go).
	touched []int64
	// pad keeps neighbouring stripes' locks off one cache line.
	_ [64]byte
}

// geom is the table's slot geometry, which every stripe operation needs.
type geom struct {
	dim, stateSize, slotStride int
}

func newGeom(dim, stateSize int) geom {
	// An even stride keeps every header 8-byte aligned (the arena's start is), which platforms
	// other than amd64 may need for the int64 id.
	stride := (slotHeaderFloats + dim + stateSize + 1) &^ 1
	return geom{dim: dim, stateSize: stateSize, slotStride: stride}
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
func (s *stripe) hdr(g geom, p int) *slotHeader {
	return (*slotHeader)(unsafe.Pointer(&s.arena[p*g.slotStride]))
}

// home is the home slot of hash h (the stripe has slots).
func (s *stripe) home(h uint64) int { return int(h) & (s.nslots - 1) }

// find returns id's slot, or -1.
func (s *stripe) find(g geom, id int64, h uint64) int {
	if s.nslots == 0 {
		return -1
	}
	mask := s.nslots - 1
	for p := int(h) & mask; ; p = (p + 1) & mask {
		hd := s.hdr(g, p)
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
	off := p*g.slotStride + slotHeaderFloats
	return s.arena[off : off+g.dim : off+g.dim]
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
	old, oldN := s.arena, s.nslots
	s.arena = make([]float32, ns*g.slotStride)
	s.nslots = ns
	mask := ns - 1
	for q := 0; q < oldN; q++ {
		off := q * g.slotStride
		hd := (*slotHeader)(unsafe.Pointer(&old[off]))
		if hd.meta&usedBit == 0 {
			continue
		}
		p := int(mix(hd.key)) & mask
		for s.hdr(g, p).meta&usedBit != 0 {
			p = (p + 1) & mask
		}
		copy(s.arena[p*g.slotStride:(p+1)*g.slotStride], old[off:off+g.slotStride])
	}
}

// insert adds id (absent) with a new state row, growing the table when needed, and returns its
// slot; the embedding, state and time are the caller's to set.
func (s *stripe) insert(g geom, id int64, h uint64) int {
	s.reserve(g, 1)
	mask := s.nslots - 1
	p := int(h) & mask
	for s.hdr(g, p).meta&usedBit != 0 {
		p = (p + 1) & mask
	}
	*s.hdr(g, p) = slotHeader{key: id, meta: usedBit}
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
		hj := s.hdr(g, j)
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
		copy(s.arena[i*g.slotStride:(i+1)*g.slotStride], s.arena[j*g.slotStride:(j+1)*g.slotStride])
		i = j
	}
	*s.hdr(g, i) = slotHeader{}
	s.count--
}

// state returns the optimizer state of slot p (empty when the optimizer keeps none).
func (s *stripe) state(g geom, p int) []float32 {
	off := p*g.slotStride + slotHeaderFloats + g.dim
	return s.arena[off : off+g.stateSize : off+g.stateSize]
}

// slotLines stores the address of each cache line of slot p in addrs from k on (as far as addrs
// has room) and returns the new k.
func (s *stripe) slotLines(g geom, p int, addrs []uintptr, k int) int {
	base := p * g.slotStride
	for off := 0; off < g.slotStride && k < len(addrs); off += cacheLineFloats {
		addrs[k] = uintptr(unsafe.Pointer(&s.arena[base+off]))
		k++
	}
	if k < len(addrs) {
		addrs[k] = uintptr(unsafe.Pointer(&s.arena[base+g.slotStride-1]))
		k++
	}
	return k
}

// cacheLineFloats is a cache line in floats.
const cacheLineFloats = 16

// each calls fn for every used slot, until fn returns false. fn must not insert or remove.
func (s *stripe) each(g geom, fn func(hd *slotHeader, p int) bool) {
	for p := 0; p < s.nslots; p++ {
		if hd := s.hdr(g, p); hd.meta&usedBit != 0 && !fn(hd, p) {
			return
		}
	}
}

// reset empties the stripe and drops its memory.
func (s *stripe) reset() {
	s.arena, s.nslots, s.count, s.touched = nil, 0, 0, nil
}

// memoryBytes is what the stripe's slots occupy.
func (s *stripe) memoryBytes() int64 { return int64(cap(s.arena)) * 4 }
