package agentsvc

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

const specPath = "agent_service/agent_service.yaml"

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

// load returns the agent_service cases and the declarations of this module's spec.
func load(t *testing.T) ([]harness.Case, harness.Policy) {
	t.Helper()
	root := repoRoot(t)
	all, err := harness.LoadDir(filepath.Join(root, "parity", "goldens", "python", "agent_service"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []harness.Case
	for _, c := range all {
		if c.Module == "agent_service/agent_service" {
			cases = append(cases, c)
		}
	}
	if len(cases) != 4 {
		t.Fatalf("%d agent_service cases, want 4", len(cases))
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

// TestGoldens: every agent_service case passes or is declared, none is skipped, and every
// declaration is used.
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

// fixedV2 is what v2_zkmirror answers once ZKMirror is asked with the server type's path name, by
// request index (the others, HeartBeat DENSE and GetResource, match the recording).
var fixedV2 = map[int]string{
	0: "addresses {\n  key: \"mm:ps:0\"\n  value {\n    address: \"10.1.2.3:100\"\n    address: \"10.1.2.4:100\"\n  }\n}\n",
	1: "addresses {\n  key: \"mm:entry:0\"\n  value {\n    address: \"10.1.2.3:200\"\n  }\n}\n",
	3: "address_list {\n  address: \"10.1.2.3:100\"\n  address: \"10.1.2.4:100\"\n}\n",
	4: "address_list {\n}\n",
	5: "address_list {\n  address: \"10.1.2.3:200\"\n}\n",
}

// TestV2DiffersOnlyAsDeclared: with the declared answers written into the recording (and its
// AttributeErrors removed), v2_zkmirror passes with no declaration at all.
func TestV2DiffersOnlyAsDeclared(t *testing.T) {
	cases, policy := load(t)
	var run []harness.Case
	for _, c := range cases {
		if _, ok := policy.Declared[c.Case]; !ok {
			continue
		}
		if c.Case != "v2_zkmirror" {
			t.Fatalf("unexpected declared case %s", c.Case)
		}
		var out []map[string]any
		if err := json.Unmarshal(c.Output, &out); err != nil {
			t.Fatal(err)
		}
		if len(out) != 7 {
			t.Fatalf("%d v2 outputs, want 7", len(out))
		}
		for i, text := range fixedV2 {
			if out[i]["response_text"] == text {
				t.Fatalf("#%d: the recording already answers %q", i, text)
			}
			delete(out[i], "grpc_error")
			out[i]["response_text"] = text
		}
		fixed, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		c.Output = fixed
		run = append(run, c)
	}
	if len(run) != 1 {
		t.Fatalf("%d declared cases, want 1", len(run))
	}
	var out bytes.Buffer
	s := harness.RunWithOptions(run, registry(), harness.Policy{}, &out, harness.Options{Verbose: true})
	if s.Passed != len(run) {
		t.Fatalf("v2_zkmirror differs in more than what is declared:\n%s", out.String())
	}
}

// TestV1FollowsTheSeed guards against answers that do not come from the seeded ZooKeeper tree:
// with one seeded replica turned UNKNOWN the recording no longer matches.
func TestV1FollowsTheSeed(t *testing.T) {
	cases, _ := load(t)
	for _, c := range cases {
		if c.Call != CallV1 {
			continue
		}
		t.Run(c.Case, func(t *testing.T) {
			var seed [][2]json.RawMessage
			if err := json.Unmarshal(c.Input["seed"], &seed); err != nil {
				t.Fatal(err)
			}
			seed[0][1] = json.RawMessage(`{"address": "192.168.1.2:7002", "stat": 0}`)
			b, err := json.Marshal(seed)
			if err != nil {
				t.Fatal(err)
			}
			in := map[string]json.RawMessage{}
			for k, v := range c.Input {
				in[k] = v
			}
			in["seed"] = b
			c.Input = in
			var out bytes.Buffer
			s := harness.RunWithOptions([]harness.Case{c}, registry(), harness.Policy{}, &out, harness.Options{Verbose: true})
			if s.Failed != 1 {
				t.Fatalf("want the changed seed to fail the recording:\n%s", out.String())
			}
			if !bytes.Contains(out.Bytes(), []byte("192.168.1.2:7002")) {
				t.Errorf("the failure does not name the replica turned UNKNOWN:\n%s", out.String())
			}
		})
	}
}
