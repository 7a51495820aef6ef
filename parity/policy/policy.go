// Package policy builds the parity harness's policy from the specs: which calls compare error
// messages exactly, and which cases are declared intentional differences.
package policy

import (
	"fmt"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// FromSpecs collects, over every parity symbol of every spec: its calls when its messages are
// "exact", and its declared cases. A case declared twice, or an expect_error that names no errkind,
// is an error naming the spec file and line.
func FromSpecs(specs []*spec.Spec) (harness.Policy, error) {
	p := harness.Policy{ExactMessages: map[string]bool{}, Declared: map[string]harness.Declaration{}}
	where := map[string]string{}
	for _, s := range specs {
		for _, sym := range s.Parity {
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
