package pyjson

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// goldenPayloads are the strings of the dataclass goldens that look like JSON values.
func goldenPayloads(f *testing.F) []string {
	cases := fuzzseed.PythonCases(f, "data_def", "backends", "zk_mirror", "replica_manager")
	return fuzzseed.Matching(fuzzseed.AllStrings(cases), func(s string) bool {
		s = strings.TrimSpace(s)
		return s != "" && strings.ContainsAny(s[:1], "{[\"0123456789-ntf")
	})
}

// FuzzParse: Parse accepts exactly the valid UTF-8 JSON texts holding one object; a text that is
// not JSON is a Value error and JSON that is not an object a Type error (the reference's
// JSONDecodeError, then its failed field access); every reader's answer is what encoding/json
// reads from the field, and a reader's error is a Type error naming the field.
func FuzzParse(f *testing.F) {
	for _, s := range goldenPayloads(f) {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{}`, ` {"a": 1} `, `{"a": 1}{}`, `{"a": 1} x`, `[1] x`, `[1]`, `null`, `"x"`, `{"a": 1e400}`,
		`{"a": -0, "b": 9223372036854775808, "c": [1, -1, 1.0], "d": "\ud800", "e": "` + strings.Repeat("é", 30) + `"}`,
		"{\"a\": \"\xff\"}", `{"a": {"b": [null]}, "a": true}`, `{"s": "x", "n": null, "i": 7, "f": 1.5, "b": false, "l": [1, 2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Parse("T", b)
		trimmed := bytes.TrimLeft(b, " \t\r\n")
		isObject := len(trimmed) > 0 && trimmed[0] == '{'
		valid := utf8.Valid(b) && json.Valid(b)
		switch {
		case valid && isObject:
			if err != nil {
				t.Fatalf("Parse(%q): %v", b, err)
			}
		case err == nil:
			t.Fatalf("Parse(%q) accepted it", b)
		case !valid && errkind.Of(err) != errkind.Value:
			t.Fatalf("Parse(%q) of invalid JSON: %v is not a Value error", b, err)
		case valid && errkind.Of(err) != errkind.Type:
			t.Fatalf("Parse(%q) of a non-object: %v is not a Type error", b, err)
		}
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "T: ") || !utf8.ValidString(msg) {
				t.Fatalf("Parse(%q): message %q", b, msg)
			}
			return
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			t.Fatal(err)
		}
		for name, raw := range fields {
			checkReaders(t, o, name, raw)
		}
		checkAbsent(t, o, "\x00absent")
	})
}

// checkReaders reads field name with every reader and compares with encoding/json's reading.
func checkReaders(t *testing.T, o *Object, name string, raw json.RawMessage) {
	t.Helper()
	isNull := string(raw) == "null"
	var s string
	isStr := json.Unmarshal(raw, &s) == nil && !isNull
	var num json.Number
	isNum := json.Unmarshal(raw, &num) == nil && !isNull && !isStr
	intVal, intErr := strconv.ParseInt(string(raw), 10, 64)
	isInt := isNum && intErr == nil
	fl, flErr := strconv.ParseFloat(string(raw), 64)
	isFloat := isNum && flErr == nil
	var bl bool
	isBool := json.Unmarshal(raw, &bl) == nil && !isNull

	typeErr := func(reader string, err error, want bool) bool {
		t.Helper()
		if err == nil {
			if !want {
				t.Fatalf("%s(%q) accepted %s", reader, name, raw)
			}
			return true
		}
		if want {
			t.Fatalf("%s(%q) of %s: %v", reader, name, raw, err)
		}
		if msg := err.Error(); errkind.Of(err) != errkind.Type || !strings.HasPrefix(msg, "T."+name) || !utf8.ValidString(msg) {
			t.Fatalf("%s(%q) of %s: error %q (%v)", reader, name, raw, msg, errkind.Of(err))
		}
		return false
	}

	var str string
	if typeErr("Str", o.Str(name, &str), isStr) && str != s {
		t.Fatalf("Str(%q) = %q, want %q", name, str, s)
	}
	opt := new(string)
	if typeErr("OptStr", o.OptStr(name, &opt), isStr || isNull) && (isNull != (opt == nil) || (opt != nil && *opt != s)) {
		t.Fatalf("OptStr(%q) of %s = %v", name, raw, opt)
	}
	var n int
	if typeErr("Int", o.Int(name, &n), isInt) && int64(n) != intVal {
		t.Fatalf("Int(%q) = %d, want %d", name, n, intVal)
	}
	optN := new(int)
	if typeErr("OptInt", o.OptInt(name, &optN), isInt || isNull) && (isNull != (optN == nil) || (optN != nil && int64(*optN) != intVal)) {
		t.Fatalf("OptInt(%q) of %s = %v", name, raw, optN)
	}
	var x float64
	if typeErr("Float", o.Float(name, &x), isFloat) && x != fl {
		t.Fatalf("Float(%q) = %v, want %v", name, x, fl)
	}
	var bb bool
	if typeErr("Bool", o.Bool(name, &bb), isBool) && bb != bl {
		t.Fatalf("Bool(%q) = %v, want %v", name, bb, bl)
	}
	var items []json.RawMessage
	isInts := !isNull && json.Unmarshal(raw, &items) == nil
	var want []int
	for _, it := range items {
		v, err := strconv.ParseInt(string(it), 10, 64)
		isInts = isInts && err == nil
		want = append(want, int(v))
	}
	var ints []int
	if typeErr("Ints", o.Ints(name, &ints), isInts) && (len(ints) != len(want) || (len(want) > 0 && !equalInts(ints, want))) {
		t.Fatalf("Ints(%q) = %v, want %v", name, ints, want)
	}
	if r, ok := o.Field(name); !ok || !bytes.Equal(r, raw) {
		t.Fatalf("Field(%q) = %s, %v", name, r, ok)
	}
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkAbsent: a reader of an absent key leaves its destination as it was.
func checkAbsent(t *testing.T, o *Object, name string) {
	t.Helper()
	s, i, fl, b, ints := "keep", 7, 1.5, true, []int{1}
	ps, pi := &s, &i
	for _, err := range []error{o.Str(name, &s), o.OptStr(name, &ps), o.Int(name, &i), o.OptInt(name, &pi),
		o.Float(name, &fl), o.Bool(name, &b), o.Ints(name, &ints)} {
		if err != nil {
			t.Fatalf("absent %q: %v", name, err)
		}
	}
	if s != "keep" || ps != &s || i != 7 || pi != &i || fl != 1.5 || !b || len(ints) != 1 {
		t.Fatalf("absent %q changed a destination", name)
	}
}

// FuzzWriter: what Writer writes is Python's json.dumps: ASCII only, and, for finite floats, JSON
// that Parse reads back to the values written (strings with their invalid UTF-8 bytes as U+FFFD,
// as a Python str cannot hold them); a non-finite float is written as json.dumps writes it.
func FuzzWriter(f *testing.F) {
	f.Add("a", "é\"x\n\x00\U0001F600", 3, 1.5, true, []byte{1, 0xff})
	f.Add("", "\xff", -1, math.Inf(1), false, []byte{})
	f.Add("\u2028", "", math.MaxInt64, math.NaN(), true, []byte(nil))
	f.Add("x", "y", math.MinInt64, 1e16, false, []byte{0x80})
	f.Fuzz(func(t *testing.T, name, s string, n int, x float64, b bool, list []byte) {
		name = string([]rune(name)) // field names come from Go source: valid UTF-8
		ints := make([]int, len(list))
		for i, c := range list {
			ints[i] = int(int8(c)) * n
		}
		var w Writer
		w.Str(name+"s", s)
		w.OptStr(name+"o", nil)
		w.OptStr(name+"p", &s)
		w.Int(name+"i", n)
		w.OptInt(name+"j", nil)
		w.OptInt(name+"k", &n)
		w.Float(name+"f", x)
		w.Bool(name+"b", b)
		w.Ints(name+"l", ints)
		out := w.Bytes()
		for _, c := range out {
			if c >= 0x80 {
				t.Fatalf("non-ASCII byte in %q", out)
			}
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			tok := map[bool]string{true: "Infinity", false: "-Infinity"}[x > 0]
			if math.IsNaN(x) {
				tok = "NaN"
			}
			if !bytes.Contains(out, []byte(": "+tok+", ")) {
				t.Fatalf("%v written as in %s, want %s (json.dumps)", x, out, tok)
			}
			return
		}
		o, err := Parse("T", out)
		if err != nil {
			t.Fatalf("Parse(%s): %v", out, err)
		}
		wantS := string([]rune(s))
		var gs string
		var gp, go2 *string
		var gi int
		var gj, gk *int
		var gf float64
		var gb bool
		var gl []int
		if err := firstErr(o.Str(name+"s", &gs), o.OptStr(name+"o", &gp), o.OptStr(name+"p", &go2), o.Int(name+"i", &gi),
			o.OptInt(name+"j", &gj), o.OptInt(name+"k", &gk), o.Float(name+"f", &gf), o.Bool(name+"b", &gb), o.Ints(name+"l", &gl)); err != nil {
			t.Fatalf("read back %s: %v", out, err)
		}
		switch {
		case gs != wantS || gp != nil || go2 == nil || *go2 != wantS:
			t.Fatalf("strings %q %v %v, want %q", gs, gp, go2, wantS)
		case gi != n || gj != nil || gk == nil || *gk != n:
			t.Fatalf("ints %d %v %v, want %d", gi, gj, gk, n)
		case gf != x || math.Signbit(gf) != math.Signbit(x):
			t.Fatalf("float %v, want %v (%s)", gf, x, out)
		case gb != b || len(gl) != len(ints) || (len(ints) > 0 && !equalInts(gl, ints)):
			t.Fatalf("bool %v list %v, want %v %v", gb, gl, b, ints)
		}
	})
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
