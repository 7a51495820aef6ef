package hashtableoptimizer

import (
	"bytes"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
)

const goldens = "../../goldens/python/hash_table_optimizer"

// TestGoldens replays the recorded C++ cases: every value after every step and the final dump text
// must be the reference's, bit for bit.
func TestGoldens(t *testing.T) {
	cases, err := harness.LoadDir(goldens)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no cases under %s", goldens)
	}
	r := harness.NewRegistry()
	Register(r)
	var out bytes.Buffer
	s := harness.Run(cases, r, harness.Policy{ExactMessages: map[string]bool{Call: true}}, &out)
	if s.Failed != 0 || s.Skipped != 0 || s.Declared != 0 || s.Passed != len(cases) {
		t.Fatalf("%d passed of %d:\n%s", s.Passed, len(cases), out.String())
	}
}
