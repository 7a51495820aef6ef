package optimizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/embedding/optimizer/cctext"
)

// goldenDir holds the reference's recorded cases (parity/goldens/python/hash_table_optimizer); the
// parity adapter replays them too, this test does so for both Adagrad kernels.
const goldenDir = "../../../parity/goldens/python/hash_table_optimizer"

type goldenCase struct {
	Input struct {
		ConfigText string        `json:"config_text"`
		Dim        int           `json:"dim"`
		NumInit    []json.Number `json:"num_init"`
		Steps      []struct {
			GlobalStep    int64         `json:"global_step"`
			Grad          []json.Number `json:"grad"`
			LearningRates []json.Number `json:"learning_rates"`
		} `json:"steps"`
	} `json:"input"`
	Output *struct {
		DumpText     string          `json:"dump_text"`
		NumAfterStep [][]json.Number `json:"num_after_step"`
	} `json:"output"`
}

func goldenFloats(t *testing.T, raw []json.Number) []float32 {
	t.Helper()
	out := make([]float32, len(raw))
	for i, r := range raw {
		f, err := strconv.ParseFloat(string(r), 32)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = float32(f)
	}
	return out
}

// TestGoldensBothKernels replays every recorded case with the assembly Adagrad kernel (where the
// CPU has AVX and FMA) and with the portable Go one: values and dumps must be the reference's bits.
func TestGoldensBothKernels(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens under %s: %v", goldenDir, err)
	}
	kernels := map[string]bool{"go": false}
	if hasAVXFMA() {
		kernels["avx"] = true
	}
	saved := useAVX
	defer func() { useAVX = saved }()
	for name, avx := range kernels {
		useAVX = avx
		for _, f := range files {
			t.Run(name+"/"+strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var c goldenCase
				if err := json.Unmarshal(data, &c); err != nil {
					t.Fatal(err)
				}
				if c.Output == nil {
					t.Skip("the reference raised; the parity adapter checks the error")
				}
				o := mustNew(t, c.Input.ConfigText, c.Input.Dim)
				w := goldenFloats(t, c.Input.NumInit)
				state := make([]float32, o.StateSize())
				o.Init(state)
				for i, s := range c.Input.Steps {
					o.Apply(w, state, goldenFloats(t, s.Grad), goldenFloats(t, s.LearningRates), s.GlobalStep)
					if want := goldenFloats(t, c.Output.NumAfterStep[i]); !sameFloats(w, want) {
						t.Fatalf("step %d: %v, reference %v", i+1, w, want)
					}
				}
				if got := cctext.Format(o.Dump(state)); got != c.Output.DumpText {
					t.Errorf("dump\n%s\nreference\n%s", got, c.Output.DumpText)
				}
			})
		}
	}
}
