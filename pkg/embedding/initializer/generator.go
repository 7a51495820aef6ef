package initializer

import "sync"

// Generator is the random source of the random uniform initializers: the reference's
// std::mt19937 (32-bit Mersenne Twister, MT19937) turned into floats as libstdc++'s
// std::uniform_real_distribution<float> does (generate_canonical<float, 24>: one 32-bit draw u,
// float(u) / 2^32 in float32, 1 replaced by the float below it; then r*(max-min) + min in float32).
//
// The reference keeps one default-seeded (5489) generator per thread, shared by every random
// uniform initializer the thread runs. Shared is that generator for the whole process: a
// single-threaded run draws exactly the reference's values; with several goroutines the draws are
// interleaved as threads would interleave them on one generator. A Generator is safe for
// concurrent use.
type Generator struct {
	mu sync.Mutex
	mt mt19937
}

// DefaultSeed is std::mt19937's default seed.
const DefaultSeed = 5489

// Shared is the process-wide generator New uses.
var Shared = NewGenerator(DefaultSeed)

// PerTable returns a new generator seeded as std::mt19937's default, for one table whose initial
// values must not depend on the order in which other tables draw theirs.
func PerTable(string) *Generator { return NewGenerator(DefaultSeed) }

// NewGenerator returns a generator seeded as std::mt19937(seed).
func NewGenerator(seed uint32) *Generator {
	g := &Generator{}
	g.mt.seed(seed)
	return g
}

// Uint32 returns the generator's next 32-bit output.
func (g *Generator) Uint32() uint32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mt.next()
}

// uniform fills out with draws from U[lo, hi), under one lock.
func (g *Generator) uniform(out []float32, lo, hi float32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	span := hi - lo
	for i := range out {
		out[i] = float32(canonical(g.mt.next())*span) + lo
	}
}

// canonical is libstdc++'s generate_canonical<float, 24> of one 32-bit draw.
func canonical(u uint32) float32 {
	r := float32(u) / 4294967296
	if r >= 1 {
		return 0.99999994 // std::nextafter(1.0f, 0.0f)
	}
	return r
}

// mt19937 is the Mersenne Twister of Matsumoto and Nishimura with the std::mt19937 parameters.
type mt19937 struct {
	state [624]uint32
	index int
}

func (m *mt19937) seed(s uint32) {
	m.state[0] = s
	for i := 1; i < len(m.state); i++ {
		prev := m.state[i-1]
		m.state[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
	m.index = len(m.state)
}

func (m *mt19937) next() uint32 {
	const (
		n, mid  = 624, 397
		matrixA = 0x9908b0df
		upper   = 0x80000000
		lower   = 0x7fffffff
	)
	if m.index >= n {
		for i := 0; i < n; i++ {
			y := m.state[i]&upper | m.state[(i+1)%n]&lower
			v := m.state[(i+mid)%n] ^ y>>1
			if y&1 != 0 {
				v ^= matrixA
			}
			m.state[i] = v
		}
		m.index = 0
	}
	y := m.state[m.index]
	m.index++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}
