package zkmirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

const specPath = "agent_service/zk_mirror.yaml"

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

// load returns the zk_mirror cases and the declarations of this module's spec.
func load(t *testing.T) ([]harness.Case, harness.Policy) {
	t.Helper()
	root := repoRoot(t)
	cases, err := harness.LoadDir(filepath.Join(root, "parity", "goldens", "python", "zk_mirror"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 4 {
		t.Fatalf("%d zk_mirror cases, want 4", len(cases))
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

// TestGoldens: every zk_mirror case passes or is declared, and every declaration is used.
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
// reference's duplicated get_model_replicas entries removed and, on the real ZooKeeper, the
// reported resource mirrored, every case passes with no declaration at all.
func TestGoldensBesidesDeclared(t *testing.T) {
	cases, policy := load(t)
	var run []harness.Case
	for _, c := range cases {
		if _, ok := policy.Declared[c.Case]; !ok {
			continue
		}
		fixed, err := withoutDeclared(c.Output, c.Call == CallRealSeq)
		if err != nil {
			t.Fatalf("%s: %v", c.Case, err)
		}
		if bytes.Equal(fixed, c.Output) {
			t.Fatalf("%s: the rewrite changed nothing", c.Case)
		}
		c.Output = fixed
		run = append(run, c)
	}
	if len(run) != len(policy.Declared) {
		t.Fatalf("%d declared cases found, spec declares %d", len(run), len(policy.Declared))
	}
	var out bytes.Buffer
	s := harness.RunWithOptions(run, registry(), harness.Policy{}, &out, harness.Options{Verbose: true})
	if s.Passed != len(run) {
		t.Fatalf("the declared cases differ in more than what is declared:\n%s", out.String())
	}
}

// withoutDeclared rewrites a golden output into what the fixed behaviour gives.
func withoutDeclared(raw json.RawMessage, real bool) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	steps, ok := out["steps"].([]any)
	if !ok {
		return nil, fmt.Errorf("no steps")
	}
	var resourcePath string
	var resourceArgs any
	for i, s := range steps {
		step, ok := s.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("step %d is not an object", i)
		}
		switch step["op"] {
		case "get_model_replicas":
			res, _ := step["result"].(map[string]any)
			for k, v := range res {
				res[k] = dedupe(v.([]any))
			}
		case "report_resource":
			if real {
				args := step["args"].(map[string]any)
				resourcePath = fmt.Sprintf("/bzidrz/resource/%v:%v", args["shard_id"], args["replica_id"])
				resourceArgs = args
			}
		case "resources":
			if resourceArgs != nil {
				step["result"] = []any{resourceArgs}
			}
		}
		if resourcePath != "" {
			keys := step["mirror_data_keys"].([]any)
			var ks []string
			for _, k := range keys {
				ks = append(ks, k.(string))
			}
			ks = append(ks, resourcePath)
			sort.Strings(ks)
			keys = keys[:0]
			for _, k := range ks {
				keys = append(keys, k)
			}
			step["mirror_data_keys"] = keys
		}
	}
	return json.Marshal(out)
}

// dedupe drops repeated elements (compared as JSON), keeping the first.
func dedupe(l []any) []any {
	var out []any
	seen := map[string]bool{}
	for _, v := range l {
		b, _ := json.Marshal(v)
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, v)
		}
	}
	return out
}
