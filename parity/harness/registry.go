package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Func runs one golden call against the Go port. It returns the value to compare with the case's
// output, or the error to compare with the case's exception.
type Func func(c *Ctx, in Input) (any, error)

// Registry maps golden `call` names to the adapters that replay them.
type Registry struct {
	funcs map[string]Func
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{funcs: map[string]Func{}} }

// Register adds the adapter for call. Registering a call twice (or a nil adapter) is a programming
// error and panics, so a conflict between adapter packages cannot go unnoticed.
func (r *Registry) Register(call string, fn Func) {
	if call == "" || fn == nil {
		panic("harness: Register needs a call name and a non-nil Func")
	}
	if _, dup := r.funcs[call]; dup {
		panic(fmt.Sprintf("harness: call %q registered twice", call))
	}
	r.funcs[call] = fn
}

// Lookup returns the adapter for call.
func (r *Registry) Lookup(call string) (Func, bool) {
	fn, ok := r.funcs[call]
	return fn, ok
}

// Calls returns the registered call names, sorted.
func (r *Registry) Calls() []string {
	calls := make([]string, 0, len(r.funcs))
	for c := range r.funcs {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	return calls
}

// Ctx is what an adapter gets besides the input: per-case resources.
type Ctx struct {
	// Env is input.env, the variables set (all other relevant ones are unset) while the case runs.
	Env map[string]string
	tmp string
}

// TempDir returns a directory created for this case and removed after it. Golden paths written as
// "<tmp>..." stand for this directory, so adapters must place their temporary files here.
func (c *Ctx) TempDir() string { return c.tmp }

// InputError reports a case input the adapter could not read. It is a harness or adapter bug, never
// an outcome of the port, so it fails the case even when the reference raised.
type InputError struct {
	Key string
	Msg string
}

func (e *InputError) Error() string { return fmt.Sprintf("input %q: %s", e.Key, e.Msg) }

// Input is the case's `input` object with typed accessors whose errors name the key.
type Input map[string]json.RawMessage

// Has reports whether key is present (even as null).
func (in Input) Has(key string) bool {
	_, ok := in[key]
	return ok
}

// Raw returns the JSON text of key.
func (in Input) Raw(key string) (json.RawMessage, error) {
	raw, ok := in[key]
	if !ok {
		return nil, &InputError{Key: key, Msg: "missing"}
	}
	return raw, nil
}

// Decode unmarshals key into v.
func (in Input) Decode(key string, v any) error {
	raw, err := in.Raw(key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &InputError{Key: key, Msg: err.Error()}
	}
	return nil
}

// Str returns key as a string.
func (in Input) Str(key string) (string, error) {
	raw, err := in.Raw(key)
	if err != nil {
		return "", err
	}
	var s string
	if !isJSONString(raw) || json.Unmarshal(raw, &s) != nil {
		return "", wrongType(key, "a string", raw)
	}
	return s, nil
}

// OptStr returns key as a string, or nil when it is JSON null (Python None).
func (in Input) OptStr(key string) (*string, error) {
	raw, err := in.Raw(key)
	if err != nil {
		return nil, err
	}
	if isNull(raw) {
		return nil, nil
	}
	s, err := in.Str(key)
	if err != nil {
		return nil, wrongType(key, "a string or null", raw)
	}
	return &s, nil
}

// Int returns key as an integer; a float literal (1.0) is rejected, as Python would keep it a float.
func (in Input) Int(key string) (int, error) {
	raw, err := in.Raw(key)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil {
		return 0, wrongType(key, "an integer", raw)
	}
	return n, nil
}

// Bool returns key as a boolean.
func (in Input) Bool(key string) (bool, error) {
	raw, err := in.Raw(key)
	if err != nil {
		return false, err
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType(key, "true or false", raw)
}

func wrongType(key, want string, raw json.RawMessage) error {
	return &InputError{Key: key, Msg: fmt.Sprintf("want %s, got %s", want, shorten(string(raw), 60))}
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func isJSONString(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '"'
}
