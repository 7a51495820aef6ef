package spec

import (
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	head := "module: monolith/a/b.py\ngo_package: pkg/b\n"
	tests := []struct {
		name, body, want string
	}{
		{"unknown top key", "modul: x\n", `specs/t.yaml:1: spec: unknown key "modul"`},
		{"missing module", "go_package: pkg/b\n", `missing required key "module"`},
		{"duplicate key", head + "go_package: pkg/c\n", `specs/t.yaml:3: spec: duplicate key "go_package" (first at line 2)`},
		{"wrong type", head + "configs: 5\n", `specs/t.yaml:3: spec.configs: want a list, got int "5"`},
		{"unknown field key", head + "configs:\n  - name: C\n    fields:\n      - {name: a, type: int, colour: red}\n", `specs/t.yaml:6: spec.configs[0].fields[0]: unknown key "colour"`},
		{"bad field type", head + "configs:\n  - name: C\n    fields:\n      - {name: a, type: complex}\n", `specs/t.yaml:6: config "C" field "a": unknown type "complex"`},
		{"duplicate field", head + "configs:\n  - name: C\n    fields:\n      - {name: a, type: int}\n      - {name: a, type: bool}\n", `specs/t.yaml:7: config "C": duplicate field "a" (first at line 6)`},
		{"bad default", head + "configs:\n  - name: C\n    fields:\n      - {name: a, type: int, default: abc}\n", `default "abc" is not an int`},
		{"null default not optional", head + "configs:\n  - name: C\n    fields:\n      - {name: a, type: int, default: null}\n", `default null needs optional: true`},
		{"bool as string", head + "configs:\n  - name: C\n    fields:\n      - {name: a, type: int, optional: yes}\n", `want true or false`},
		{"status without why", head + "parity:\n  - {symbol: f, status: different}\n", `parity "f": status different needs a why`},
		{"unknown status", head + "parity:\n  - {symbol: f, status: done}\n", `unknown status "done"`},
		{"declared twice", head + "parity:\n  - symbol: f\n    status: ported\n    declared:\n      - {case: c, why: x}\n      - {case: c, why: y}\n", `case "c" declared twice`},
		{"bad flag type", head + "flags:\n  - command: a\n    go_name: A\n    flags:\n      - {name: x, type: complex, help: h}\n", `unknown type "complex"`},
		{"optional flag with default", head + "flags:\n  - command: a\n    go_name: A\n    flags:\n      - {name: x, type: int, optional: true, default: 3, help: h}\n", `flag "x": an optional flag has no default`},
		{"string_map not optional", head + "configs:\n  - name: C\n    fields:\n      - {name: m, type: string_map}\n", `a string_map is optional`},
		{"string_map default", head + "configs:\n  - name: C\n    fields:\n      - {name: m, type: string_map, optional: true, default: x}\n", `a string_map's default is null`},
		{"bad foreign embed", head + "configs:\n  - name: C\n    embeds: [other#B]\n    fields:\n      - {name: a, type: int}\n", `want <spec path relative to specs/>.yaml#<config>`},
		{"flag alias is another flag", head + "flags:\n  - command: a\n    go_name: A\n    flags:\n      - {name: x, type: int, help: h}\n      - {name: y, type: int, help: h, aliases: [x]}\n", `flags "a": duplicate flag "x" (first at line 7)`},
		{"alias", "&a x: 1\n", `unknown key "x"`},
		{"unknown kind", "kind: rust\n" + head, `kind "rust": want python or go`},
		{"go kind outside specs/go", "kind: go\ngo_package: internal/cli\n", `kind go: the spec must live under specs/go/, not specs/t.yaml`},
		{"version flag with default", head + "flags:\n  - command: a\n    go_name: A\n    flags:\n      - {name: version, type: version, default: x, help: h}\n", `type version takes no default`},
		{"bad yaml", head + "configs: [\n", `specs/t.yaml:`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("specs/t.yaml", []byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestGoKind: a Go-only spec lives under specs/go/, has no module and no parity section.
func TestGoKind(t *testing.T) {
	tests := []struct {
		name, path, body, want string
	}{
		{"valid", "specs/go/cli.yaml", "kind: go\ngo_package: internal/cli\nflags:\n  - command: all\n    go_name: A\n    flags:\n      - {name: v, type: version, help: h}\n      - {name: x, type: ignored, group: G, help: h}\n", ""},
		{"module given", "specs/go/cli.yaml", "kind: go\nmodule: monolith/a.py\ngo_package: internal/cli\n", `kind go: no module ("monolith/a.py")`},
		{"parity given", "specs/go/cli.yaml", "kind: go\ngo_package: internal/cli\nparity:\n  - {symbol: f, status: ported}\n", `kind go: no parity section`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(tc.path, []byte(tc.body))
			if tc.want == "" {
				if err != nil || s.Kind != KindGo {
					t.Fatalf("Parse = %v, %v; want a go spec", s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	s, err := Parse("specs/t.yaml", []byte(`module: monolith/a/b.py
go_package: pkg/b
configs:
  - name: Base
    fields:
      - {name: x, type: float, default: 0.5}
  - name: C
    embeds: [Base]
    fields:
      - {name: tags, type: string_list, optional: true}
      - {name: n, type: int, default: 2, env: [N], precedence: derived}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Configs) != 2 || s.Configs[1].Fields[1].Line != 11 {
		t.Fatalf("unexpected parse: %+v", s.Configs)
	}
	lit, err := DefaultLiteral(&s.Configs[0].Fields[0])
	if err != nil || lit != "0.5" {
		t.Fatalf("DefaultLiteral = %q, %v", lit, err)
	}
	if Camel("tfs_ps_http_port") != "TFSPSHTTPPort" || Camel("replica_id") != "ReplicaID" {
		t.Fatal("Camel initialisms")
	}
}

func TestResolveEmbeds(t *testing.T) {
	parse := func(path, body string) *Spec {
		t.Helper()
		s, err := Parse("specs/"+path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		s.Path = path
		return s
	}
	base := parse("a/base.yaml", "module: monolith/a/base.py\ngo_package: pkg/a\nconfigs:\n  - name: B\n    fields:\n      - {name: x, type: int}\n")
	tests := []struct {
		name, body, want string
	}{
		{"ok", "configs:\n  - name: C\n    embeds: [a/base.yaml#B]\n    fields:\n      - {name: y, type: int}\n", ""},
		{"unknown spec", "configs:\n  - name: C\n    embeds: [a/none.yaml#B]\n    fields:\n      - {name: y, type: int}\n", `no spec specs/a/none.yaml`},
		{"unknown config", "configs:\n  - name: C\n    embeds: [a/base.yaml#Z]\n    fields:\n      - {name: y, type: int}\n", `specs/a/base.yaml has no config "Z"`},
		{"duplicate field", "configs:\n  - name: C\n    embeds: [a/base.yaml#B]\n    fields:\n      - {name: x, type: int}\n", `field "x" of C is also in B`},
		{"cycle", "configs:\n  - name: C\n    embeds: [b/c.yaml#C]\n    fields:\n      - {name: y, type: int}\n", `embeds itself`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := parse("b/c.yaml", "module: monolith/b/c.py\ngo_package: pkg/b\n"+tc.body)
			err := ResolveEmbeds([]*Spec{base, c})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ResolveEmbeds = %v, want %q", err, tc.want)
			}
		})
	}
}
