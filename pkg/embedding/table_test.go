package embedding

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// oracle is the table's semantics written the plain way: a map of entries, duplicates summed
// in batch order, the optimizer run once per distinct id.
type oracle struct {
	dim     int
	opt     Optimizer
	initVal float32
	entries map[int64]*oracleEntry
	maxTs   int64
	expire  expiry
}

type oracleEntry struct {
	emb, state []float32
	ts         uint32
}

func newOracle(dim int, opt Optimizer, initVal float32, exp expiry) *oracle {
	return &oracle{dim: dim, opt: opt, initVal: initVal, entries: map[int64]*oracleEntry{}, expire: exp}
}

func (o *oracle) entry(id int64) *oracleEntry {
	e := o.entries[id]
	if e == nil {
		e = &oracleEntry{emb: make([]float32, o.dim), state: make([]float32, o.opt.StateSize())}
		for i := range e.emb {
			e.emb[i] = o.initVal
		}
		o.opt.Init(e.state)
		o.entries[id] = e
	}
	return e
}

func (o *oracle) apply(ids []int64, grads []float32, lrs []float32, ts int64) {
	o.maxTs = max(o.maxTs, ts)
	var order []int64
	sums := map[int64][]float32{}
	for i, id := range ids {
		g := grads[i*o.dim : (i+1)*o.dim]
		if s, ok := sums[id]; ok {
			for k := range s {
				s[k] += g[k]
			}
			continue
		}
		sums[id] = slices.Clone(g)
		order = append(order, id)
	}
	for _, id := range order {
		e := o.entry(id)
		e.ts = uint32(ts)
		o.opt.Apply(e.emb, e.state, sums[id], lrs, 0)
	}
}

func (o *oracle) assign(ids []int64, values []float32, ts int64) {
	o.maxTs = max(o.maxTs, ts)
	for i, id := range ids {
		e := o.entry(id)
		e.ts = uint32(ts)
		copy(e.emb, values[i*o.dim:(i+1)*o.dim])
	}
}

func (o *oracle) evict(maxTs int64) int {
	n := 0
	for id, e := range o.entries {
		if o.expire.expired(id, e.ts, maxTs) {
			delete(o.entries, id)
			n++
		}
	}
	return n
}

func (o *oracle) lookup(ids []int64) ([]float32, int) {
	out := make([]float32, len(ids)*o.dim)
	hits := 0
	for i, id := range ids {
		if e, ok := o.entries[id]; ok {
			copy(out[i*o.dim:], e.emb)
			hits++
		}
	}
	return out, hits
}

// TestTableMatchesOracle runs random batches of applies (with duplicates), assigns, lookups and
// evictions against the table and the oracle and requires identical results, bit for bit.
func TestTableMatchesOracle(t *testing.T) {
	tests := []struct {
		name     string
		dim      int
		adagrad  bool
		stripes  int
		workers  int
		idRange  int64
		batch    int
		rounds   int
		slotExpr bool
	}{
		{name: "sgd dim 4 one stripe", dim: 4, stripes: 1, workers: 1, idRange: 300, batch: 50, rounds: 200},
		// An odd slot (header and 3 floats) is padded to keep headers 8-byte aligned.
		{name: "sgd dim 3", dim: 3, stripes: 2, workers: 1, idRange: 500, batch: 100, rounds: 100},
		{name: "adagrad dim 8 many stripes", dim: 8, adagrad: true, stripes: 16, workers: 1, idRange: 2000, batch: 300, rounds: 100},
		// Header and embedding over more than two cache lines.
		{name: "adagrad dim 29", dim: 29, adagrad: true, stripes: 8, workers: 2, idRange: 3000, batch: 500, rounds: 60},
		{name: "adagrad parallel batches", dim: 3, adagrad: true, stripes: 64, workers: 4, idRange: 40000, batch: 9000, rounds: 20},
		{name: "negative and slot ids with per-slot expiry", dim: 2, stripes: 4, workers: 2, idRange: 5000, batch: 5000, rounds: 40, slotExpr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opt Optimizer = testSGD{dim: tc.dim}
			if tc.adagrad {
				opt = testAdagrad{dim: tc.dim, init: 0.1}
			}
			expCfg := &hashtablepb.SlotExpireTimeConfig{DefaultExpireTime: proto.Uint32(2)}
			if tc.slotExpr {
				expCfg.SlotExpireTimes = []*hashtablepb.SlotExpireTimeConfig_SlotExpireTime{{Slot: proto.Uint32(3), ExpireTime: proto.Uint32(1)}}
			}
			tb := newTable(t, Config{Dim: tc.dim, Optimizer: opt, Initializer: constInit(0.5), Stripes: tc.stripes, Workers: tc.workers, ExpireTime: expCfg})
			exp, err := newExpiry(expCfg)
			if err != nil {
				t.Fatal(err)
			}
			or := newOracle(tc.dim, opt, 0.5, exp)
			rng := rand.New(rand.NewPCG(1, uint64(tc.dim)))
			randID := func() int64 {
				id := rng.Int64N(tc.idRange)
				if tc.slotExpr {
					// Spread ids over slots 0..4 and both signs.
					id |= int64(rng.IntN(5)) << 48
					if rng.IntN(2) == 0 {
						id = -id
					}
				}
				return id
			}
			now := int64(1_700_000_000)
			evicted := 0
			for round := 0; round < tc.rounds; round++ {
				now += int64(rng.IntN(40000))
				ids := make([]int64, tc.batch)
				for i := range ids {
					ids[i] = randID()
				}
				vals := make([]float32, len(ids)*tc.dim)
				for i := range vals {
					vals[i] = rng.Float32()*2 - 1
				}
				switch op := rng.IntN(10); {
				case op < 6:
					if err := tb.Apply(ids, vals, lr(0.05), int64(round), now); err != nil {
						t.Fatal(err)
					}
					or.apply(ids, vals, lr(0.05), now)
				case op < 8:
					if err := tb.Assign(ids, vals, now); err != nil {
						t.Fatal(err)
					}
					or.assign(ids, vals, now)
				case op < 9:
					got, want := tb.Evict(tb.MaxUpdateTsSec()), or.evict(or.maxTs)
					if got != want {
						t.Fatalf("round %d: evicted %d, oracle %d", round, got, want)
					}
					evicted += got
				default:
				}
				got, hits := mustLookup(t, tb, ids)
				want, wantHits := or.lookup(ids)
				if hits != wantHits {
					t.Fatalf("round %d: %d hits, oracle %d", round, hits, wantHits)
				}
				if !slices.Equal(got, want) {
					for i := range ids {
						if !slices.Equal(got[i*tc.dim:(i+1)*tc.dim], want[i*tc.dim:(i+1)*tc.dim]) {
							t.Fatalf("round %d: id %d: embedding %v, oracle %v", round, ids[i], got[i*tc.dim:(i+1)*tc.dim], want[i*tc.dim:(i+1)*tc.dim])
						}
					}
				}
				if tb.Size() != len(or.entries) {
					t.Fatalf("round %d: size %d, oracle %d", round, tb.Size(), len(or.entries))
				}
			}
			if evicted == 0 {
				t.Fatal("no entry was evicted: the test does not exercise eviction")
			}
			// Every entry, state and time included.
			for id, e := range or.entries {
				d, ok := tb.LookupEntry(id)
				if !ok {
					t.Fatalf("id %d missing", id)
				}
				if !slices.Equal(d.GetNum(), e.emb) || d.GetLastUpdateTsSec() != int64(e.ts) {
					t.Fatalf("id %d: entry %v ts %d, oracle %v ts %d", id, d.GetNum(), d.GetLastUpdateTsSec(), e.emb, e.ts)
				}
				if !proto.Equal(d.GetOpt(), opt.Dump(e.state)) {
					t.Fatalf("id %d: optimizer dump %v, oracle %v", id, d.GetOpt(), opt.Dump(e.state))
				}
			}
		})
	}
}

// TestApplyCombinesDuplicates checks that an id's gradients within a batch are summed before one
// optimizer step (Adagrad is not additive, so two steps would differ), wherever the duplicates
// fall in the batch and however the batch is split over workers.
func TestApplyCombinesDuplicates(t *testing.T) {
	g1, g2, g3 := []float32{0.5, -1}, []float32{0.25, 2}, []float32{1, 1}
	sum := []float32{0.75, 1}
	tests := []struct {
		name    string
		ids     []int64
		grads   [][]float32
		workers int
	}{
		{name: "adjacent", ids: []int64{7, 7, 9}, grads: [][]float32{g1, g2, g3}, workers: 1},
		{name: "apart", ids: []int64{7, 9, 7}, grads: [][]float32{g1, g3, g2}, workers: 1},
		{name: "apart in a parallel batch", ids: append(append([]int64{7}, seqIDs(100, 5000)...), 7, 9), grads: nil, workers: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := testAdagrad{dim: 2, init: 0.1}
			tb := newTable(t, Config{Dim: 2, Optimizer: opt, Initializer: constInit(1), Workers: tc.workers})
			var grads []float32
			if tc.grads == nil {
				grads = make([]float32, 2*len(tc.ids))
				copy(grads, g1)
				copy(grads[2*(len(tc.ids)-2):], g2)
				copy(grads[2*(len(tc.ids)-1):], g3)
			} else {
				for _, g := range tc.grads {
					grads = append(grads, g...)
				}
			}
			if err := tb.Apply(tc.ids, grads, lr(0.1), 1, 100); err != nil {
				t.Fatal(err)
			}
			want := []float32{1, 1}
			state := make([]float32, 2)
			opt.Init(state)
			opt.Apply(want, state, sum, lr(0.1), 1)
			got, _ := mustLookup(t, tb, []int64{7})
			if !slices.Equal(got, want) {
				t.Fatalf("id 7: %v, want one step with the summed gradient %v", got, want)
			}
			twice := []float32{1, 1}
			opt.Init(state)
			opt.Apply(twice, state, g1, lr(0.1), 1)
			opt.Apply(twice, state, g2, lr(0.1), 1)
			if slices.Equal(twice, want) {
				t.Fatal("test is vacuous: two steps give the same result as one")
			}
		})
	}
}

// seqIDs returns n ids from start on.
func seqIDs(start int64, n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = start + int64(i)
	}
	return ids
}

func TestLookupOfMissingIDsReadsZerosAndInsertsNothing(t *testing.T) {
	tb := newTable(t, Config{Dim: 3, Optimizer: testSGD{dim: 3}, Initializer: constInit(2)})
	if err := tb.Apply([]int64{1}, []float32{1, 1, 1}, lr(1), 0, 10); err != nil {
		t.Fatal(err)
	}
	out := []float32{9, 9, 9, 9, 9, 9}
	hits, err := tb.Lookup([]int64{5, 1}, out)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{0, 0, 0, 1, 1, 1}; hits != 1 || !slices.Equal(out, want) {
		t.Fatalf("lookup: %d hits %v, want 1 hit %v", hits, out, want)
	}
	if tb.Contains(5) || tb.Size() != 1 {
		t.Fatalf("lookup inserted: contains(5)=%v size %d", tb.Contains(5), tb.Size())
	}
}

func TestNewEntriesAreInitialized(t *testing.T) {
	init := &seqInit{}
	opt := testAdagrad{dim: 2, init: 0.25}
	tb := newTable(t, Config{Dim: 2, Optimizer: opt, Initializer: init})
	if err := tb.Apply([]int64{3}, []float32{0, 0}, lr(1), 0, 10); err != nil {
		t.Fatal(err)
	}
	d, ok := tb.LookupEntry(3)
	if !ok {
		t.Fatal("no entry")
	}
	// A zero gradient leaves the initial values: the initializer's for the embedding, the
	// optimizer's for its state.
	if !slices.Equal(d.GetNum(), []float32{1, 2}) || !slices.Equal(d.GetOpt().GetDump()[0].GetAdagrad().GetNorm(), []float32{0.25, 0.25}) {
		t.Fatalf("entry %v", d)
	}
}

func TestBadArguments(t *testing.T) {
	tb := newTable(t, Config{Dim: 2, Optimizer: testSGD{dim: 2}, Initializer: constInit(0)})
	tests := []struct {
		name string
		call func() error
	}{
		{"lookup buffer too small", func() error { _, err := tb.Lookup([]int64{1, 2}, make([]float32, 3)); return err }},
		{"apply gradients short", func() error { return tb.Apply([]int64{1}, []float32{1}, lr(1), 0, 0) }},
		{"assign values long", func() error { return tb.Assign([]int64{1}, []float32{1, 2, 3}, 0) }},
		{"config without optimizer", func() error { _, err := New(Config{Dim: 2, Initializer: constInit(0)}); return err }},
		{"config with mismatched optimizer", func() error {
			_, err := New(Config{Dim: 2, Optimizer: testSGD{dim: 3}, Initializer: constInit(0)})
			return err
		}},
		{"stripes not a power of two", func() error {
			_, err := New(Config{Dim: 2, Optimizer: testSGD{dim: 2}, Initializer: constInit(0), Stripes: 3})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if errkind.Of(err) != errkind.Value {
				t.Fatalf("error %v, want one of kind Value", err)
			}
		})
	}
}

func TestShard(t *testing.T) {
	tests := []struct {
		id   int64
		n    int
		want int
	}{
		{0, 3, 0}, {7, 3, 1}, {-1, 3, 2}, {-3, 3, 0}, {-7, 2, 1}, {1 << 62, 5, int((1 << 62) % 5)},
		{-9223372036854775808, 3, 1}, // floormod(-2^63, 3): -2^63 = -3074457345618258603*3 + 1
	}
	for _, tc := range tests {
		if got := Shard(tc.id, tc.n); got != tc.want {
			t.Errorf("Shard(%d, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
}

// TestStripeAgainstMap inserts and removes keys in one stripe (small, so probe runs are long and
// wrap around the end) and checks that every key stays findable with its embedding and
// state, across growth, removal and rehashing.
func TestStripeAgainstMap(t *testing.T) {
	g := newGeom(2, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 40; round++ {
		var s stripe
		want := map[int64]float32{}
		for op := 0; op < 600; op++ {
			id := rng.Int64N(200) - 100
			if round%2 == 1 {
				// Few distinct ids: the table stays small and its probe runs wrap.
				id = rng.Int64N(40)
			}
			h := mix(id)
			p := s.find(g, id, h)
			if _, present := want[id]; (p >= 0) != present {
				t.Fatalf("round %d op %d: find(%d) = %d, present %v", round, op, id, p, present)
			}
			switch {
			case p >= 0 && rng.IntN(3) == 0:
				s.remove(g, p)
				delete(want, id)
			case p < 0:
				v := rng.Float32()
				p = s.insert(g, id, h)
				s.emb(g, p)[0] = v
				s.state(g, p)[0] = -v
				want[id] = v
			}
			if op%97 == 0 && s.nslots > minSlots && s.count*maxLoadDen <= (s.nslots/2)*maxLoadNum {
				s.rehash(g, s.nslots/2)
			}
			if s.count != len(want) {
				t.Fatalf("count %d, want %d", s.count, len(want))
			}
			for k, v := range want {
				p := s.find(g, k, mix(k))
				if p < 0 || s.emb(g, p)[0] != v || s.state(g, p)[0] != -v {
					t.Fatalf("round %d op %d: key %d lost or wrong after inserting/removing", round, op, k)
				}
			}
		}
	}
}

// TestApplyCreationOrder: the entries a batch creates draw their random initial values in stripe
// order, whatever goroutines update the stripes, so tables fed the same batches with 1 and with
// 4 workers hold the same values bit for bit. The batches create ids in many stripes, then update
// old ids and create a few (the lists of ids to create are reused between batches).
func TestApplyCreationOrder(t *testing.T) {
	const dim = 4
	rng := rand.New(rand.NewPCG(11, 12))
	ids := make([]int64, 30000)
	for i := range ids {
		ids[i] = int64(rng.Uint64())
	}
	batches := [][]int64{ids[:20000], append(append([]int64{}, ids[:5000]...), ids[20000:20300]...), ids[20300:20303], ids[20300:]}
	random := &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_RandomUniform{
		RandomUniform: &initializerpb.RandomUniformInitializerConfig{Minval: proto.Float32(-1), Maxval: proto.Float32(1)}}}
	build := func(workers int) *Table {
		init, err := initializer.NewWithGenerator(random, dim, initializer.NewGenerator(initializer.DefaultSeed))
		if err != nil {
			t.Fatal(err)
		}
		tb := newTable(t, Config{Dim: dim, Optimizer: testSGD{dim}, Initializer: init})
		tb.SetWorkers(workers)
		for _, b := range batches {
			grads := make([]float32, len(b)*dim)
			for i := range grads {
				grads[i] = 0.001 * float32(i%13)
			}
			if err := tb.Apply(b, grads, lr(0.1), 1, 1); err != nil {
				t.Fatal(err)
			}
		}
		return tb
	}
	one, four := build(1), build(4)
	a, b := make([]float32, len(ids)*dim), make([]float32, len(ids)*dim)
	for _, tc := range []struct {
		tb  *Table
		out []float32
	}{{one, a}, {four, b}} {
		if found, err := tc.tb.Lookup(ids, tc.out); err != nil || found != len(ids) {
			t.Fatalf("lookup: %d of %d found, %v", found, len(ids), err)
		}
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("id %d value %d: %v with 1 worker, %v with 4", ids[i/dim], i%dim, a[i], b[i])
		}
	}
}
