// Package fnmatch matches names against shell patterns exactly as Python's fnmatch module does
// (fnmatch.fnmatchcase and, on POSIX, fnmatch.filter), which agent_controller.py uses to pick
// sub-graphs ("ps_*").
//
// path.Match differs from it: there "*" and "?" do not match "/", "[^...]" negates (Python only
// knows "[!...]"), "\" escapes (Python has no escapes: "\" is a literal character), and a
// malformed pattern is an error (Python reads an unclosed "[" as a literal "["). So the pattern is
// translated the way Python 3.11's fnmatch.translate does, including its handling of ranges:
// "-" first or last in a set is literal, a reversed range such as "z-a" is dropped together with
// its bounds, and a set left empty never matches.
package fnmatch

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Match reports whether name matches pattern (fnmatch.fnmatchcase: case-sensitive).
func Match(name, pattern string) (bool, error) {
	re, err := Compile(pattern)
	if err != nil {
		return false, err
	}
	return re.MatchString(name), nil
}

// Filter returns the names that match pattern, in their order (fnmatch.filter on POSIX, where
// os.path.normcase changes nothing).
func Filter(names []string, pattern string) ([]string, error) {
	re, err := Compile(pattern)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, n := range names {
		if re.MatchString(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Compile returns the regular expression that matches what pattern matches.
func Compile(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(Translate(pattern))
	if err != nil { // Translate quotes every literal, so this would be a bug here
		return nil, fmt.Errorf("fnmatch: pattern %q: %w", pattern, err)
	}
	return re, nil
}

// Translate returns a Go regular expression (RE2 syntax) for pattern, anchored at both ends, with
// the same meaning as Python's fnmatch.translate(pattern).
func Translate(pattern string) string {
	p := []rune(pattern)
	n := len(p)
	var b strings.Builder
	b.WriteString(`^(?s:`)
	star := false
	for i := 0; i < n; {
		c := p[i]
		i++
		switch c {
		case '*':
			if !star { // consecutive stars are one
				b.WriteString(`.*`)
			}
			star = true
			continue
		case '?':
			b.WriteString(`.`)
		case '[':
			j := i
			if j < n && p[j] == '!' {
				j++
			}
			if j < n && p[j] == ']' {
				j++
			}
			for j < n && p[j] != ']' {
				j++
			}
			if j >= n {
				b.WriteString(`\[`) // no closing bracket: a literal "["
			} else {
				b.WriteString(set(p, i, j))
				i = j + 1
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
		star = false
	}
	b.WriteString(`)\z`)
	return b.String()
}

// set translates the bracket expression p[i:j] (between "[" and "]").
func set(p []rune, i, j int) string {
	stuff := p[i:j]
	var chunks [][]rune // literal runs; consecutive chunks are joined by a range
	if !slices.Contains(stuff, '-') {
		chunks = [][]rune{slices.Clone(stuff)}
	} else {
		// Python 3.11's split at the hyphens that make ranges: the search starts after the first
		// character (after "!x" when negated) and resumes two characters after each range's end.
		k := i + 1
		if p[i] == '!' {
			k = i + 2
		}
		for {
			k = indexFrom(p, '-', k, j)
			if k < 0 {
				break
			}
			chunks = append(chunks, slices.Clone(p[i:k]))
			i = k + 1
			k += 3
		}
		if chunk := p[i:j]; len(chunk) > 0 {
			chunks = append(chunks, slices.Clone(chunk))
		} else {
			last := len(chunks) - 1
			chunks[last] = append(chunks[last], '-')
		}
		// Remove empty (reversed) ranges, with their bounds, as Python does.
		for k := len(chunks) - 1; k > 0; k-- {
			prev, cur := chunks[k-1], chunks[k]
			if prev[len(prev)-1] > cur[0] {
				chunks[k-1] = append(slices.Clone(prev[:len(prev)-1]), cur[1:]...)
				chunks = slices.Delete(chunks, k, k+1)
			}
		}
	}
	negate := false
	if len(chunks[0]) > 0 && chunks[0][0] == '!' {
		negate = true
		chunks[0] = chunks[0][1:]
	}
	empty := true
	for _, c := range chunks {
		if len(c) > 0 {
			empty = false
		}
	}
	switch {
	case empty && negate:
		return `.` // "[!]"-like: any character
	case empty:
		return `[^\x00-\x{10FFFF}]` // an empty set: never matches
	}
	var b strings.Builder
	b.WriteByte('[')
	if negate {
		b.WriteByte('^')
	}
	for k, c := range chunks {
		if k > 0 {
			b.WriteByte('-') // the range from the previous chunk's last to this one's first
		}
		for _, r := range c {
			b.WriteString(classLiteral(r))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// classLiteral writes r so that a character class reads it literally.
func classLiteral(r rune) string {
	if r < 0x80 && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_') {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf(`\x%02x`, r)
		}
		return `\` + string(r)
	}
	return string(r)
}

// indexFrom is Python's s.find(c, from, to).
func indexFrom(p []rune, c rune, from, to int) int {
	for k := from; k < to && k < len(p); k++ {
		if p[k] == c {
			return k
		}
	}
	return -1
}
