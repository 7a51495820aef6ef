package faketfs

import (
	"strings"

	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// Tuple is a Python tuple of strings (ModelConf.signature_name).
type Tuple []string

// PyRepr formats a metadata value as Python's repr does, which is what the reference puts in
// GetModelMetadata's Any values: strings quoted ('a'), None, ints, lists [1, 2] and tuples
// ('a', 'b').
func PyRepr(v any) string {
	t, ok := v.(Tuple)
	if !ok {
		return pyfmt.Repr(v)
	}
	parts := make([]string, len(t))
	for i, s := range t {
		parts[i] = pyfmt.StrRepr(s)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// PyStr formats a metadata value as Python's str does: strings as they are, the rest as PyRepr.
func PyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return PyRepr(v)
}
