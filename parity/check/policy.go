package main

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/parity/policy"
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
		p, err := policy.FromSpecs(nil)
		return p, nil, err
	}
	specs, err := spec.LoadDir(dir)
	if err != nil {
		return harness.Policy{}, nil, fmt.Errorf("load specs: %w", err)
	}
	p, err := policy.FromSpecs(specs)
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
