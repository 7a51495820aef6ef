package policy

import (
	"encoding/json"
	"strconv"
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

func TestRulesFromSpecs(t *testing.T) {
	parse := func(t *testing.T, path, body string) *spec.Spec {
		t.Helper()
		s, err := spec.Parse("specs/"+path, []byte("module: monolith/agent_service/"+strings.TrimSuffix(path, ".yaml")+
			".py\ngo_package: pkg/x\nparity:\n  - symbol: F\n    status: different\n    why: w\n    calls: [f(a), g(a)]\n    rules:\n"+body))
		if err != nil {
			t.Fatal(err)
		}
		s.Path = path
		return s
	}
	good := `      - name: bad_number
        why: any non-numeric value is a Value error
        when:
          call: f(a)
          reference: value
          input: [{key: a, match: '^[a-z]+$'}]
        expect_error: Value
        expect_message: not a number
      - name: upper
        why: Go keeps the case
        when:
          reference: AssertionError
          input: [{key: a, match: '[A-Z]'}]
`
	p, err := FromSpecs([]*spec.Spec{parse(t, "x.yaml", good)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 2 {
		t.Fatalf("Rules = %+v", p.Rules)
	}
	r := p.Rules[0]
	if r.Name != "bad_number" || r.Symbol != "F" || len(r.Calls) != 1 || r.Calls[0] != "f(a)" || r.Reference != "value" ||
		r.ExpectError != "Value" || r.ExpectMessage.String() != "not a number" || len(r.Input) != 1 || r.Input[0].Key != "a" {
		t.Fatalf("rule 0 = %+v", r)
	}
	if u := p.Rules[1]; len(u.Calls) != 2 || u.ExpectError != "" || u.ExpectMessage != nil {
		t.Fatalf("rule 1 (all the symbol's calls, no expectation) = %+v", u)
	}
	// The built rule selects what its spec says and nothing unrelated.
	sel := func(call, a string, pyErr *harness.PyError) bool {
		return r.Selects(&harness.Case{Call: call, Input: map[string]json.RawMessage{"a": json.RawMessage(strconv.Quote(a))}, Error: pyErr})
	}
	if !sel("f(a)", "abc", nil) || sel("g(a)", "abc", nil) || sel("f(a)", "ab1", nil) || sel("f(a)", "abc", &harness.PyError{Type: "ValueError"}) {
		t.Fatal("rule bad_number selects the wrong cases")
	}

	for _, tc := range []struct{ name, body, want string }{
		{"bad kind", "      - {name: r, why: w, expect_error: Bogus}\n", `specs/x.yaml:9: rule "r": expect_error: errkind: unknown kind "Bogus"`},
		{"bad message regexp", "      - {name: r, why: w, expect_error: Value, expect_message: '('}\n", `rule "r": expect_message: error parsing regexp`},
		{"bad input regexp", "      - {name: r, why: w, when: {input: [{key: a, match: '[a'}]}}\n", `rule "r": when.input a: error parsing regexp`},
		{"bad reference", "      - {name: r, why: w, expect_error: Value, when: {reference: ValueErr}}\n", `when.reference: want value, error or a Python exception class`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FromSpecs([]*spec.Spec{parse(t, "x.yaml", tc.body)}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	one := "      - {name: r, why: w, expect_error: Value}\n"
	if _, err := FromSpecs([]*spec.Spec{parse(t, "x.yaml", one), parse(t, "y.yaml", one)}); err == nil ||
		!strings.Contains(err.Error(), `specs/y.yaml:9: rule "r" already defined at specs/x.yaml:9`) {
		t.Fatalf("a rule name in two specs: got %v", err)
	}
}
