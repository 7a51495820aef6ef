package policy

import (
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

func TestFromSpecs(t *testing.T) {
	parse := func(t *testing.T, body string) []*spec.Spec {
		t.Helper()
		s, err := spec.Parse("specs/x.yaml", []byte("module: monolith/agent_service/x.py\ngo_package: pkg/x\n"+body))
		if err != nil {
			t.Fatal(err)
		}
		s.Path = "x.yaml"
		return []*spec.Spec{s}
	}
	p, err := FromSpecs(parse(t, `parity:
  - symbol: A
    status: ported
    calls: [a1, a2]
    messages: exact
  - symbol: B
    status: ported
    calls: [b]
    messages: kind
    declared:
      - case: b_case
        why: because
        expect_error: Runtime
`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.ExactMessages["a1"] || !p.ExactMessages["a2"] || p.ExactMessages["b"] || len(p.ExactMessages) != 2 {
		t.Fatalf("ExactMessages = %v", p.ExactMessages)
	}
	want := harness.Declaration{Symbol: "B", Why: "because", ExpectError: "Runtime"}
	if p.Declared["b_case"] != want || len(p.Declared) != 1 {
		t.Fatalf("Declared = %v", p.Declared)
	}

	_, err = FromSpecs(parse(t, `parity:
  - symbol: B
    status: ported
    declared:
      - case: b_case
        why: because
        expect_error: Bogus
`))
	if err == nil || !strings.Contains(err.Error(), "specs/x.yaml:") || !strings.Contains(err.Error(), "Bogus") {
		t.Fatalf("bad expect_error: got %v", err)
	}

	twice := parse(t, `parity:
  - symbol: B
    status: ported
    declared:
      - case: b_case
        why: because
`)
	twice = append(twice, twice[0])
	if _, err := FromSpecs(twice); err == nil || !strings.Contains(err.Error(), "already declared") {
		t.Fatalf("a case declared twice: got %v", err)
	}
}
