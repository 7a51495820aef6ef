package harness

import (
	"encoding/json"
	"errors"
	"math"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// Float is a float64 that marshals like Python's json module writes a float (repr): always with a
// fraction or an exponent, so a Python float (0.0) never compares equal to a Python int (0).
type Float float64

// MarshalJSON writes f as Python's repr does: the shortest round-tripping digits, in exponent form
// when the decimal point would sit more than 16 digits left or 4 zeros right of them.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		// Python writes NaN/Infinity, which is not JSON and cannot be read back by the harness.
		return nil, errors.New("harness.Float: NaN and Inf have no JSON form")
	}
	return []byte(f.String()), nil
}

// String returns Python's repr of f.
func (f Float) String() string { return pyfmt.Float(float64(f)) }

// Value wraps a successful result as {"value": v}, the counterpart of ErrorValue in goldens that
// record several calls each of which may raise.
func Value(v any) any { return valueResult{Value: v} }

type valueResult struct {
	Value any `json:"value"`
}

// ErrorValue wraps an error as {"error": {"kind": <errkind>, "message": err.Error()}}. It matches a
// golden {"error": {"type": T, "message": M}} when errkind.Of(err) is the kind T maps to.
func ErrorValue(err error) any { return errorResult{err: err} }

// ValueOrError returns ErrorValue(err) when err is non-nil, else Value(v).
func ValueOrError(v any, err error) any {
	if err != nil {
		return ErrorValue(err)
	}
	return Value(v)
}

type errorResult struct{ err error }

type errorBody struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e errorResult) MarshalJSON() ([]byte, error) {
	if e.err == nil {
		return nil, errors.New("harness.ErrorValue(nil): use Value or Result for successes")
	}
	body := errorBody{Kind: errkind.Of(e.err).String(), Message: e.err.Error()}
	return json.Marshal(map[string]errorBody{"error": body})
}
