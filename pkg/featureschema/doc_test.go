package featureschema

import (
	"os"
	"strings"
	"testing"
)

// TestFormatDocExample: the example in the format's generated reference is a valid schema, so that
// the doc users copy from cannot rot.
func TestFormatDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../gen/spec/go/feature_schema/format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("format.md has no yaml example:\n%s", doc)
	}
	s, err := Parse([]byte(example), "format.md")
	if err != nil {
		t.Fatalf("format.md's example: %v", err)
	}
	if len(s.Features) != 4 || s.DenseDim() != 4 {
		t.Errorf("format.md's example: %d features, dense dim %d", len(s.Features), s.DenseDim())
	}
}
