package pystr

import "testing"

// The expectations are Python 3.11's: str.strip(), str.isspace() and str.isnumeric().
func TestPythonStrings(t *testing.T) {
	tests := []struct {
		in      string
		strip   string
		numeric bool
	}{
		{"", "", false},
		{"  a b \t\n", "a b", false},
		{"\x1c\x1dx\x1e\x1f", "x", false}, // separators Go's unicode.IsSpace does not count
		{"\u00a0x\u3000", "x", false},
		{"123", "123", true},
		{"１２", "１２", true},   // fullwidth digits
		{"四十二", "四十二", true}, // CJK numerals outside category N
		{"½", "½", true},
		{"1.5", "1.5", false},
		{"-1", "-1", false},
		{" 1", "1", false},
	}
	for _, tc := range tests {
		if got := Strip(tc.in); got != tc.strip {
			t.Errorf("Strip(%q) = %q, want %q", tc.in, got, tc.strip)
		}
		if got := IsNumeric(tc.in); got != tc.numeric {
			t.Errorf("IsNumeric(%q) = %v, want %v", tc.in, got, tc.numeric)
		}
	}
	for _, r := range []rune{' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x2028, 0x3000} {
		if !IsSpace(r) {
			t.Errorf("IsSpace(%U) = false, want true", r)
		}
	}
	for _, r := range []rune{'a', '0', 0x1b, 0x200b} {
		if IsSpace(r) {
			t.Errorf("IsSpace(%U) = true, want false", r)
		}
	}
}
