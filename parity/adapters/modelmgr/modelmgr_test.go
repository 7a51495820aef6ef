package modelmgr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

const specPath = "agent_service/model_manager.yaml"

func repoRoot(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			t.Fatal("no go.mod above the test's directory")
		}
		d = parent
	}
}

// load returns the model_manager cases and the policy declared by this module's spec.
func load(t *testing.T) ([]harness.Case, harness.Policy) {
	t.Helper()
	root := repoRoot(t)
	cases, err := harness.LoadDir(filepath.Join(root, "parity", "goldens", "python", "model_manager"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no model_manager cases")
	}
	specs, err := spec.LoadDir(filepath.Join(root, "specs"))
	if err != nil {
		t.Fatal(err)
	}
	p := harness.Policy{ExactMessages: map[string]bool{}, Declared: map[string]harness.Declaration{}}
	found := false
	for _, s := range specs {
		if s.Path != specPath {
			continue
		}
		found = true
		for _, sym := range s.Parity {
			for _, d := range sym.Declared {
				p.Declared[d.Case] = harness.Declaration{Symbol: sym.Symbol, Why: d.Why, ExpectError: d.ExpectError}
			}
		}
	}
	if !found {
		t.Fatalf("no spec %s", specPath)
	}
	return cases, p
}

func registry() *harness.Registry {
	r := harness.NewRegistry()
	Register(r)
	return r
}

// TestGoldens: every model_manager case passes or is declared, and every declaration is used.
func TestGoldens(t *testing.T) {
	cases, policy := load(t)
	var out bytes.Buffer
	s := harness.RunWithOptions(cases, registry(), policy, &out, harness.Options{Verbose: true})
	t.Logf("\n%s", out.String())
	if s.Failed > 0 || s.Skipped > 0 {
		t.Fatalf("%d failed, %d skipped", s.Failed, s.Skipped)
	}
	for _, r := range s.Results {
		if r.Note != "" {
			t.Errorf("%s: %s", r.Case, r.Note)
		}
	}
	if s.Declared != len(policy.Declared) {
		t.Errorf("%d cases declared, spec declares %d", s.Declared, len(policy.Declared))
	}
}

// TestGoldensBesidesDeclared checks that the declared cases differ only as declared: with the
// sub model paths of _models sorted on both sides and the reference's remove_read_lock bug replaced
// by the fixed outcome, every case passes with no declaration at all.
func TestGoldensBesidesDeclared(t *testing.T) {
	cases, policy := load(t)
	for i := range cases {
		c := &cases[i]
		if _, ok := policy.Declared[c.Case]; !ok {
			continue
		}
		fixed, err := withoutDeclared(c.Output)
		if err != nil {
			t.Fatalf("%s: %v", c.Case, err)
		}
		c.Output = fixed
	}
	reg := harness.NewRegistry()
	reg.Register(Call, func(c *harness.Ctx, in harness.Input) (any, error) {
		v, err := loopOnceRounds(c, in)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return withoutDeclared(b)
	})
	var out bytes.Buffer
	s := harness.RunWithOptions(cases, reg, harness.Policy{}, &out, harness.Options{Verbose: true})
	if s.Failed > 0 || s.Passed != len(cases) {
		t.Fatalf("\n%s", out.String())
	}
}

// withoutDeclared rewrites a round list: sorted sub model paths, remove_read_lock "ok".
func withoutDeclared(raw []byte) (json.RawMessage, error) {
	var rounds []map[string]any
	if err := json.Unmarshal(raw, &rounds); err != nil {
		return nil, err
	}
	for _, r := range rounds {
		r["remove_read_lock"] = "ok"
		models, ok := r["models"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("models: %v", r["models"])
		}
		for _, vs := range models {
			for _, v := range vs.([]any) {
				paths := v.([]any)[1].([]any)
				sort.Slice(paths, func(i, j int) bool { return paths[i].(string) < paths[j].(string) })
			}
		}
	}
	return json.Marshal(rounds)
}

// TestStaleReadLockRemoved: the stray lock the reference choked on is gone after the round.
func TestStaleReadLockRemoved(t *testing.T) {
	cases, _ := load(t)
	for _, c := range cases {
		if c.Case != "loop_once_stale_read_lock" {
			continue
		}
		reg := harness.NewRegistry()
		var after []string
		reg.Register(Call, func(ctx *harness.Ctx, in harness.Input) (any, error) {
			v, err := loopOnceRounds(ctx, in)
			if err != nil {
				return nil, err
			}
			after, err = tree(filepath.Join(ctx.TempDir(), "src"))
			return v, err
		})
		harness.Run([]harness.Case{c}, reg, harness.Policy{}, &bytes.Buffer{})
		if len(after) == 0 {
			t.Fatal("adapter did not run")
		}
		for _, p := range after {
			if strings.HasSuffix(p, ".read.lock") {
				t.Errorf("%s left in the source path: %v", p, after)
			}
		}
		return
	}
	t.Fatal("no loop_once_stale_read_lock case")
}
