package featureschema

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fuzzseed"
)

// FuzzParse: no input makes Parse panic; every error is one line, an *Error naming the file; a
// schema that parses describes itself, and every label rule it holds maps 0 and 1 without a
// panic. Seeds are the golden cases' inputs (parity/goldens/go/feature_schema/describe); run with
//
//	go test ./pkg/featureschema -run='^$' -fuzz='^FuzzParse$' -fuzztime=60s
func FuzzParse(f *testing.F) {
	for _, in := range fuzzseed.GoInputs(f, "feature_schema/describe") {
		f.Add(in)
	}
	f.Add([]byte("label: &a {}\nfeatures: [*a]\n"))
	f.Add([]byte("label: {}\nfeatures: [{name: a, kind: dense, dim: 99999999999999999999}]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse(in, "f.yaml")
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(msg, "f.yaml") {
				t.Fatalf("error %T %q is not an *Error naming the file", err, msg)
			}
			return
		}
		out, err := s.Describe()
		if err != nil || bytes.Count(out, []byte("\n")) != len(s.Features)+2 {
			t.Fatalf("a valid schema does not describe itself: %q, %v", out, err)
		}
		for _, v := range []float64{0, 1} {
			if _, err := s.Label.Apply(v); err != nil {
				t.Fatalf("Apply(%v): %v", v, err)
			}
		}
	})
}

// FuzzFromFlags: no flag values make FromFlags panic, and a schema it returns is valid.
func FuzzFromFlags(f *testing.F) {
	f.Add("dense:4", "slot_1,slot_2,user:7")
	f.Add("a:1,b", ":3")
	f.Add("", "slot_99999999999999999999")
	f.Fuzz(func(t *testing.T, dense, sparse string) {
		s, err := FromFlags(dense, sparse)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("FromFlags(%q, %q) returned an invalid schema: %v", dense, sparse, err)
		}
	})
}
