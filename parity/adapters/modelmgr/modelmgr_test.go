package modelmgr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/goldentest"
	"github.com/monolith-go/monolith/parity/harness"
)

const specPath = "agent_service/model_manager.yaml"

func registry() *harness.Registry {
	r := harness.NewRegistry()
	Register(r)
	return r
}

// TestGoldens: every model_manager case passes or is declared, and every declaration is used.
func TestGoldens(t *testing.T) {
	cases, policy := goldentest.Load(t, "model_manager", specPath)
	goldentest.RequireAll(t, cases, registry(), policy)
}

// TestGoldensBesidesDeclared checks that the declared cases differ only as declared: with the
// sub model paths of _models sorted on both sides and the reference's remove_read_lock bug replaced
// by the fixed outcome, every case passes with no declaration at all.
func TestGoldensBesidesDeclared(t *testing.T) {
	cases, policy := goldentest.Load(t, "model_manager", specPath)
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
	cases, _ := goldentest.Load(t, "model_manager", specPath)
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
