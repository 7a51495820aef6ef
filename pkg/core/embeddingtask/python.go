package embeddingtask

import (
	"strings"
	"unicode"
)

// isPySpace is Python's str.isspace for one character (Go's unicode.IsSpace plus the ASCII
// separators \x1c-\x1f).
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyStrip is str.strip().
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// isASCIIDigits is str.isdigit() for ASCII text: non-empty and only 0-9.
func isASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
