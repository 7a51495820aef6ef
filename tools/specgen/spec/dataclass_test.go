package spec

import (
	"strings"
	"testing"
)

func TestDataclasses(t *testing.T) {
	head := "module: monolith/a/b.py\ngo_package: pkg/b\n"
	enums := "enums:\n  - name: E\n    members:\n      - {name: A, value: 1, go_name: EA}\n      - {name: B, value: 2, go_name: EB}\n      - {name: C, value: 1, go_name: EC}\n"
	class := func(fields ...string) string {
		return "dataclasses:\n  - name: D\n    fields:\n" + "      - " + strings.Join(fields, "\n      - ") + "\n"
	}
	valid := head + enums + class("{name: s, type: str, default: null}", "{name: a, type: str, default: NONE}",
		"{name: i, type: int, default: -1}", "{name: st, type: int, go_type: E, default: 0}", "{name: f, type: float, default: -1.0}",
		"{name: b, type: bool, default: false}", "{name: l, type: int_list, default: []}", `{name: by, type: bytes, default: ""}`,
		"{name: d, type: str_dict, default: null, item: {go_name: Item, key: K, value: V}}", "{name: e, type: enum, enum: E, default: C}")
	s, err := Parse("specs/t.yaml", []byte(valid))
	if err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	if len(s.Dataclasses) != 1 || len(s.Dataclasses[0].Fields) != 10 || !s.Dataclasses[0].HasCodec() || len(s.Enums[0].Members) != 3 {
		t.Fatalf("parsed: %+v", s)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown type", class("{name: x, type: complex}"), `dataclass "D" field "x": unknown type "complex"`},
		{"duplicate field", class("{name: x, type: int, default: 1}", "{name: x, type: int, default: 2}"), `field "x" declared twice`},
		{"str default not a str", class("{name: x, type: str, default: 3}"), `default "3" is not a str`},
		{"float default", class("{name: x, type: float, default: abc}"), `default "abc" is not a number`},
		{"None float", class("{name: x, type: float, default: null}"), `a None default is supported for str, int and str_dict fields, not float`},
		{"list default", class("{name: x, type: int_list, default: [1]}"), `the default of an int_list is []`},
		{"bytes default", class("{name: x, type: bytes, default: ab}"), `the default of bytes is ""`},
		{"dict without item", class("{name: x, type: str_dict, default: null}"), `item is given exactly for type str_dict`},
		{"unknown enum", class("{name: x, type: enum, enum: F, default: A}"), `enum "F" is no enum of this spec`},
		{"enum default", enums + class("{name: x, type: enum, enum: E, default: Z}"), `default "Z" is no member of E`},
		{"enum without type enum", enums + class("{name: x, type: int, enum: E, default: 1}"), `enum is given exactly for type enum`},
		{"go_type not an enum", class("{name: x, type: int, go_type: F, default: 1}"), `go_type "F" is no enum of this spec`},
		{"go_type string with codec", class("{name: x, type: str, go_type: string, default: null}"), `go_type string is for str fields of a class without codec`},
		{"member value", "enums:\n  - name: E\n    members:\n      - {name: A, value: x, go_name: EA}\n", `enum "E": member A: value "x" is not an int`},
		{"type declared twice", enums + "dataclasses:\n  - name: E\n    fields:\n      - {name: x, type: int, default: 1}\n", `type "E" declared twice`},
		{"unknown key", "dataclasses:\n  - name: D\n    fields:\n      - {name: x, type: int, colour: red}\n", `unknown key "colour"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("specs/t.yaml", []byte(head+tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
