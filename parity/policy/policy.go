// Package policy builds the parity harness's policy from the specs: which calls compare error
// messages exactly, and which cases are declared intentional differences.
package policy

import (
	"fmt"
	"regexp"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// FromSpecs collects, over every parity symbol of every spec: its calls when its messages are
// "exact", its declared cases and its rules (in spec order). A case declared twice, a rule name used
// twice, an expect_error that names no errkind, a regexp that does not compile or a when.reference
// that is neither value, error nor a Python exception class the harness maps is an error naming
// the spec file and line.
func FromSpecs(specs []*spec.Spec) (harness.Policy, error) {
	p := harness.Policy{ExactMessages: map[string]bool{}, Declared: map[string]harness.Declaration{}}
	where := map[string]string{}
	ruleAt := map[string]string{}
	for _, s := range specs {
		for i := range s.Parity {
			sym := &s.Parity[i]
			for j := range sym.Rules {
				r := &sym.Rules[j]
				at := fmt.Sprintf("specs/%s:%d", s.Path, r.Line)
				if prev, ok := ruleAt[r.Name]; ok {
					return harness.Policy{}, fmt.Errorf("%s: rule %q already defined at %s", at, r.Name, prev)
				}
				ruleAt[r.Name] = at
				hr, err := buildRule(sym, r)
				if err != nil {
					return harness.Policy{}, fmt.Errorf("%s: rule %q: %w", at, r.Name, err)
				}
				p.Rules = append(p.Rules, hr)
			}
			if sym.Messages == "exact" {
				for _, c := range sym.Calls {
					p.ExactMessages[c] = true
				}
			}
			for _, d := range sym.Declared {
				at := fmt.Sprintf("specs/%s:%d", s.Path, d.Line)
				if err := validateDeclared(d, at, where); err != nil {
					return harness.Policy{}, err
				}
				where[d.Case] = at
				p.Declared[d.Case] = harness.Declaration{Symbol: sym.Symbol, Why: d.Why, ExpectError: d.ExpectError}
			}
		}
	}
	return p, nil
}

// buildRule compiles a spec rule for the harness.
func buildRule(sym *spec.Symbol, r *spec.Rule) (harness.Rule, error) {
	hr := harness.Rule{Name: r.Name, Symbol: sym.Symbol, Why: r.Why, Calls: r.RuleCalls(sym),
		Reference: r.When.Reference, ExpectError: r.ExpectError}
	switch r.When.Reference {
	case "", harness.RefValue, harness.RefError:
	default:
		if _, err := harness.KindOfPython(r.When.Reference); err != nil {
			return harness.Rule{}, fmt.Errorf("when.reference: want value, error or a Python exception class: %w", err)
		}
	}
	if r.ExpectError != "" {
		if _, err := errkind.Parse(r.ExpectError); err != nil {
			return harness.Rule{}, fmt.Errorf("expect_error: %w", err)
		}
	}
	if r.ExpectMessage != "" {
		re, err := regexp.Compile(r.ExpectMessage)
		if err != nil {
			return harness.Rule{}, fmt.Errorf("expect_message: %w", err)
		}
		hr.ExpectMessage = re
	}
	for _, m := range r.When.Input {
		re, err := regexp.Compile(m.Match)
		if err != nil {
			return harness.Rule{}, fmt.Errorf("when.input %s: %w", m.Key, err)
		}
		hr.Input = append(hr.Input, harness.InputMatch{Key: m.Key, Match: re})
	}
	return hr, nil
}

func validateDeclared(d spec.Declared, at string, where map[string]string) error {
	if prev, ok := where[d.Case]; ok {
		return fmt.Errorf("%s: case %q already declared at %s", at, d.Case, prev)
	}
	if d.ExpectError == "" {
		return nil
	}
	if _, err := errkind.Parse(d.ExpectError); err != nil {
		return fmt.Errorf("%s: case %q: expect_error: %w", at, d.Case, err)
	}
	return nil
}
