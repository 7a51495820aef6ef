package agentsvc

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/monolith-go/monolith/parity/goldentest"
	"github.com/monolith-go/monolith/parity/harness"
)

const specPath = "agent_service/agent_service.yaml"

func registry() *harness.Registry {
	r := harness.NewRegistry()
	Register(r)
	return r
}

// TestGoldens: every agent_service case passes or is declared, none is skipped, and every
// declaration is used.
func TestGoldens(t *testing.T) {
	cases, policy := goldentest.Load(t, "agent_service", specPath)
	goldentest.RequireAll(t, cases, registry(), policy)
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
	cases, policy := goldentest.Load(t, "agent_service", specPath)
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
	cases, _ := goldentest.Load(t, "agent_service", specPath)
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
