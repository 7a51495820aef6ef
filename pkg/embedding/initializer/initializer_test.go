package initializer

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func parse(t *testing.T, text string) *initializerpb.InitializerConfig {
	t.Helper()
	var c initializerpb.InitializerConfig
	if err := prototext.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("config %q: %v", text, err)
	}
	return &c
}

func f32(t *testing.T, s string) float32 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 32)
	if err != nil {
		t.Fatal(err)
	}
	return float32(v)
}

// libstdcxx reads testdata/random_uniform.txt, written by testdata/random_uniform.cc with g++ 12
// (libstdc++'s std::mt19937 and uniform_real_distribution<float>).
type libstdcxx struct {
	ranges    [][2]float32
	values    [][]float32
	nth10000  uint32
	canonical map[uint32]float32
}

func readLibstdcxx(t *testing.T) libstdcxx {
	t.Helper()
	f, err := os.Open("testdata/random_uniform.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := libstdcxx{canonical: map[uint32]float32{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case strings.HasPrefix(sc.Text(), "mt19937 10000th:"):
			n, err := strconv.ParseUint(fields[2], 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			out.nth10000 = uint32(n)
		case fields[0] == "canonical":
			u, err := strconv.ParseUint(fields[1], 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			out.canonical[uint32(u)] = f32(t, fields[2])
		default:
			out.ranges = append(out.ranges, [2]float32{f32(t, fields[0]), f32(t, fields[1])})
			var vals []float32
			for _, s := range fields[2:] {
				vals = append(vals, f32(t, s))
			}
			out.values = append(out.values, vals)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out.ranges) == 0 || out.nth10000 == 0 || len(out.canonical) == 0 {
		t.Fatal("testdata/random_uniform.txt is incomplete")
	}
	return out
}

// TestRandomUniformMatchesReference: one default-seeded generator, used by initializers of several
// ranges in turn, draws exactly the floats the reference's libstdc++ draws.
func TestRandomUniformMatchesReference(t *testing.T) {
	want := readLibstdcxx(t)
	g := NewGenerator(DefaultSeed)
	for i, r := range want.ranges {
		dim := len(want.values[i])
		cfg := &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_RandomUniform{
			RandomUniform: &initializerpb.RandomUniformInitializerConfig{Minval: &r[0], Maxval: &r[1]}}}
		init, err := NewWithGenerator(cfg, dim, g)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, dim)
		init.Initialize(got)
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want.values[i][j]) {
				t.Fatalf("range %v value %d: got %.9g, libstdc++ %.9g", r, j, got[j], want.values[i][j])
			}
		}
	}
}

func TestMT19937(t *testing.T) {
	want := readLibstdcxx(t)
	g := NewGenerator(DefaultSeed)
	var x uint32
	for range 10000 {
		x = g.Uint32()
	}
	if x != want.nth10000 {
		t.Fatalf("10000th output %d, want %d", x, want.nth10000)
	}
}

func TestCanonical(t *testing.T) {
	for u, want := range readLibstdcxx(t).canonical {
		if got := canonical(u); got != want {
			t.Errorf("canonical(%d) = %.9g, libstdc++ %.9g", u, got, want)
		}
	}
}

func TestDefaultRange(t *testing.T) {
	init, err := NewWithGenerator(parse(t, "random_uniform {}"), 1000, NewGenerator(DefaultSeed))
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 1000)
	init.Initialize(v)
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo < -0.05 || hi >= 0.05 || lo > -0.04 || hi < 0.04 {
		t.Fatalf("values in [%g, %g], want spread over [-0.05, 0.05)", lo, hi)
	}
	if got, want := init.String(), "RandomUniform(D=1000, min=-0.050000, max=0.050000)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestConstants(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   float32
		str    string
	}{
		{"zeros {}", 0, "Constants(D=3, C=0.000000)"},
		{"ones { dim_size: 3 }", 1, "Constants(D=3, C=1.000000)"},
		{"constants { constant: -2.5 }", -2.5, "Constants(D=3, C=-2.500000)"},
		{"constants {}", 0, "Constants(D=3, C=0.000000)"},
	} {
		t.Run(tc.config, func(t *testing.T) {
			init, err := New(parse(t, tc.config), 3)
			if err != nil {
				t.Fatal(err)
			}
			v := []float32{7, 7, 7, 7}
			init.Initialize(v)
			if v[0] != tc.want || v[1] != tc.want || v[2] != tc.want || v[3] != 7 {
				t.Fatalf("Initialize wrote %v, want 3 x %g then the untouched 7", v, tc.want)
			}
			if init.Dim() != 3 || init.String() != tc.str {
				t.Errorf("Dim() %d String() %q, want 3 %q", init.Dim(), init.String(), tc.str)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		config string
		dim    int
		want   string
	}{
		{"", 4, "Unsupported initializer: "},
		{"zeros { dim_size: 8 }", 4, "initializer: zeros.dim_size 8 does not match the embedding dimension 4"},
		{"random_uniform { dim_size: 2 }", 4, "initializer: random_uniform.dim_size 2 does not match the embedding dimension 4"},
		{"ones {}", 0, "initializer: dimension 0: want > 0"},
	} {
		t.Run(tc.config, func(t *testing.T) {
			_, err := New(parse(t, tc.config), tc.dim)
			if err == nil || err.Error() != tc.want || errkind.Of(err) != errkind.Value {
				t.Fatalf("New = %v (kind %s), want %q of kind Value", err, errkind.Of(err), tc.want)
			}
		})
	}
	if _, err := New(nil, 4); errkind.Of(err) != errkind.Value {
		t.Errorf("New(nil) = %v, want a Value error", err)
	}
}

func TestCombine(t *testing.T) {
	ones, err := New(parse(t, "ones {}"), 2)
	if err != nil {
		t.Fatal(err)
	}
	c3, err := New(parse(t, "constants { constant: 3 }"), 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Combine(ones, c3)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 4)
	c.Initialize(v)
	if c.Dim() != 3 || v[0] != 1 || v[1] != 1 || v[2] != 3 || v[3] != 0 {
		t.Fatalf("Combine: Dim %d, values %v; want 3, [1 1 3 0]", c.Dim(), v)
	}
	if want := "Constants(D=2, C=1.000000)|Constants(D=1, C=3.000000)"; c.String() != want {
		t.Errorf("String() = %q, want %q", c.String(), want)
	}
	if one, err := Combine(ones); err != nil || one != ones {
		t.Errorf("Combine(one) = %v, %v; want it back", one, err)
	}
	if _, err := Combine(); err == nil {
		t.Error("Combine() succeeded")
	}
}

// TestSharedConcurrent: goroutines drawing from one generator get in-range values, and together
// exactly the values one goroutine would draw (the stream is shared, none lost or repeated).
func TestSharedConcurrent(t *testing.T) {
	leakcheck.Check(t)
	const workers, perWorker, dim = 4, 200, 8
	g := NewGenerator(DefaultSeed)
	init, err := NewWithGenerator(parse(t, "random_uniform { minval: -1 maxval: 1 }"), dim, g)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[float32]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := make([]float32, dim)
			for range perWorker {
				init.Initialize(v)
				mu.Lock()
				for _, x := range v {
					seen[x]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	serial, err := NewWithGenerator(parse(t, "random_uniform { minval: -1 maxval: 1 }"), workers*perWorker*dim, NewGenerator(DefaultSeed))
	if err != nil {
		t.Fatal(err)
	}
	all := make([]float32, workers*perWorker*dim)
	serial.Initialize(all)
	for _, x := range all {
		seen[x]--
	}
	for x, n := range seen {
		if n != 0 {
			t.Fatalf("value %g drawn %+d times more concurrently than serially", x, n)
		}
	}
}
