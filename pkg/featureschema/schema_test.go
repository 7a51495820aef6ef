package featureschema

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const goodSchema = `label:
  source: rating
  threshold: 4
features:
  - {name: user_id, kind: sparse_int, slot: 1}
  - {name: item, kind: sparse_string, slot: 2, source: item_name, separator: "|", pooling: mean, buckets: 0}
  - {name: price, kind: dense, dim: 1, optional: true, default: 0.5}
  - {name: history, kind: dense, dim: 3, optional: true, default: [1, 2, 3]}
  - {name: tags, kind: sparse_string, slot: 3, optional: true, default: [a, b]}
  - {name: ids, kind: sparse_int, slot: 4, optional: true, default: []}
`

func TestParseGood(t *testing.T) {
	s, err := Parse([]byte(goodSchema), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Label.SourceName(); got != "rating" {
		t.Errorf("label source = %q", got)
	}
	if got := len(s.Sparse()); got != 4 {
		t.Errorf("Sparse() has %d features, want 4", got)
	}
	if got := s.DenseDim(); got != 4 {
		t.Errorf("DenseDim() = %d, want 4", got)
	}
	if got := s.Names(); !reflect.DeepEqual(got, []string{"user_id", "item", "price", "history", "tags", "ids"}) {
		t.Errorf("Names() = %v", got)
	}
	item, ok := s.Lookup("item")
	if !ok || item.SourceName() != "item_name" || item.CellSeparator() != "|" || item.PoolingOr(PoolingSum) != PoolingMean || item.BucketsOr(7) != 0 || item.FidSlot() != 2 {
		t.Errorf("item resolved wrong: %+v", item)
	}
	user, _ := s.Lookup("user_id")
	if user.SourceName() != "user_id" || user.CellSeparator() != ";" || user.PoolingOr(PoolingSum) != PoolingSum || user.BucketsOr(7) != 7 {
		t.Errorf("user_id resolved wrong: %+v", user)
	}
	price, _ := s.Lookup("price")
	if got, err := price.DefaultFloats(); err != nil || !reflect.DeepEqual(got, []float32{0.5}) {
		t.Errorf("price default = %v, %v", got, err)
	}
	history, _ := s.Lookup("history")
	if got, err := history.DefaultFloats(); err != nil || !reflect.DeepEqual(got, []float32{1, 2, 3}) {
		t.Errorf("history default = %v, %v", got, err)
	}
	tags, _ := s.Lookup("tags")
	if got, err := tags.DefaultIDs(); err != nil || !reflect.DeepEqual(got, []int64{StringID("a"), StringID("b")}) {
		t.Errorf("tags default ids = %v, %v", got, err)
	}
	if got, err := tags.DefaultStrings(); err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("tags default strings = %v, %v", got, err)
	}
	ids, _ := s.Lookup("ids")
	if got, err := ids.DefaultIDs(); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ids default = %#v, %v; want no ids", got, err)
	}
	if _, ok := s.Lookup("nope"); ok {
		t.Error("Lookup found a feature that is not there")
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schema.yaml")
	if err := os.WriteFile(path, []byte(goodSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil || s.File != path || len(s.Features) != 6 {
		t.Fatalf("Load = %+v, %v", s, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file = %v", err)
	}
}

// TestParseErrors: each bad schema fails with one line naming file:line:col, the path and the value.
func TestParseErrors(t *testing.T) {
	label := "label: {}\n"
	feat := func(s string) string { return label + "features:\n  - " + s + "\n" }
	tests := []struct{ name, src, want string }{
		{"empty file", "", `s.yaml: empty file`},
		{"not a mapping", "[1]\n", `s.yaml:1:1: want a mapping (record Schema), got a list`},
		{"syntax", "label: [\n", `s.yaml:1: YAML syntax: did not find expected node content`},
		{"two documents", label + "features: [{name: a, kind: dense, dim: 1}]\n---\nx: 1\n", `s.yaml:3:1: a second YAML document`},
		{"alias", "label: &l {}\nfeatures: *l\n", `s.yaml:2:11: features: YAML alias *l`},
		{"unknown key suggested", feat("{name: a, kind: sparse_int, slto: 1}"), `s.yaml:3:33: features[0]: unknown key "slto" (did you mean "slot"?)`},
		{"unknown key listed", feat("{name: a, kind: sparse_int, zzzzzz: 1}"), `unknown key "zzzzzz" (known: name, kind, slot, source, dim, optional, default, separator, pooling, buckets)`},
		{"unknown top key", "lable: {}\n", `s.yaml:1:1: unknown key "lable" (did you mean "label"?)`},
		{"duplicate key", feat("{name: a, name: b, kind: dense, dim: 1}"), `s.yaml:3:15: features[0].name: duplicate key (first at line 3:6)`},
		{"bad kind", feat("{name: a, kind: sparse_str, slot: 1}"), `s.yaml:3:21: features[0].kind: "sparse_str" is not one of sparse_int, sparse_string, dense (did you mean "sparse_int"?)`},
		{"wrong type", feat("{name: a, kind: sparse_int, slot: abc}"), `s.yaml:3:39: features[0].slot: want an integer, got string "abc"`},
		{"slot out of range", feat("{name: a, kind: sparse_int, slot: 40000}"), `features[0].slot: 40000 is above the maximum 32767`},
		{"negative buckets", feat("{name: a, kind: sparse_int, slot: 1, buckets: -1}"), `features[0].buckets: -1 is below the minimum 0`},
		{"missing kind", feat("{name: a}"), `s.yaml:3:5: features[0]: missing required key "kind"`},
		{"missing label", "features: [{name: a, kind: dense, dim: 1}]\n", `s.yaml:1:1: missing required key "label"`},
		{"empty features", label + "features: []\n", `s.yaml:2:11: features: want at least 1 item, got 0`},
		{"duplicate name", label + "features:\n  - {name: a, kind: dense, dim: 1}\n  - {name: a, kind: dense, dim: 2}\n", `s.yaml:4:12: features[1].name: "a" is already the name of features[0] (line 3)`},
		{"duplicate slot", label + "features:\n  - {name: a, kind: sparse_int, slot: 3}\n  - {name: b, kind: sparse_string, slot: 3}\n", `s.yaml:4:42: features[1].slot: slot 3 of "b" is already the slot of features[0] "a" (line 3)`},
		{"sparse without slot", feat("{name: a, kind: sparse_int}"), `s.yaml:3:5: features[0]: sparse_int feature "a" needs a slot (0 to 32767)`},
		{"dim on sparse", feat("{name: a, kind: sparse_int, slot: 1, dim: 2}"), `features[0].dim: dim 2 given for sparse_int feature "a"`},
		{"zero dim on sparse", feat("{name: a, kind: sparse_int, slot: 1, dim: 0}"), ``},
		{"slot on dense", feat("{name: a, kind: dense, dim: 1, slot: 2}"), `features[0].slot: slot 2 given for dense feature "a"`},
		{"dense without dim", feat("{name: a, kind: dense}"), `s.yaml:3:5: features[0]: dense feature "a" needs dim`},
		{"dense dim 0", feat("{name: a, kind: dense, dim: 0}"), `features[0].dim: dim 0 of dense feature "a": want > 0`},
		{"pooling on dense", feat("{name: a, kind: dense, dim: 1, pooling: sum}"), `features[0].pooling: pooling "sum" given for dense feature "a"`},
		{"buckets on dense", feat("{name: a, kind: dense, dim: 1, buckets: 5}"), `features[0].buckets: buckets 5 given for dense feature "a"`},
		{"optional without default", feat("{name: a, kind: dense, dim: 1, optional: true}"), `features[0]: optional feature "a" needs a default`},
		{"default without optional", feat("{name: a, kind: dense, dim: 1, default: 1}"), `features[0].default: default given for required feature "a"`},
		{"bad int default", feat("{name: a, kind: sparse_int, slot: 1, optional: true, default: abc}"), `features[0].default: "abc" is not an integer id (sparse_int feature "a")`},
		{"dense default length", feat("{name: a, kind: dense, dim: 3, optional: true, default: [1, 2]}"), `features[0].default: 2 values [1, 2] for dense feature "a" of dim 3: want 3, or 1 repeated`},
		{"dense default empty", feat("{name: a, kind: dense, dim: 3, optional: true, default: []}"), `0 values [] for dense feature "a"`},
		{"dense default nan", feat("{name: a, kind: dense, dim: 1, optional: true, default: .nan}"), `".nan" is not a finite number (dense feature "a")`},
		{"default not scalars", feat("{name: a, kind: dense, dim: 1, optional: true, default: {x: 1}}"), `features[0].default: want a scalar or a list of scalars, got a mapping`},
		{"threshold and positive", "label: {threshold: 4, positive: [4, 5]}\nfeatures: [{name: a, kind: dense, dim: 1}]\n", `s.yaml:1:33: label: threshold (4) and positive (4, 5) are exclusive`},
		{"positive not numbers", "label: {positive: [x]}\nfeatures: [{name: a, kind: dense, dim: 1}]\n", `label.positive[0]: "x" is not a finite number`},
		{"positive empty", "label: {positive: []}\nfeatures: [{name: a, kind: dense, dim: 1}]\n", `label.positive: empty`},
		{"threshold nan", "label: {threshold: .nan}\nfeatures: [{name: a, kind: dense, dim: 1}]\n", `label.threshold: NaN is not a finite number`},
		{"empty label source", "label: {source: ''}\nfeatures: [{name: a, kind: dense, dim: 1}]\n", `label.source: empty`},
		{"empty separator", feat("{name: a, kind: dense, dim: 1, separator: ''}"), `features[0].separator: empty`},
		{"empty source", feat("{name: a, kind: dense, dim: 1, source: ''}"), `features[0].source: empty`},
		{"empty name", feat("{name: '', kind: dense, dim: 1}"), `features[0].name: empty`},
		{"feature reads the label", "label: {source: y}\nfeatures: [{name: y, kind: dense, dim: 1}]\n", `features[0]: feature "y" reads "y", the label's column`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "s.yaml")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

func TestFromFlags(t *testing.T) {
	tests := []struct {
		name, dense, sparse string
		want                []string // name:kind:slot-or-dim
		err                 string
	}{
		{name: "both", dense: "dense:4, ctx:2", sparse: "user:1,slot_7, item:30",
			want: []string{"dense:dense:4", "ctx:dense:2", "user:sparse_int:1", "slot_7:sparse_int:7", "item:sparse_int:30"}},
		{name: "sparse only", sparse: "slot_1", want: []string{"slot_1:sparse_int:1"}},
		{name: "none", err: "no features"},
		{name: "bad dense", dense: "dense", err: `--dense_features "dense": want name:dim items (dim > 0), got "dense"`},
		{name: "dense dim 0", dense: "d:0", err: `want name:dim items (dim > 0), got "d:0"`},
		{name: "empty sparse name", sparse: "a:1,,b:2", err: `--sparse_features "a:1,,b:2": empty feature name`},
		{name: "no slot", sparse: "clicks", err: `--sparse_features: feature "clicks" needs its fid slot (give clicks:<slot>)`},
		{name: "bad slot", sparse: "user:40000", err: `--sparse_features: feature "user": slot "40000" is not a fid slot (0 to 32767)`},
		{name: "bad slot_ name", sparse: "slot_x", err: `feature "slot_x": slot "x" is not a fid slot`},
		{name: "shared slot", sparse: "a:1,b:1", err: `--sparse_features: features "a" and "b" are both in slot 1`},
		{name: "name twice", dense: "a:1", sparse: "a:1", err: `--sparse_features: feature "a" is already in --dense_features`},
		{name: "reads the label", dense: "label:1", err: `feature "label" reads "label", the label's column`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromFlags(tc.dense, tc.sparse)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FromFlags error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range s.Features {
				n := f.DenseDim()
				if f.IsSparse() {
					n = f.FidSlot()
				}
				got = append(got, strings.Join([]string{f.Name, string(f.Kind), strconv.Itoa(n)}, ":"))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("features = %v, want %v", got, tc.want)
			}
			if s.Label.SourceName() != "label" || s.Label.Rule() != "value is 0 or 1" {
				t.Errorf("label = %+v", s.Label)
			}
		})
	}
}
