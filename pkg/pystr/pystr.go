// Package pystr has Python's str predicates and strip where Go's differ: Python counts more
// characters as white space and as numeric.
package pystr

import (
	"strings"
	"unicode"
)

// IsSpace is Python's str.isspace() for one character: Go's unicode.IsSpace plus the separators
// \x1c-\x1f, which Python counts as white space.
func IsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// Strip is Python's str.strip().
func Strip(s string) string { return strings.TrimFunc(s, IsSpace) }

// IsNumeric is Python's str.isnumeric(): not empty, and every character has a Unicode numeric
// type. That is every character of category N, plus the CJK ideographs with a numeric value
// (hanNumerals).
func IsNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.Is(unicode.N, r) && !hanNumerals[r] {
			return false
		}
	}
	return true
}

// hanNumerals are the characters outside category N that Python 3.11 (Unicode 14) calls numeric:
// [c for c in range(0x110000) if chr(c).isnumeric() and not unicodedata.category(chr(c)).startswith('N')].
var hanNumerals = func() map[rune]bool {
	m := map[rune]bool{}
	for _, r := range []rune{
		0x3405, 0x3483, 0x382a, 0x3b4d, 0x4e00, 0x4e03, 0x4e07, 0x4e09, 0x4e5d, 0x4e8c, 0x4e94, 0x4e96,
		0x4ebf, 0x4ec0, 0x4edf, 0x4ee8, 0x4f0d, 0x4f70, 0x5104, 0x5146, 0x5169, 0x516b, 0x516d, 0x5341,
		0x5343, 0x5344, 0x5345, 0x534c, 0x53c1, 0x53c2, 0x53c3, 0x53c4, 0x56db, 0x58f1, 0x58f9, 0x5e7a,
		0x5efe, 0x5eff, 0x5f0c, 0x5f0d, 0x5f0e, 0x5f10, 0x62fe, 0x634c, 0x67d2, 0x6f06, 0x7396, 0x767e,
		0x8086, 0x842c, 0x8cae, 0x8cb3, 0x8d30, 0x9621, 0x9646, 0x964c, 0x9678, 0x96f6, 0xf96b, 0xf973,
		0xf978, 0xf9b2, 0xf9d1, 0xf9d3, 0xf9fd, 0x20001, 0x20064, 0x200e2, 0x20121, 0x2092a, 0x20983,
		0x2098c, 0x2099c, 0x20aea, 0x20afd, 0x20b19, 0x22390, 0x22998, 0x23b1b, 0x2626d, 0x2f890,
	} {
		m[r] = true
	}
	return m
}()
