package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// testModule is the golden module of every generated case.
const testModule = "agent_service/fake"

// registerTestAdapter is the adapter a real module package would expose as Register: it replays the
// calls of the generated cases below.
func registerTestAdapter(r *Registry) {
	r.Register("echo", func(_ *Ctx, in Input) (any, error) {
		return in.Raw("value")
	})
	r.Register("raise", func(_ *Ctx, in Input) (any, error) {
		kind, err := in.Str("kind")
		if err != nil {
			return nil, err
		}
		msg, err := in.Str("message")
		if err != nil {
			return nil, err
		}
		k, err := errkind.Parse(kind)
		if err != nil {
			return nil, err
		}
		if k == errkind.Unknown {
			return nil, errors.New(msg)
		}
		return nil, errkind.New(k, "%s", msg)
	})
	r.Register("float", func(_ *Ctx, in Input) (any, error) {
		var x float64
		if err := in.Decode("x", &x); err != nil {
			return nil, err
		}
		return map[string]any{"float": Float(x), "plain": x}, nil
	})
	r.Register("listen", func(_ *Ctx, in Input) (any, error) {
		port, err := in.Int("port")
		if err != nil {
			return nil, err
		}
		return map[string]any{"port": port, "addr": fmt.Sprintf("10.0.0.1:%d", port),
			"cmd": fmt.Sprintf("srv --port=%d --http=%d", port, port+1)}, nil
	})
	r.Register("tmpfile", func(c *Ctx, _ Input) (any, error) {
		p := filepath.Join(c.TempDir(), "platform_config_file.cfg")
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			return nil, err
		}
		return map[string]string{"path": p, "cmd": "tfs --platform_config_file=" + p}, nil
	})
	r.Register("results", func(_ *Ctx, _ Input) (any, error) {
		return []any{
			Value(1),
			ErrorValue(errkind.New(errkind.Value, "bad value")),
			ValueOrError(nil, errkind.New(errkind.Precondition, "assert")),
			ValueOrError("ok", nil),
		}, nil
	})
	r.Register("panic", func(_ *Ctx, _ Input) (any, error) {
		var m map[string]int
		m["boom"] = 1 // a nil map write: the kind of bug the harness must survive
		return nil, nil
	})
	r.Register("env", func(c *Ctx, _ Input) (any, error) {
		seen := map[string]string{}
		for _, k := range managedEnv {
			if v, ok := os.LookupEnv(k); ok {
				seen[k] = v
			}
		}
		os.Setenv("PARITY_TEST_ADAPTER_LEAK", "1") // must not outlive the case
		return map[string]any{"env": seen, "ctx_env": c.Env}, nil
	})
	r.Register("badinput", func(_ *Ctx, in Input) (any, error) {
		return in.Int("nope")
	})
}

// goldenCase is a case file to write, in the golden schema.
type goldenCase struct {
	name   string
	call   string
	input  map[string]any
	output any
	pyErr  *PyError
}

func (g goldenCase) json() []byte {
	in := g.input
	if in == nil {
		in = map[string]any{}
	}
	if _, ok := in["env"]; !ok {
		in["env"] = map[string]string{}
	}
	var errv any
	if g.pyErr != nil {
		errv = g.pyErr
	}
	b, err := json.MarshalIndent(map[string]any{"module": testModule, "case": g.name, "call": g.call,
		"input": in, "output": g.output, "error": errv}, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// writeCases writes the cases as <dir>/<sub>/<name>.json and returns dir.
func writeCases(t *testing.T, sub string, cases ...goldenCase) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if err := os.WriteFile(filepath.Join(dir, sub, c.name+".json"), c.json(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
