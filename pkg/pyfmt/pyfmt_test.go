package pyfmt

import (
	"math"
	"testing"
)

func TestFloat(t *testing.T) {
	a, b := 0.1, 0.2 // variables: constant arithmetic would be exact
	// Expected values are Python 3 repr() outputs.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{0.25, "0.25"},
		{-1.5, "-1.5"},
		{60000000, "60000000.0"},
		{1e-05, "1e-05"},
		{0.0001, "0.0001"},
		{1e16, "1e+16"},
		{1234567890123456.0, "1234567890123456.0"},
		{a + b, "0.30000000000000004"},
		{1.5e-10, "1.5e-10"},
		{1e100, "1e+100"},
		{math.Inf(1), "inf"},
		{math.NaN(), "nan"},
	}
	for _, tc := range tests {
		if got := Float(tc.in); got != tc.want {
			t.Errorf("Float(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBool(t *testing.T) {
	if Bool(true) != "True" || Bool(false) != "False" {
		t.Fatal("Bool must print Python's True/False")
	}
}

func TestJSONString(t *testing.T) {
	// Expected values are Python 3 json.dumps outputs.
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain /path", `"plain /path"`},
		{"q\"b\\", `"q\"b\\"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x01\x1f\x7f", `"\u0001\u001f\u007f"`},
		{"模型", `"\u6a21\u578b"`},
		{"é", `"\u00e9"`},
		{"😀", `"\ud83d\ude00"`},
	}
	for _, tc := range tests {
		if got := JSONString(tc.in); got != tc.want {
			t.Errorf("JSONString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestBytesRepr(t *testing.T) {
	// Expected values are Python 3 repr(bytes) outputs.
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte(""), `b''`},
		{[]byte(`{"a": 1}`), `b'{"a": 1}'`},
		{[]byte("it's"), `b"it's"`},
		{[]byte(`it's "x"`), `b'it\'s "x"'`},
		{[]byte("a\\b\n\x00\xff"), `b'a\\b\n\x00\xff'`},
	}
	for _, tc := range tests {
		if got := BytesRepr(tc.in); got != tc.want {
			t.Errorf("BytesRepr(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestOptional(t *testing.T) {
	s, n := "x", 7
	tests := []struct{ got, want string }{
		{OptStr(nil), "None"}, {OptStr(&s), "x"}, {OptInt(nil), "None"}, {OptInt(&n), "7"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestRepr(t *testing.T) {
	// Expected values are Python 3 repr() outputs.
	tests := []struct {
		in   any
		want string
	}{
		{nil, "None"}, {true, "True"}, {3, "3"}, {int64(-2), "-2"}, {0.5, "0.5"},
		{"a'b", `"a'b"`}, {`a'"b`, `'a\'"b'`}, {"t\tn\n\x01é", `'t\tn\n\x01é'`},
		{[]string{"x", "y"}, "['x', 'y']"}, {[]int64{1, 2}, "[1, 2]"},
	}
	for _, tc := range tests {
		if got := Repr(tc.in); got != tc.want {
			t.Errorf("Repr(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
