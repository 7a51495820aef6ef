package zkmirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/monolith-go/monolith/parity/goldentest"
	"github.com/monolith-go/monolith/parity/harness"
)

const specPath = "agent_service/zk_mirror.yaml"

func registry() *harness.Registry {
	r := harness.NewRegistry()
	Register(r)
	return r
}

// TestGoldens: every zk_mirror case passes or is declared, and every declaration is used.
func TestGoldens(t *testing.T) {
	cases, policy := goldentest.Load(t, "zk_mirror", specPath)
	goldentest.RequireAll(t, cases, registry(), policy)
}

// TestGoldensBesidesDeclared checks that the declared cases differ only as declared: with the
// reference's duplicated get_model_replicas entries removed and, on the real ZooKeeper, the
// reported resource mirrored, every case passes with no declaration at all.
func TestGoldensBesidesDeclared(t *testing.T) {
	cases, policy := goldentest.Load(t, "zk_mirror", specPath)
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
