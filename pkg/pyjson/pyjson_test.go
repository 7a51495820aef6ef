package pyjson

import (
	"math"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestWriter(t *testing.T) {
	s, n := "é\"x", 3
	for _, tc := range []struct {
		name  string
		write func(w *Writer)
		want  string
	}{
		{"empty", func(w *Writer) {}, `{}`},
		{"fields in order", func(w *Writer) {
			w.OptStr("a", &s)
			w.OptStr("b", nil)
			w.Int("c", -1)
			w.OptInt("d", &n)
			w.OptInt("e", nil)
			w.Float("f", 1)
			w.Bool("g", true)
			w.Ints("h", []int{1, 2})
			w.Ints("i", []int{})
		}, `{"a": "\u00e9\"x", "b": null, "c": -1, "d": 3, "e": null, "f": 1.0, "g": true, "h": [1, 2], "i": []}`},
		// json.dumps writes non-finite floats as NaN, Infinity, -Infinity (not repr's nan, inf), which
		// its json.loads reads back; found by FuzzWriter.
		{"non-finite floats", func(w *Writer) {
			w.Float("a", math.NaN())
			w.Float("b", math.Inf(1))
			w.Float("c", math.Inf(-1))
		}, `{"a": NaN, "b": Infinity, "c": -Infinity}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Writer
			tc.write(&w)
			if got := string(w.Bytes()); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		kind     errkind.Kind
		msg      string
	}{
		{"object", `{"a": 1}`, errkind.Unknown, ""},
		{"not UTF-8", "{\"a\": \"\xff\"}", errkind.Value, "T: serialized data is not valid UTF-8"},
		{"syntax", `{"a": `, errkind.Value, "T: invalid JSON"},
		{"extra data", `{} {}`, errkind.Value, "T: invalid JSON: extra data after the value"},
		{"list", `[1]`, errkind.Type, "T: want a JSON object, got a list"},
		// json.loads fails first (Extra data), before anything looks at the value's type; found by FuzzParse.
		{"list then extra data", `[1] x`, errkind.Value, "T: invalid JSON"},
		{"address", `10.0.7.7:7`, errkind.Value, "T: invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("T", []byte(tc.in))
			checkErr(t, err, tc.kind, tc.msg)
		})
	}
}

func TestReaders(t *testing.T) {
	o, err := Parse("T", []byte(`{"s": "x", "n": null, "i": 7, "f": 1.5, "b": false, "l": [1, 2], "bad": "y", "frac": 1.5, "li": [1, 1.5], "long": "ééééééééééééééééééééé"}`))
	if err != nil {
		t.Fatal(err)
	}
	var (
		s, absent string = "", "kept"
		os        *string
		i         int
		oi        = new(int)
		f         float64
		b         = true
		l         []int
	)
	for _, tc := range []struct {
		name string
		read func() error
		msg  string // "" for no error
	}{
		{"str", func() error { return o.Str("s", &s) }, ""},
		{"absent keeps", func() error { return o.Str("missing", &absent) }, ""},
		{"opt str null", func() error { return o.OptStr("n", &os) }, ""},
		{"int", func() error { return o.Int("i", &i) }, ""},
		{"opt int null", func() error { return o.OptInt("n", &oi) }, ""},
		{"float", func() error { return o.Float("f", &f) }, ""},
		{"bool", func() error { return o.Bool("b", &b) }, ""},
		{"ints", func() error { return o.Ints("l", &l) }, ""},
		{"int from string", func() error { return o.Int("bad", &i) }, `T.bad: want an integer, got "y"`},
		{"int with fraction", func() error { return o.Int("frac", &i) }, "T.frac: want an integer, got 1.5"},
		{"str from null", func() error { return o.Str("n", &s) }, "T.n: want a string, got null"},
		{"bool from string", func() error { return o.Bool("bad", &b) }, `T.bad: want true or false, got "y"`},
		{"ints element", func() error { return o.Ints("li", &l) }, "T.li[1]: want an integer, got 1.5"},
		// The quoted value is cut at a rune boundary (40 bytes would split the 20th é); found by FuzzParse.
		{"value cut whole runes", func() error { return o.Int("long", &i) }, `T.long: want an integer, got "ééééééééééééééééééé...`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.read()
			if tc.msg == "" {
				checkErr(t, err, errkind.Unknown, "")
			} else {
				checkErr(t, err, errkind.Type, tc.msg)
			}
		})
	}
	if s != "x" || absent != "kept" || os != nil || i != 7 || oi != nil || f != 1.5 || b || len(l) != 2 {
		t.Fatalf("values read: s=%q absent=%q os=%v i=%d oi=%v f=%v b=%v l=%v", s, absent, os, i, oi, f, b, l)
	}
}

func checkErr(t *testing.T, err error, kind errkind.Kind, msg string) {
	t.Helper()
	if msg == "" {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Fatalf("error %v, want one containing %q", err, msg)
	}
	if got := errkind.Of(err); got != kind {
		t.Fatalf("error %v: kind %v, want %v", err, got, kind)
	}
}
