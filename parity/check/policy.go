package main

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// loadPolicy builds the harness policy from the specs under dir, and returns the specs too. A directory without specs yet
// gives an empty policy (with a warning): early in the port nothing is declared.
func loadPolicy(dir string, stderr io.Writer) (harness.Policy, []*spec.Spec, error) {
	has, err := hasSpecs(dir)
	if err != nil {
		return harness.Policy{}, nil, err
	}
	if !has {
		fmt.Fprintf(stderr, "check: warning: no specs (*.yaml) under %s; no declarations or exact messages apply\n", dir)
		p, err := policyFromSpecs(nil)
		return p, nil, err
	}
	specs, err := spec.LoadDir(dir)
	if err != nil {
		return harness.Policy{}, nil, fmt.Errorf("load specs: %w", err)
	}
	p, err := policyFromSpecs(specs)
	return p, specs, err
}

func hasSpecs(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(path, ".yaml") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("specs: %w", err)
	}
	return found, nil
}

// policyFromSpecs collects, over every parity symbol of every spec: its calls when its messages are
// "exact", and its declared cases. A case declared twice, or an expect_error that names no errkind,
// is an error naming the spec file and line.
func policyFromSpecs(specs []*spec.Spec) (harness.Policy, error) {
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
