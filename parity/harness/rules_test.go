package harness

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// valueRule covers "raise" cases whose input message mentions a number, where the reference
// returned a value and Go fails with a Value error saying "not a number".
func valueRule() Rule {
	return Rule{Name: "not_a_number", Symbol: "Raise", Why: "Go refuses what is not a number",
		Calls: []string{"raise"}, Reference: RefValue,
		Input:       []InputMatch{{Key: "message", Match: regexp.MustCompile(`number`)}},
		ExpectError: "Value", ExpectMessage: regexp.MustCompile(`not a number`)}
}

func TestRuleVerdicts(t *testing.T) {
	rules := func(rs ...Rule) Policy { return Policy{Rules: rs} }
	withCalls := func(r Rule, calls ...string) Rule { r.Calls = calls; return r }
	withRef := func(r Rule, ref string) Rule { r.Reference = ref; return r }
	anyOutcome := Rule{Name: "echo_diff", Symbol: "Echo", Why: "Go echoes its own way", Calls: []string{"echo"},
		Input: []InputMatch{{Key: "value", Match: regexp.MustCompile(`^\{"a":`)}}}
	tests := []struct {
		name       string
		c          goldenCase
		policy     Policy
		wantStatus Status
		wantDetail string
	}{
		{"rule met", goldenCase{call: "raise", input: raise("Value", "x: not a number"), output: 1},
			rules(valueRule()), StatusDeclared, "rule not_a_number: Go refuses what is not a number"},
		{"rule selects, wrong kind", goldenCase{call: "raise", input: raise("Type", "x: not a number"), output: 1},
			rules(valueRule()), StatusFail, "rule not_a_number of Raise not met: it expects an error of kind Value, got error of kind Type"},
		{"rule selects, wrong message", goldenCase{call: "raise", input: raise("Value", "number too big"), output: 1},
			rules(valueRule()), StatusFail, `it expects a message matching "not a number", got "number too big"`},
		{"rule selects, value instead of error", goldenCase{call: "echo", input: map[string]any{"value": 1, "message": "number"}, output: 2},
			rules(withCalls(valueRule(), "echo")), StatusFail, "it expects an error of kind Value, got value 1"},
		// A rule never matches an unrelated case: other call, other input, other reference outcome.
		{"unrelated call", goldenCase{call: "echo", input: map[string]any{"value": 1, "message": "not a number"}, output: 2},
			rules(valueRule()), StatusFail, "$: expected 2, got 1"},
		{"unrelated input", goldenCase{call: "raise", input: raise("Value", "x: not a string"), output: 1},
			rules(valueRule()), StatusFail, "expected a value, got error of kind Value: x: not a string"},
		{"input key absent", goldenCase{call: "echo", input: map[string]any{"value": 1}, output: 2},
			rules(withCalls(valueRule(), "echo")), StatusFail, "$: expected 2, got 1"},
		{"reference raised, rule wants a value", goldenCase{call: "raise", input: raise("Value", "not a number"), pyErr: pyErr("TypeError", "t")},
			rules(valueRule()), StatusFail, "expected TypeError (kind Type), got error of kind Value"},
		{"reference class", goldenCase{call: "raise", input: raise("Value", "not a number"), pyErr: pyErr("TypeError", "t")},
			rules(withRef(valueRule(), "TypeError")), StatusDeclared, "rule not_a_number"},
		{"reference class differs", goldenCase{call: "raise", input: raise("Value", "not a number"), pyErr: pyErr("TypeError", "t")},
			rules(withRef(valueRule(), "KeyError")), StatusFail, "expected TypeError"},
		{"reference any error", goldenCase{call: "raise", input: raise("Value", "not a number"), pyErr: pyErr("TypeError", "t")},
			rules(withRef(valueRule(), RefError)), StatusDeclared, "rule not_a_number"},
		{"passing case untouched", goldenCase{call: "raise", input: raise("Value", "not a number"), pyErr: pyErr("ValueError", "v")},
			rules(withRef(valueRule(), "")), StatusPass, ""},
		{"rule without expectation, input selects", goldenCase{call: "echo", input: map[string]any{"value": map[string]any{"a": 1}}, output: 2},
			rules(anyOutcome), StatusDeclared, "rule echo_diff: Go echoes its own way"},
		{"rule without expectation, input does not select", goldenCase{call: "echo", input: map[string]any{"value": map[string]any{"b": 1}}, output: 2},
			rules(anyOutcome), StatusFail, "$: expected 2"},
		{"second rule met", goldenCase{call: "raise", input: raise("Value", "x: not a number"), output: 1},
			rules(withCalls(anyOutcome, "raise"), valueRule()), StatusDeclared, "rule not_a_number"},
		{"case declaration wins", goldenCase{call: "raise", input: raise("Type", "not a number"), output: 1},
			Policy{Rules: []Rule{valueRule()}, Declared: map[string]Declaration{"c": {Symbol: "Raise", Why: "by case"}}},
			StatusDeclared, "by case"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.name = "c"
			s, out := runCases(t, tc.policy, tc.c)
			res := s.Results[0]
			line := strings.SplitN(out, "\n", 2)[0]
			if res.Status != tc.wantStatus || !strings.Contains(line, tc.wantDetail) {
				t.Fatalf("got %s %q, want %s containing %q", res.Status, line, tc.wantStatus, tc.wantDetail)
			}
			if (res.Status == StatusDeclared && strings.Contains(tc.wantDetail, "rule ")) != (res.Rule != "") {
				t.Fatalf("Result.Rule = %q for %q", res.Rule, line)
			}
		})
	}
}

// TestRuleOrder: among rules that select a case, the first one met declares it.
func TestRuleOrder(t *testing.T) {
	loose := valueRule()
	loose.Name, loose.ExpectMessage = "any_value_error", nil
	unmetFirst := valueRule()
	unmetFirst.Name, unmetFirst.ExpectError = "type_first", "Type"
	c := goldenCase{name: "c", call: "raise", input: raise("Value", "x: not a number"), output: 1}
	s, out := runCases(t, Policy{Rules: []Rule{unmetFirst, valueRule(), loose}}, c)
	if s.Results[0].Rule != "not_a_number" {
		t.Fatalf("declared by %q, want not_a_number:\n%s", s.Results[0].Rule, out)
	}
}

func TestInputText(t *testing.T) {
	for raw, want := range map[string]string{`"a\nb"`: "a\nb", `{ "a" : [1, 2] }`: `{"a":[1,2]}`, `null`: "null", ` 3 `: "3"} {
		if got := inputText(json.RawMessage(raw)); got != want {
			t.Errorf("inputText(%s) = %q, want %q", raw, got, want)
		}
	}
}
