package spec

import (
	"strings"
	"testing"
)

func TestRules(t *testing.T) {
	head := "module: monolith/a/b.py\ngo_package: pkg/b\nparity:\n  - symbol: f\n    status: different\n    why: w\n    calls: [f(x), g(x)]\n    rules:\n"
	valid := head + `      - name: bad_number
        why: "any non-numeric x is a Value error"
        when:
          call: f(x)
          reference: value
          input:
            - {key: x, match: '[a-z]'}
        expect_error: Value
        expect_message: 'not a number'
`
	s, err := Parse("specs/t.yaml", []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Parity[0].Rules[0]
	if r.Name != "bad_number" || r.When.Call != "f(x)" || r.When.Reference != "value" || r.ExpectError != "Value" ||
		r.ExpectMessage != "not a number" || len(r.When.Input) != 1 || r.When.Input[0].Key != "x" || r.Line != 9 {
		t.Fatalf("rule = %+v", r)
	}
	if got := r.RuleCalls(&s.Parity[0]); len(got) != 1 || got[0] != "f(x)" {
		t.Fatalf("RuleCalls = %v", got)
	}
	r.When.Call = ""
	if got := r.RuleCalls(&s.Parity[0]); len(got) != 2 {
		t.Fatalf("RuleCalls without when.call = %v, want the symbol's two calls", got)
	}

	tests := []struct{ name, body, want string }{
		{"no why", head + "      - {name: r, expect_error: Value}\n", `missing required key "why"`},
		{"twice", head + "      - {name: r, why: w, expect_error: Value}\n      - {name: r, why: w, expect_error: Value}\n",
			`specs/t.yaml:10: parity "f": rule "r" defined twice (first at line 9)`},
		{"message without kind", head + "      - {name: r, why: w, expect_message: x, when: {input: [{key: x, match: y}]}}\n", `expect_message needs expect_error`},
		{"unconstrained", head + "      - {name: r, why: w, when: {call: f(x)}}\n", `give expect_error or when.input`},
		{"foreign call", head + "      - {name: r, why: w, expect_error: Value, when: {call: h(x)}}\n", `when.call "h(x)" is not one of the symbol's calls`},
		{"unknown when key", head + "      - {name: r, why: w, expect_error: Value, when: {case: c}}\n", `unknown key "case"`},
		{"input without match", head + "      - {name: r, why: w, when: {input: [{key: x}]}}\n", `missing required key "match"`},
		{"no calls", "module: monolith/a/b.py\ngo_package: pkg/b\nparity:\n  - symbol: f\n    status: ported\n    rules:\n      - {name: r, why: w, expect_error: Value}\n",
			`the symbol lists no calls`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("specs/t.yaml", []byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
