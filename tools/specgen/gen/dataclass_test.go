package gen

import (
	"strings"
	"testing"

	"github.com/monolith-go/monolith/tools/specgen/spec"
)

// TestDataclasses: a spec's enums and dataclasses become Go types with the reference's defaults and
// a codec over gen/spec/pydataclass, which is emitted (with its tests) from the embedded runtime.
func TestDataclasses(t *testing.T) {
	s, err := spec.Parse("specs/x/dc.yaml", []byte(`module: monolith/x/dc.py
go_package: pkg/demo
enums:
  - name: Kind
    members:
      - {name: ONE, value: 1, go_name: KindOne}
      - {name: TWO, value: 2, go_name: KindTwo}
      - {name: FIRST, value: 1, go_name: KindFirst}
dataclasses:
  - name: Rec
    doc: "Rec is a record."
    fields:
      - {name: name, type: str, default: null}
      - {name: count, type: int, default: -1}
      - {name: state, type: int, go_type: Kind, default: 2}
      - {name: ratio, type: float, default: 0.5}
      - {name: ok, type: bool, default: true}
      - {name: ids, type: int_list, default: []}
      - {name: raw, type: bytes, default: ""}
      - {name: paths, type: str_dict, default: null, item: {go_name: PathItem, key: Name, value: Path}}
      - {name: kind, type: enum, enum: Kind, default: FIRST}
  - name: Plain
    json: false
    fields:
      - {name: a, type: str, default: null, go_type: string}
  - name: Opt
    fields:
      - {name: b, type: str, default: null}
`))
	if err != nil {
		t.Fatal(err)
	}
	s.Path = "x/dc.yaml"
	files, err := Generate(t.TempDir(), []*spec.Spec{s})
	if err != nil {
		t.Fatal(err)
	}
	dc := string(files["gen/spec/x/dc/dataclasses.go"])
	for _, want := range []string{
		"type Kind int",
		"KindFirst Kind = 1",
		"var KindValues = []int{1, 2}",
		"case 1:\n\t\treturn \"ONE\"", // an alias prints as its first member
		"// Rec is a record.\ntype Rec struct {",
		"\tName *string\n",
		"\tState Kind\n",
		"\tPaths []PathItem\n",
		"\theld *pydataclass.Held\n",
		"type PathItem struct {\n\tName, Path string\n}",
		"return Rec{Count: -1, State: 2, Ratio: 0.5, Ok: true, Ids: []int{}, Raw: []byte{}, Kind: KindFirst}",
		`pydataclass.Member{Key: "count", Val: h.Value("count", r.Count, pydataclass.IntV(r.Count))}`,
		`pydataclass.Member{Key: "state", Val: h.Value("state", int(r.State), pydataclass.IntV(int(r.State)))}`,
		`pydataclass.Member{Key: "ids", Val: h.Value("ids", r.Ids == nil, pydataclass.IntsV(r.Ids))}`,
		`o.Int("state", &state)`,
		`o.Enum("kind", "Kind", &kind, KindValues)`,
		"x.Paths[i] = PathItem{Name: it.Key, Path: it.Val}",
		"type Plain struct {\n\t// A is a: str = None. \"\" stands for None.\n\tA string\n}",
		"x := Opt{}",
	} {
		if !strings.Contains(dc, want) {
			t.Errorf("dataclasses.go lacks %q", want)
		}
	}
	if strings.Contains(dc, "func NewPlain") || strings.Contains(dc, "func (p Plain) Serialize") {
		t.Errorf("a class without codec and defaults got a constructor or codec:\n%s", dc)
	}
	if i := strings.Index(dc, "type Opt struct"); i < 0 || strings.Contains(dc[i:], "held") {
		t.Errorf("a class whose fields are all pointers needs no held values:\n%s", dc[i:])
	}
	for _, f := range []string{"value.go", "parse.go", "record.go", "pydataclass_test.go"} {
		src := string(files["gen/spec/pydataclass/"+f])
		if !strings.HasPrefix(src, header) || !strings.Contains(src, "package pydataclass") {
			t.Errorf("runtime file %s missing or without the generated header", f)
		}
	}
	if build := string(files["gen/spec/x/dc/BUILD.bazel"]); !strings.Contains(build, `"//gen/spec/pydataclass"`) {
		t.Errorf("BUILD.bazel lacks the runtime dep:\n%s", build)
	}
}
