package gen

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// renderGoldenTest emits one table-driven goldie test per golden family. Cases are the *.input files
// found under the family's dir at generation time, so adding a case without regenerating makes the
// staleness test fail.
func renderGoldenTest(root string, s *spec.Spec, pkg, dir string) ([]byte, error) {
	up := strings.Repeat("../", strings.Count(dir, "/")+1)
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "\npackage %s_test\n\nimport (\n\t\"os\"\n\t\"path/filepath\"\n\t\"testing\"\n\n\t\"github.com/sebdah/goldie/v2\"\n\n\timpl %q\n)\n\n",
		pkg, ModulePath+"/"+s.GoPackage)
	goldens := append([]spec.Golden(nil), s.Goldens...)
	sort.Slice(goldens, func(i, j int) bool { return goldens[i].Name < goldens[j].Name })
	for _, g := range goldens {
		ents, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(g.Dir)))
		if err != nil {
			return nil, fmt.Errorf("golden %s: %w", g.Name, err)
		}
		var cases []string
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".input") {
				cases = append(cases, strings.TrimSuffix(e.Name(), ".input"))
			}
		}
		if len(cases) == 0 {
			return nil, fmt.Errorf("golden %s: no *.input files in %s", g.Name, g.Dir)
		}
		sort.Strings(cases)
		fmt.Fprintf(&b, "// TestGolden%s runs impl.%s on %s/*.input.\nfunc TestGolden%s(t *testing.T) {\n", spec.Camel(g.Name), g.Func, g.Dir, spec.Camel(g.Name))
		fmt.Fprintf(&b, "\trunGolden(t, %q, impl.%s, []string{\n", g.Dir, g.Func)
		for _, c := range cases {
			fmt.Fprintf(&b, "\t\t%q,\n", c)
		}
		b.WriteString("\t})\n}\n\n")
	}
	fmt.Fprintf(&b, `// runGolden compares fn's output on each <case>.input with <case>.golden. With -update goldie
// rewrites the golden files: under "bazel run" in the source tree (BUILD_WORKSPACE_DIRECTORY).
func runGolden(t *testing.T, dir string, fn func([]byte) ([]byte, error), cases []string) {
	t.Helper()
	fixtures := filepath.Join(%q, dir)
	if ws := os.Getenv("BUILD_WORKSPACE_DIRECTORY"); ws != "" {
		fixtures = filepath.Join(ws, dir)
	}
	g := goldie.New(t, goldie.WithFixtureDir(fixtures), goldie.WithNameSuffix(".golden"))
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(fixtures, name+".input"))
			if err != nil {
				t.Fatalf("read input: %%v", err)
			}
			out, err := fn(in)
			if err != nil {
				out = []byte("error: " + err.Error() + "\n")
			}
			g.Assert(t, name, out)
		})
	}
}
`, path.Clean(up))
	return gofmt("golden_test.go", b.Bytes())
}
