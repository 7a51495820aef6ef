package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// PythonGoldensDir holds the Python reference's cases, relative to the repository root.
const PythonGoldensDir = "parity/goldens/python"

// caseModule is the `module` the Python cases of a spec's module carry: its path without
// monolith/ and .py (agent_service/data_def).
func caseModule(s *spec.Spec) string {
	return strings.TrimSuffix(strings.TrimPrefix(s.Module, "monolith/"), ".py")
}

// pythonCaseModules lists the `module` of every Python case under root, so that a spec gets a
// parity test exactly when its module has cases (adding the first case of a module without
// regenerating makes the staleness test fail).
func pythonCaseModules(root string) (map[string]bool, error) {
	mods := map[string]bool{}
	dir := filepath.Join(root, filepath.FromSlash(PythonGoldensDir))
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return mods, nil // a tree without Python cases: no parity tests
	}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var c struct {
			Module string `json:"module"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if c.Module == "" {
			return fmt.Errorf("%s: no module", p)
		}
		mods[c.Module] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("python goldens: %w", err)
	}
	return mods, nil
}

// renderParityTest is the test that replays the Python cases of s's module through the parity
// checker (parity/paritytest): every case passes or is a declared difference.
func renderParityTest(s *spec.Spec, pkg string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "\npackage %s_test\n\nimport (\n\t\"testing\"\n\n\t\"%s/parity/paritytest\"\n)\n\n", pkg, ModulePath)
	fmt.Fprintf(&b, "// TestPythonParity replays the Python reference's cases of %s (%s) against %s:\n", s.Module, PythonGoldensDir, s.GoPackage)
	b.WriteString("// each passes or is a difference declared in the specs.\n")
	fmt.Fprintf(&b, "func TestPythonParity(t *testing.T) {\n\tparitytest.Module(t, %q)\n}\n", caseModule(s))
	return gofmt("parity_test.go", b.Bytes())
}
