package spec

import (
	"slices"
	"strings"
)

// Rule declares a class of intentional differences under a parity symbol: every case of the
// symbol's calls that differs from the reference and that When selects is declared by the rule,
// provided the Go outcome meets ExpectError and ExpectMessage (see specs/README.md). Unlike a
// Declared case, a rule also covers cases nobody has recorded yet.
type Rule struct {
	// Name identifies the rule in reports; unique over all specs.
	Name string `yaml:"name" required:"true"`
	// Why says what Go does instead, so that a reader can predict Go's answer for any matching input.
	Why  string   `yaml:"why" required:"true"`
	When RuleWhen `yaml:"when"`
	// ExpectError is the errkind name Go must fail with on a matched case (empty: any outcome).
	ExpectError string `yaml:"expect_error"`
	// ExpectMessage is an RE2 regexp Go's error message must contain a match of (needs ExpectError).
	ExpectMessage string `yaml:"expect_message"`
	Line          int    `yaml:"-"`
}

// RuleWhen selects the cases a rule covers; every condition given must hold.
type RuleWhen struct {
	// Call is the case's call, one of the symbol's calls; empty means any of them.
	Call string `yaml:"call"`
	// Reference is what the reference did: "value" (it returned), "error" (it raised), or the
	// Python exception class it raised; empty means either.
	Reference string `yaml:"reference"`
	// Input lists case inputs that must contain a match of an RE2 regexp.
	Input []InputMatch `yaml:"input"`
}

// InputMatch is one input condition of a rule: the value of input Key (a JSON string's text, any
// other JSON value as its compact JSON text; an absent key never matches) must contain a match of
// the RE2 regexp Match.
type InputMatch struct {
	Key   string `yaml:"key" required:"true"`
	Match string `yaml:"match" required:"true"`
	Line  int    `yaml:"-"`
}

// Rule reference outcomes besides a Python exception class.
const (
	RuleReferenceValue = "value"
	RuleReferenceError = "error"
)

// validateRules checks the rules of one parity symbol; names holds the rule names of the spec so
// far. Regexps and error kinds are checked where they are used (parity/policy), which knows errkind.
func validateRules(p *Symbol, names map[string]int, errAt func(int, string, ...any) error) error {
	for _, r := range p.Rules {
		if prev, ok := names[r.Name]; ok {
			return errAt(r.Line, "parity %q: rule %q defined twice (first at line %d)", p.Symbol, r.Name, prev)
		}
		names[r.Name] = r.Line
		if strings.TrimSpace(r.Why) == "" {
			return errAt(r.Line, "parity %q: rule %q: empty why", p.Symbol, r.Name)
		}
		if r.ExpectMessage != "" && r.ExpectError == "" {
			return errAt(r.Line, "parity %q: rule %q: expect_message needs expect_error", p.Symbol, r.Name)
		}
		if r.ExpectError == "" && len(r.When.Input) == 0 {
			return errAt(r.Line, "parity %q: rule %q: give expect_error or when.input (a rule must say what Go returns or which inputs it covers)", p.Symbol, r.Name)
		}
		if len(p.Calls) == 0 {
			return errAt(r.Line, "parity %q: rule %q: the symbol lists no calls for the rule to cover", p.Symbol, r.Name)
		}
		if r.When.Call != "" && !slices.Contains(p.Calls, r.When.Call) {
			return errAt(r.Line, "parity %q: rule %q: when.call %q is not one of the symbol's calls (%s)", p.Symbol, r.Name, r.When.Call, strings.Join(p.Calls, "; "))
		}
	}
	return nil
}

// RuleCalls returns the calls a rule covers: its when.call, or all of its symbol's calls.
func (r *Rule) RuleCalls(p *Symbol) []string {
	if r.When.Call != "" {
		return []string{r.When.Call}
	}
	return p.Calls
}
