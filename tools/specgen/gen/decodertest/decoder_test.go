// Package decodertest compiles a decoder that specgen generates for a demo format (every field
// type; tools/specgen/gen/testdata/format_demo.yaml) and runs it on good and bad files. It runs
// `go run` with a build overlay, which needs the Go module cache: `go test ./...` runs it; its
// Bazel target is manual, since a test sandbox has no module cache (the generated decoder in use,
// gen/spec/go/feature_schema, is compiled and tested under Bazel by its own golden tests and
// pkg/featureschema's).
package decodertest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/parity/goldentest"
	"github.com/monolith-go/monolith/tools/specgen/gen"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// TestFormatDecoder compiles the generated decoder of formatSpec (through a go build overlay, so
// that nothing is written into the tree) and runs it on good and bad files.
func TestFormatDecoder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	root := goldentest.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "tools/specgen/gen/testdata/format_demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse("specs/go/demo.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	s.Path = "go/zz_specgen_format_test.yaml"
	files, err := gen.Generate(t.TempDir(), []*spec.Spec{s})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	pkgDir := "gen/spec/go/zz_specgen_format_test"
	overlay := map[string]string{}
	add := func(rel string, content []byte) {
		p := filepath.Join(tmp, strings.ReplaceAll(rel, "/", "_"))
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, rel)] = p
	}
	add(pkgDir+"/format.go", files[pkgDir+"/format.go"])
	add(pkgDir+"/doc.go", files[pkgDir+"/doc.go"])
	add(pkgDir+"/main/main.go", []byte(`package main

import (
	"encoding/json"
	"fmt"
	"os"

	demo "`+gen.ModulePath+"/"+pkgDir+`"
)

func main() {
	for _, in := range os.Args[1:] {
		r, err := demo.DecodeRoot([]byte(in), "f.yaml")
		if err != nil {
			fmt.Println("error: " + err.Error())
			continue
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
}
`))
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	ovPath := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"title: t\nitems: [{need: 1}]\n", `"Title":"t","Count":2,"Ratio":null,"On":false,"Mode":"fast","Tags":null,"Inner":{"Key":"k"`},
		{"title: t\ncount: 3\nratio: 1\n\"on\": true\nmode: slow_mode\ntags: x\ninner: {need: 2}\nextra: {need: 3}\nitems: [{need: 1}, {need: 2}]\n",
			`"Count":3,"Ratio":1,"On":true,"Mode":"slow_mode","Tags":["x"]`},
		{"title: t\ntags: []\nitems: [{need: 1}]\n", `"Tags":[]`},
		{"title: t\ntitel: u\n", `error: f.yaml:2:1: unknown key "titel" (did you mean "title"?)`},
		{"title: t\nzzz: u\n", `error: f.yaml:2:1: unknown key "zzz" (known: title, count, ratio, on, mode, tags, inner, extra, items)`},
		{"title: t\ntitle: u\n", `error: f.yaml:2:1: title: duplicate key (first at line 1:1)`},
		{"count: 3\n", `error: f.yaml:1:1: missing required key "title"`},
		{"title: t\ncount: 10\n", `error: f.yaml:2:8: count: 10 is above the maximum 9`},
		{"title: t\ncount: 0\n", `error: f.yaml:2:8: count: 0 is below the minimum 1`},
		{"title: t\ncount: 1.5\n", `error: f.yaml:2:8: count: want an integer, got number "1.5"`},
		{"title: t\nratio: 2.5\n", `error: f.yaml:2:8: ratio: 2.5 is above the maximum 1.5`},
		{"title: t\nratio: x\n", `error: f.yaml:2:8: ratio: want a number, got string "x"`},
		{"title: t\n\"on\": yes\n", `error: f.yaml:2:7: on: want true or false, got string "yes"`},
		{"title: t\nmode: slow\n", `error: f.yaml:2:7: mode: "slow" is not one of fast, slow_mode`},
		{"title: t\nmode: slwo_mode\n", `(did you mean "slow_mode"?)`},
		{"title: t\ntags: [a, b, c]\n", `error: f.yaml:2:7: tags: want at most 2 items, got 3`},
		{"title: t\ntags: [a, [b]]\n", `error: f.yaml:2:11: tags[1]: want a scalar, got a list`},
		{"title: t\ntags: {a: 1}\n", `tags: want a scalar or a list of scalars, got a mapping`},
		{"title: [t]\n", `error: f.yaml:1:8: title: want a string, got a list`},
		{"title: t\nextra: {}\n", `error: f.yaml:2:8: extra: missing required key "need"`},
		{"title: t\nitems: []\n", `error: f.yaml:2:8: items: want at least 1 item, got 0`},
		{"title: t\nitems: [{need: 1}, {need: x}]\n", `error: f.yaml:2:27: items[1].need: want an integer, got string "x"`},
		{"title: t\nitems: [{need: 1}, 5]\n", `error: f.yaml:2:20: items[1]: want a mapping (record Strict), got integer "5"`},
		{"title: t\nitems: [{need: 1}]\ninner: {need: 1, nede: 2}\n", `error: f.yaml:3:18: inner: unknown key "nede" (did you mean "need"?)`},
		{"title: t\nextra: {need: 1}\n", `"Items":null`},                  // a check bounds a list that is given
		{"title: t\nitems: [{need: 1}]\n", `"Inner":{"Key":"k","Need":0`}, // absent record: its defaults
		{"", `error: f.yaml: empty file: want a demo mapping`},
		{"title: &x t\ncount: *x\n", `error: f.yaml:2:8: count: YAML alias *x: aliases are not supported`},
		{"title: t\n---\ntitle: u\n", `error: f.yaml:2:1: a second YAML document`},
		{"title: [\n", `error: f.yaml:1: YAML syntax:`},
		{"- a\n", `error: f.yaml:1:1: want a mapping (record Root), got a list`},
		{"? [a]\n: b\n", `error: f.yaml:1:3: a key must be a string, got a list`},
		{"title: t\ncount: 99999999999999999999999\n", `count: want an integer, got number`},
	}
	args := []string{"run", "-overlay=" + ovPath, "./" + pkgDir + "/main"}
	for _, tc := range tests {
		args = append(args, tc.in)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(tests) {
		t.Fatalf("%d results for %d inputs:\n%s", len(lines), len(tests), out)
	}
	for i, tc := range tests {
		if !strings.Contains(lines[i], tc.want) {
			t.Errorf("input %q:\n got  %s\n want %s", tc.in, lines[i], tc.want)
		}
	}
}
