package pyint

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  error
	}{
		{"42", 42, nil},
		{" -7 ", -7, nil},
		{"\t+1_000\n", 1000, nil},
		{"0007", 7, nil},
		{"\x1c5\x1f", 0, ErrSyntax}, // str.strip removes these; int does not
		{"\u30005\u2029", 5, nil},
		{"\u00a09\u2003", 9, nil},
		{"-9223372036854775808", -9223372036854775808, nil},
		{"9223372036854775807", 9223372036854775807, nil},
		{"9223372036854775808", 0, ErrRange},
		{"-9223372036854775809", 0, ErrRange},
		{"99999999999999999999999", 0, ErrRange},
		{"1__0", 0, ErrSyntax},
		{"_1", 0, ErrSyntax},
		{"1_", 0, ErrSyntax},
		{"-_1", 0, ErrSyntax},
		{"+_1", 0, ErrSyntax},
		{"+-1", 0, ErrSyntax},
		{"--1", 0, ErrSyntax},
		{"", 0, ErrSyntax},
		{"   ", 0, ErrSyntax},
		{"-", 0, ErrSyntax},
		{"1.0", 0, ErrSyntax},
		{"0x10", 0, ErrSyntax},
		{"1 2", 0, ErrSyntax},
		{"١٢", 12, nil},     // Arabic-Indic digits
		{"-𝟗_𝟎", -90, nil},  // mathematical bold digits (a run of fifty)
		{"٣७", 37, nil},     // two scripts in one number
		{"Ⅻ", 0, ErrSyntax}, // a number, not a decimal digit
		{"²", 0, ErrSyntax}, // a digit, not decimal
	} {
		got, err := Parse(c.in)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
		}
	}
}

// The messages are Python's, with the text as repr shows it.
func TestErrorText(t *testing.T) {
	for in, want := range map[string]string{
		"x1":                     "invalid literal for int() with base 10: 'x1'",
		"it's":                   `invalid literal for int() with base 10: "it's"`,
		"99999999999999999999":   "int '99999999999999999999': out of the 64-bit integer range",
		"-99999999999999999999 ": "int '-99999999999999999999 ': out of the 64-bit integer range",
	} {
		if _, err := Parse(in); err == nil || err.Error() != want {
			t.Errorf("Parse(%q) error %v, want %q", in, err, want)
		}
	}
}

func TestAtoi(t *testing.T) {
	if n, err := Atoi(" 12 "); n != 12 || err != nil {
		t.Errorf("Atoi(\" 12 \") = %d, %v", n, err)
	}
	if _, err := Atoi("1__2"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Atoi(\"1__2\") error %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "-1_0", " +3 ", "_", "9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
			t.Fatalf("Parse(%q): unexpected error %v", s, err)
		}
		if err == nil && n != 0 && strings.TrimFunc(s, unicode.IsSpace) == "" {
			t.Fatalf("Parse(%q) = %d from blank text", s, n)
		}
	})
}

func TestFloorDivMod(t *testing.T) {
	for _, c := range [][3]int{{7, 2, 3}, {-7, 2, -4}, {7, -2, -4}, {-7, -2, 3}} {
		if FloorDiv(c[0], c[1]) != c[2] || FloorMod(c[0], c[1]) != c[0]-c[1]*c[2] {
			t.Errorf("floor %v: %d %d", c, FloorDiv(c[0], c[1]), FloorMod(c[0], c[1]))
		}
	}
	for _, tc := range []struct{ a, b, want int64 }{{1000, 64, 15}, {64, 64, 1}, {0, 5, 0}, {-1, 64, -1}, {-64, 64, -1}, {7, -2, -4}} {
		if got := FloorDiv(tc.a, tc.b); got != tc.want {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
