package pydataclass

import (
	"math"
	"strings"
	"testing"
)

// Each want is what json.dumps(json.loads(in)) prints in Python 3.11.
func TestParseAndWrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` {"a" : [ ] , "b":{}} `, `{"a": [], "b": {}}`},
		{`{"a": 1, "b": 2, "a": 3}`, `{"a": 3, "b": 2}`},
		{`[1, -0, 12345678901234567890123, 1.0, 1.50, 1E5, 1e16, 1e-5, 1e-320, -0.0, 1e400, -1e400]`,
			`[1, 0, 12345678901234567890123, 1.0, 1.5, 100000.0, 1e+16, 1e-05, 1e-320, -0.0, Infinity, -Infinity]`},
		{`[NaN, Infinity, -Infinity, true, false, null]`, `[NaN, Infinity, -Infinity, true, false, null]`},
		{`"\u00e9\u6a21\ud83d\ude00\/\b\f\n\r\t\"\\"`, `"\u00e9\u6a21\ud83d\ude00/\b\f\n\r\t\"\\"`},
		{"\"é模😀\u007f\"", `"\u00e9\u6a21\ud83d\ude00\u007f"`},
		{`"\u0000\u001f"`, `"\u0000\u001f"`},
		{`["\ud800", "a\udc00b", "\ud800\u0041", "\udbff\udfff"]`, `["\ud800", "a\udc00b", "\ud800A", "\udbff\udfff"]`},
		{`1e5x`[:3], `100000.0`},
	} {
		v, err := Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("Parse(%s): %v", tc.in, err)
			continue
		}
		if got := string(v.JSON()); got != tc.want {
			t.Errorf("Parse(%s) written back:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// The messages are json.JSONDecodeError's for the same input.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{``, "Expecting value: line 1 column 1 (char 0)"},
		{`{"a": `, "Expecting value: line 1 column 7 (char 6)"},
		{`{"a": 1,}`, "Expecting property name enclosed in double quotes: line 1 column 9 (char 8)"},
		{`{'a': 1}`, "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
		{`{"a" 1}`, "Expecting ':' delimiter: line 1 column 6 (char 5)"},
		{`[1 2]`, "Expecting ',' delimiter: line 1 column 4 (char 3)"},
		{`{} {}`, "Extra data: line 1 column 4 (char 3)"},
		{"{\n\"é\": 01}", "Expecting ',' delimiter: line 2 column 7 (char 8)"},
		{`"abc`, "Unterminated string starting at: line 1 column 1 (char 0)"},
		{"\"a\tb\"", "Invalid control character at: line 1 column 3 (char 2)"},
		{`"\x"`, "Invalid \\escape: line 1 column 2 (char 1)"},
		{`"\u12g4"`, "Invalid \\uXXXX escape: line 1 column 3 (char 2)"},
		{`1.`, "Extra data: line 1 column 2 (char 1)"},
		{`-`, "Expecting value: line 1 column 1 (char 0)"},
		{`-NaN`, "Expecting value: line 1 column 1 (char 0)"},
		{"\xff", "invalid UTF-8"},
		{strings.Repeat("9", 4301), "Exceeds the limit (4300 digits)"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) || err.(*Error).Kind != KindValue {
			t.Errorf("Parse(%q) = %v, want a Value error containing %q", tc.in, err, tc.msg)
		}
	}
}

func TestDecodeNotAnObject(t *testing.T) {
	for in, typ := range map[string]string{`[]`: "list", `null`: "NoneType", `1`: "int", `1.5`: "float", `"s"`: "str", `true`: "bool"} {
		_, err := Decode("C", []byte(in))
		want := "C: '" + typ + "' object has no attribute 'items'"
		if err == nil || err.Error() != want || err.(*Error).Kind != KindAttribute {
			t.Errorf("Decode(%s) = %v, want the Attribute error %q", in, err, want)
		}
	}
}

func TestReaders(t *testing.T) {
	o, err := Decode("C", []byte(`{"s": "x", "n": null, "i": 7, "big": 9223372036854775808, "f": 1.5, "fi": 2,
		"b": true, "l": [1, 2], "bytes": [0, 255], "bad": "y", "e1": 1.0, "et": true, "ef": false, "es": "1",
		"d": {"k": "v", "j": "w"}, "dbad": {"k": 1}, "dlist": []}`))
	if err != nil {
		t.Fatal(err)
	}
	var (
		s, sn         = "", "def"
		os            *string
		i, in         = 0, -1
		oi            = new(int)
		f, fi, fn     = 0.0, 0.0, -1.0
		b, bn         bool
		l, ln         = []int(nil), []int{}
		by            []byte
		e1, et, enull = 0, 0, 2
		items, itemsN []StrItem
		absentStr     = "kept"
	)
	ok := func(err error) error { return err }
	for _, tc := range []struct {
		name string
		err  error
		msg  string // "" for no error
	}{
		{"str", ok(o.Str("s", &s)), ""},
		{"str null held", ok(o.Str("n", &sn)), ""},
		{"absent keeps", ok(o.Str("missing", &absentStr)), ""},
		{"opt str null", ok(o.OptStr("n", &os)), ""},
		{"int", ok(o.Int("i", &i)), ""},
		{"int null held", ok(o.Int("n", &in)), ""},
		{"opt int null", ok(o.OptInt("n", &oi)), ""},
		{"float", ok(o.Float("f", &f)), ""},
		{"float from int held", ok(o.Float("fi", &fi)), ""},
		{"float null held", ok(o.Float("n", &fn)), ""},
		{"bool", ok(o.Bool("b", &b)), ""},
		{"bool null held", ok(o.Bool("n", &bn)), ""},
		{"ints", ok(o.Ints("l", &l)), ""},
		{"ints null held", ok(o.Ints("n", &ln)), ""},
		{"bytes", ok(o.Bytes("bytes", &by)), ""},
		{"enum 1.0", ok(o.Enum("e1", "E", &e1, []int{1, 2})), ""},
		{"enum True", ok(o.Enum("et", "E", &et, []int{1, 2})), ""},
		{"enum null held", ok(o.Enum("n", "E", &enull, []int{1, 2})), ""},
		{"dict", ok(o.StrDict("d", func(v []StrItem) { items = v })), ""},
		{"dict null", ok(o.StrDict("n", func(v []StrItem) { itemsN = v })), ""},
		{"int from str", o.Int("bad", &i), `C.bad: want an int or null, got 'y' (str)`},
		{"int from float", o.Int("f", &i), `C.f: want an int or null, got 1.5 (float)`},
		{"int too big", o.Int("big", &i), `C.big: 9223372036854775808 does not fit a 64-bit int`},
		{"str from int", o.OptStr("i", &os), `C.i: want a str or null, got 7 (int)`},
		{"float from bool", o.Float("b", &f), `C.b: want a number or null, got True (bool)`},
		{"bool from int", o.Bool("i", &b), `C.i: want true, false or null, got 7 (int)`},
		{"ints from str", o.Ints("bad", &l), `C.bad: want a list of ints or null, got 'y' (str)`},
		{"enum False", o.Enum("ef", "E", &e1, []int{1, 2}), `False is not a valid E`},
		{"enum str", o.Enum("es", "E", &e1, []int{1, 2}), `'1' is not a valid E`},
		{"enum list", o.Enum("l", "E", &e1, []int{1, 2}), `[1, 2] is not a valid E`},
		{"dict value", o.StrDict("dbad", func([]StrItem) {}), `C.dbad['k']: want a str, got 1 (int)`},
		{"dict from list", o.StrDict("dlist", func([]StrItem) {}), `C.dlist: 'list' object has no attribute 'keys'`},
	} {
		if tc.msg == "" {
			if tc.err != nil {
				t.Errorf("%s: unexpected error %v", tc.name, tc.err)
			}
			continue
		}
		if tc.err == nil || tc.err.Error() != tc.msg {
			t.Errorf("%s: error %v, want %q", tc.name, tc.err, tc.msg)
		}
	}
	if s != "x" || sn != "def" || absentStr != "kept" || os != nil || i != 7 || in != -1 || oi != nil || f != 1.5 ||
		fi != 2 || fn != -1 || !b || bn || len(l) != 2 || ln != nil || string(by) != "\x00\xff" || e1 != 1 || et != 1 ||
		enull != 2 || len(items) != 2 || items[1] != (StrItem{"j", "w"}) || itemsN != nil {
		t.Fatalf("values read: s=%q sn=%q os=%v i=%d in=%d oi=%v f=%v fi=%v fn=%v b=%v bn=%v l=%v ln=%v by=%q e1=%d et=%d enull=%d items=%v",
			s, sn, os, i, in, oi, f, fi, fn, b, bn, l, ln, by, e1, et, enull, items)
	}
	h := o.Held()
	for _, tc := range []struct {
		name  string
		cur   any
		typed Value
		want  string
	}{
		{"n", "def", StrV("def"), "null"},        // str null, unchanged
		{"n", "other", StrV("other"), `"other"`}, // assigned since
		{"fi", 2.0, FloatV(2), "2"},
		{"fi", 2.5, FloatV(2.5), "2.5"},
		{"n", true, IntsV(nil), "null"}, // a list field still nil
		{"i", 7, IntV(7), "7"},          // nothing held
	} {
		if got := string(h.Value(tc.name, tc.cur, tc.typed).JSON()); got != tc.want {
			t.Errorf("Held.Value(%s, %v) = %s, want %s", tc.name, tc.cur, got, tc.want)
		}
	}
	if got := (*Held)(nil).Value("x", 1, IntV(1)); got.I != "1" {
		t.Errorf("nil Held: %v", got)
	}
}

func TestRepr(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{NoneV(), "None"}, {BoolV(true), "True"}, {FloatV(math.Inf(-1)), "-inf"}, {FloatV(1e16), "1e+16"},
		{StrV("it's"), `"it's"`}, {StrV(`a'"b`), `'a\'"b'`}, {StrV("\n\x01"), `'\n\x01'`},
		{Value{Kind: Dict, D: []Member{{"k", IntsV([]int{1})}}}, "{'k': [1]}"},
	} {
		if got := tc.v.Repr(); got != tc.want {
			t.Errorf("Repr = %s, want %s", got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": [1, 2.5, "x", null, true]}`, `"\ud800"`, `NaN`, `-Infinity`, `1e400`, `[`, `{"a": 1, "a": 2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Whatever parses is written as JSON that parses to the same text again (json.dumps is a
		// fixed point of json.loads).
		v, err := Parse(b)
		if err != nil {
			return
		}
		out := v.JSON()
		w, err := Parse(out)
		if err != nil {
			t.Fatalf("written form %s does not parse: %v", out, err)
		}
		if again := w.JSON(); string(again) != string(out) {
			t.Fatalf("not a fixed point: %s -> %s", out, again)
		}
	})
}
