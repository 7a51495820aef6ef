package spec

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadDir parses every *.yaml file under dir (recursively), sorted by path. Paths in the returned
// specs and in errors are relative to dir's parent when dir is named "specs", else to dir.
func LoadDir(dir string) ([]*Spec, error) {
	var specs []*Spec
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read spec: %w", err)
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		s, err := Parse(filepath.ToSlash(filepath.Join("specs", rel)), data)
		if err != nil {
			return err
		}
		s.Path = filepath.ToSlash(rel)
		specs = append(specs, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("no specs (*.yaml) under %s", dir)
	}
	seen := map[string]string{}
	for _, s := range specs {
		if s.Kind == KindGo {
			continue // no module; the path names it
		}
		if prev, ok := seen[s.Module]; ok {
			return nil, fmt.Errorf("specs/%s: module %s already specified by specs/%s", s.Path, s.Module, prev)
		}
		seen[s.Module] = s.Path
	}
	if err := ResolveEmbeds(specs); err != nil {
		return nil, err
	}
	return Sorted(specs), nil
}
