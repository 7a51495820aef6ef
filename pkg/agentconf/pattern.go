package agentconf

import (
	"errors"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/pystr"
)

// parsePattern splits s at lp...rp groups and folds them with comb (the reference's parse_pattern):
// comb(acc, literal, group, true) for each group and comb(acc, rest, "", false) for the tail.
func parsePattern[T any](s string, init T, comb func(T, string, string, bool) (T, error), lp, rp string) (T, error) {
	acc := init
	for len(s) > 0 {
		begin := strings.Index(s, lp)
		end := -1
		if begin >= 0 {
			// Python's str.find(rp, begin) searches from begin.
			if e := strings.Index(s[begin:], rp); e >= 0 {
				end = begin + e
			}
		}
		if begin == -1 || end == -1 {
			return comb(acc, s, "", false)
		}
		var err error
		if acc, err = comb(acc, s[:begin], s[begin+1:end], true); err != nil {
			return acc, err
		}
		s = s[end+1:]
	}
	return acc, nil
}

// NormalizeRegex turns {name} placeholders into named digit groups: "ps_{i}" -> `ps_(?P<i>\d+)`.
func NormalizeRegex(pattern string) string {
	out, _ := parsePattern(pattern, "", func(acc, lit, group string, isGroup bool) (string, error) {
		if !isGroup {
			return acc + lit, nil
		}
		return acc + lit + `(?P<` + group + `>\d+)`, nil
	}, "{", "}")
	return out
}

// ExpandPattern expands [a-b,c-d] ranges (end exclusive, as Python's range) into every combination:
// "ps_[0-2,5-7]" -> ps_0 ps_1 ps_5 ps_6. Like the reference, a bare number ("[1]") is an error
// (kind Type) and a non-numeric item or bound ("[a]", "[]", "[a-2]") is an error (kind Value).
func ExpandPattern(pattern string) ([]string, error) {
	return parsePattern(pattern, []string{""}, func(acc []string, lit, group string, isGroup bool) ([]string, error) {
		if !isGroup {
			out := make([]string, len(acc))
			for i, v := range acc {
				out[i] = v + lit
			}
			return out, nil
		}
		var nums []int
		for _, item := range strings.Split(group, ",") {
			if !strings.Contains(item, "-") {
				// The reference converts the item before failing to extend a list by an int: a
				// non-integer item is a Value error, an integer one a Type error.
				if _, err := pyint.Atoi(item); err != nil {
					return nil, errkind.New(errkind.Value, "expand pattern %q: item %q: %w", pattern, item, err)
				}
				return nil, errkind.New(errkind.Type, "expand pattern %q: item %q must be a range start-end", pattern, item)
			}
			parts := strings.Split(item, "-")
			if len(parts) != 2 {
				return nil, errkind.New(errkind.Value, "expand pattern %q: item %q must be one range start-end", pattern, item)
			}
			s, err1 := pyint.Atoi(parts[0])
			e, err2 := pyint.Atoi(parts[1])
			if err1 != nil || err2 != nil {
				return nil, errkind.New(errkind.Value, "expand pattern %q: range %q needs integer bounds", pattern, item)
			}
			for i := s; i < e; i++ {
				nums = append(nums, i)
			}
		}
		var out []string
		for _, v := range acc {
			for _, n := range nums {
				out = append(out, v+lit+strconv.Itoa(n))
			}
		}
		if out == nil {
			out = []string{}
		}
		return out, nil
	}, "[", "]")
}

// ParseSubModelName splits "ps_3" into ("ps", 3) as the reference's pasre_sub_model_name: the name
// is stripped (str.strip) and split at "_"; a name without an index has index 0; the type is lower
// cased; an index int() rejects is a Value error with int()'s message ("invalid literal for int()
// with base 10: 'x'"). More than one "_" is a Precondition error (the reference asserts), and an
// index beyond 64 bits a Value error (Python's ints are unbounded).
func ParseSubModelName(name string) (string, int, error) {
	if name == "" {
		return "", 0, errkind.New(errkind.Runtime, "sub_model_name is None or empty")
	}
	parts := strings.Split(pystr.Strip(name), "_")
	if len(parts) == 1 {
		return strings.ToLower(parts[0]), 0, nil
	}
	if len(parts) != 2 {
		return "", 0, errkind.New(errkind.Precondition, "sub model name %q: want {type} or {type}_{index}", name)
	}
	idx, err := pyint.Atoi(parts[1])
	if errors.Is(err, pyint.ErrRange) {
		return "", 0, errkind.New(errkind.Value, "sub model name %q: index %q is out of the 64-bit range", name, parts[1])
	}
	if err != nil {
		return "", 0, errkind.Wrap(errkind.Value, err)
	}
	return strings.ToLower(parts[0]), idx, nil
}
