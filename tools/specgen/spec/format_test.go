package spec

import (
	"strings"
	"testing"
)

func TestFormatErrors(t *testing.T) {
	head := "kind: go\ngo_package: pkg/demo\nformats:\n  - name: demo\n    root: R\n    records:\n      - name: R\n        fields:\n"
	field := func(f string) string { return head + "          - " + f + "\n" }
	tests := []struct{ name, body, want string }{
		{"valid", field("{name: a, type: int, default: 3, check: {min: 0, max: 5}}"), ""},
		{"unknown type", field("{name: a, type: complex}"), `specs/go/demo.yaml:9: record "R" field "a": unknown type "complex"`},
		{"enum without one_of", field("{name: a, type: enum}"), `one_of is given exactly for type enum`},
		{"one_of on a string", field("{name: a, type: string, one_of: [x]}"), `one_of is given exactly for type enum`},
		{"enum value not snake", field("{name: a, type: enum, one_of: [Fast]}"), `enum value "Fast": want snake_case`},
		{"enum value twice", field("{name: a, type: enum, one_of: [x, x]}"), `enum value "x" listed twice`},
		{"enum default not listed", field("{name: a, type: enum, one_of: [x], default: y}"), `default "y" is not one of x`},
		{"record unknown", field("{name: a, type: record, record: Nope}"), `record "Nope" is no record of format demo`},
		{"record missing", field("{name: a, type: record_list}"), `record is given exactly for types record and record_list`},
		{"optional and required", field("{name: a, type: int, optional: true, required: true}"), `optional and required are exclusive`},
		{"required default", field("{name: a, type: int, required: true, default: 1}"), `a required field has no default`},
		{"optional default", field("{name: a, type: int, optional: true, default: 1}"), `an optional field has no default`},
		{"int default", field("{name: a, type: int, default: x}"), `default "x" is not an int`},
		{"float default", field("{name: a, type: float, default: x}"), `default "x" is not a number`},
		{"bool default", field("{name: a, type: bool, default: 1}"), `default "1" is not a bool`},
		{"scalars default", field("{name: a, type: scalars, default: [[x]]}"), `want a scalar or a list of scalars`},
		{"default out of bounds", field("{name: a, type: int, default: 9, check: {max: 5}}"), `default 9 is outside the check's bounds`},
		{"check on string", field("{name: a, type: string, check: {min: 1}}"), `check applies to int, float, scalars and record_list fields, not string`},
		{"empty check", field("{name: a, type: int, check: {}}"), `check without min or max`},
		{"check min above max", field("{name: a, type: int, check: {min: 3, max: 1}}"), `check min 3 is above max 1`},
		{"fractional int bound", field("{name: a, type: int, check: {min: 0.5}}"), `check bound 0.5: want a finite integer`},
		{"negative list bound", field("{name: a, type: scalars, check: {min: -1}}"), `a list has at least 0 items`},
		{"duplicate key", head + "          - {name: a, type: int}\n          - {name: a, type: bool}\n", `record "R": duplicate key "a" (first at line 9)`},
		{"duplicate go name", head + "          - {name: a_b, type: int}\n          - {name: aB, go_name: AB, type: bool}\n", `Go name "AB" also used at line 9`},
		{"reserved field", field("{name: pos, type: int}"), `Go name "Pos" is not an exported identifier, or is reserved`},
		{"unknown field key", field("{name: a, type: int, colour: red}"), `spec.formats[0].records[0].fields[0]: unknown key "colour"`},
		{"root unknown", strings.Replace(field("{name: a, type: int}"), "root: R", "root: S", 1), `format "demo": root "S" is no record of the format`},
		{"bad format name", strings.Replace(field("{name: a, type: int}"), "name: demo", "name: Demo", 1), `format "Demo": want a snake_case name`},
		{"reserved record", strings.Replace(strings.Replace(field("{name: a, type: int}"), "name: R", "name: Error", 1), "root: R", "root: Error", 1), `type "Error" is reserved`},
		{"record twice", head + "          - {name: a, type: int}\n      - name: R\n        fields:\n          - {name: b, type: int}\n", `type "R" declared twice`},
		{"enum type clashes", head + "          - {name: mode, type: enum, one_of: [x]}\n      - name: RMode\n        fields:\n          - {name: b, type: int}\n", `type "RMode" declared twice`},
		{"self by value", field("{name: a, type: record, record: R}"), `record "R" holds itself by value (R -> R)`},
		{"self optional", field("{name: a, type: record, record: R, optional: true}"), ""},
		{"self in a list", field("{name: a, type: record_list, record: R}"), ""},
		{"unreachable", head + "          - {name: a, type: int}\n      - name: S\n        fields:\n          - {name: b, type: int}\n", `record "S" is not reachable from the root "R"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("specs/go/demo.yaml", []byte(tc.body))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
