package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Placeholders the golden writer substitutes for values that differ from run to run.
const (
	portPlaceholder = "<port>"
	tmpPlaceholder  = "<tmp>"
)

// shownDiffs is how many differences a FAIL line shows; keptDiffs bounds what -v lists.
const (
	shownDiffs = 3
	keptDiffs  = 100
)

// comparer compares a decoded golden value with a decoded Go value and collects readable diffs.
type comparer struct {
	tmp   string // the case's TempDir, what "<tmp>" stands for
	exact bool   // compare error messages, not only kinds
	max   int
	diffs []string
	total int
}

// compareJSON compares the golden JSON want with the Go JSON got under the normalization rules and
// returns the first max differences (nil when they match) and how many there are in all.
func compareJSON(want, got []byte, tmp string, exact bool, max int) ([]string, int, error) {
	w, err := decodeGeneric(want)
	if err != nil {
		return nil, 0, fmt.Errorf("golden output: %w", err)
	}
	g, err := decodeGeneric(got)
	if err != nil {
		return nil, 0, fmt.Errorf("go result: %w", err)
	}
	c := &comparer{tmp: tmp, exact: exact, max: max}
	c.value("$", w, g)
	return c.diffs, c.total, nil
}

// decodeGeneric decodes JSON keeping number literals, so int 0 and float 0.0 stay distinguishable.
func decodeGeneric(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func (c *comparer) addf(path, format string, args ...any) {
	c.total++
	if len(c.diffs) >= c.max {
		return
	}
	c.diffs = append(c.diffs, path+": "+fmt.Sprintf(format, args...))
}

func (c *comparer) mismatch(path string, want, got any) {
	if ws, ok := want.(string); ok {
		if gs, ok := got.(string); ok && (len(ws) > 60 || len(gs) > 60) {
			c.addf(path, "%s", stringDiff(ws, gs))
			return
		}
	}
	c.addf(path, "expected %s, got %s", show(want), show(got))
}

func (c *comparer) value(path string, want, got any) {
	switch w := want.(type) {
	case map[string]any:
		if t, m, ok := pyErrorForm(w); ok {
			c.pyError(path, t, m, got)
			return
		}
		g, ok := got.(map[string]any)
		if !ok {
			c.mismatch(path, want, got)
			return
		}
		c.object(path, w, g)
	case []any:
		g, ok := got.([]any)
		if !ok {
			c.mismatch(path, want, got)
			return
		}
		c.array(path, w, g)
	case string:
		if !c.stringMatches(w, got) {
			c.mismatch(path, want, got)
		}
	case json.Number:
		c.number(path, w, got)
	default: // nil, bool
		if want != got {
			c.mismatch(path, want, got)
		}
	}
}

func (c *comparer) object(path string, want, got map[string]any) {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		w, inWant := want[k]
		g, inGot := got[k]
		p := path + pathKey(k)
		switch {
		case !inGot:
			c.addf(p, "missing (expected %s)", show(w))
		case !inWant:
			c.addf(p, "unexpected key (got %s)", show(g))
		default:
			c.value(p, w, g)
		}
	}
}

func (c *comparer) array(path string, want, got []any) {
	if len(want) != len(got) {
		c.addf(path, "expected %d elements, got %d", len(want), len(got))
	}
	for i := 0; i < len(want) && i < len(got); i++ {
		c.value(fmt.Sprintf("%s[%d]", path, i), want[i], got[i])
	}
}

// number compares literal forms: both ints or both floats, equal in value. Python writes floats
// with a fraction (0.0), so a Go int where the reference had a float is a difference.
func (c *comparer) number(path string, want json.Number, got any) {
	g, ok := got.(json.Number)
	if !ok {
		c.mismatch(path, want, got)
		return
	}
	wInt, gInt := isIntLiteral(want), isIntLiteral(g)
	switch {
	case wInt && gInt:
		if !intsEqual(want, g) {
			c.mismatch(path, want, got)
		}
	case !wInt && !gInt:
		wf, err1 := want.Float64()
		gf, err2 := g.Float64()
		if err1 != nil || err2 != nil || wf != gf {
			c.mismatch(path, want, got)
		}
	case wInt:
		c.addf(path, "expected int %s, got float %s", want, g)
	default:
		c.addf(path, "expected float %s, got int %s (use harness.Float for Python floats)", want, g)
	}
}

func isIntLiteral(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

func intsEqual(a, b json.Number) bool {
	x, ok1 := new(big.Int).SetString(string(a), 10)
	y, ok2 := new(big.Int).SetString(string(b), 10)
	return ok1 && ok2 && x.Cmp(y) == 0
}

// stringMatches applies the placeholder rules: "<port>" alone matches any JSON integer port, and in
// a string each "<port>" stands for a decimal port and each "<tmp>" for the case's TempDir.
func (c *comparer) stringMatches(want string, got any) bool {
	if n, ok := got.(json.Number); ok {
		return want == portPlaceholder && isIntLiteral(n) && validPort(string(n))
	}
	g, ok := got.(string)
	if !ok {
		return false
	}
	if want == g {
		return true
	}
	if !strings.Contains(want, portPlaceholder) && !strings.Contains(want, tmpPlaceholder) {
		return false
	}
	return placeholderRegexp(want, c.tmp).MatchString(g) && portsValid(want, g, c.tmp)
}

var placeholderSplit = regexp.MustCompile(`<port>|<tmp>`)

func placeholderRegexp(want, tmp string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, loc := range placeholderSplit.FindAllStringIndex(want, -1) {
		b.WriteString(regexp.QuoteMeta(want[last:loc[0]]))
		if want[loc[0]:loc[1]] == portPlaceholder {
			b.WriteString(`(0|[1-9][0-9]{0,4})`)
		} else {
			b.WriteString(regexp.QuoteMeta(tmp))
		}
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(want[last:]) + "$")
	return regexp.MustCompile(b.String())
}

func portsValid(want, got, tmp string) bool {
	m := placeholderRegexp(want, tmp).FindStringSubmatch(got)
	for _, p := range m[1:] {
		if !validPort(p) {
			return false
		}
	}
	return true
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}

// pyErrorForm recognises a nested golden {"error": {"type": T, "message": M}}.
func pyErrorForm(m map[string]any) (typ, msg string, ok bool) {
	if !soleKey(m, "error") {
		return "", "", false
	}
	body, ok := m["error"].(map[string]any)
	if !ok || len(body) != 2 {
		return "", "", false
	}
	typ, ok1 := body["type"].(string)
	msg, ok2 := body["message"].(string)
	return typ, msg, ok1 && ok2
}

// soleKey reports whether key is m's only key.
func soleKey(m map[string]any, key string) bool {
	_, ok := m[key]
	return ok && len(m) == 1
}

// goErrorForm recognises the Go side's ErrorValue {"error": {"kind": K, "message": M}}.
func goErrorForm(v any) (kind, msg string, ok bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", "", false
	}
	if !soleKey(m, "error") {
		return "", "", false
	}
	body, ok := m["error"].(map[string]any)
	if !ok || len(body) != 2 {
		return "", "", false
	}
	kind, ok1 := body["kind"].(string)
	msg, ok2 := body["message"].(string)
	return kind, msg, ok1 && ok2
}

func (c *comparer) pyError(path, typ, msg string, got any) {
	kind, err := KindOfPython(typ)
	if err != nil {
		c.addf(path, "%v", err)
		return
	}
	gotKind, gotMsg, ok := goErrorForm(got)
	if !ok {
		c.addf(path, "expected error %s (kind %s), got %s", typ, kind, show(got))
		return
	}
	if gotKind != kind.String() {
		c.addf(path, "expected error %s (kind %s), got error of kind %s: %s", typ, kind, gotKind, gotMsg)
		return
	}
	if c.exact && !messageMatches(msg, gotMsg) {
		c.addf(path, "error message: expected %q, got %q", msg, gotMsg)
	}
}

// messageMatches compares error messages for calls whose spec says messages are exact. An empty
// reference message (a bare assert) carries nothing to compare, so any Go message matches it.
func messageMatches(want, got string) bool { return want == "" || want == got }

var identKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func pathKey(k string) string {
	if identKey.MatchString(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// show renders a decoded value as compact JSON for a diff line.
func show(v any) string {
	if v == nil {
		return "null"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return shorten(strings.TrimSpace(b.String()), 80)
}

// stringDiff points at the first difference of two long strings, with some context.
func stringDiff(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	start := max(0, i-20)
	return fmt.Sprintf("strings differ at byte %d: expected …%s, got …%s", i,
		shorten(strconv.Quote(want[start:]), 60), shorten(strconv.Quote(got[start:]), 60))
}

// shorten cuts s to about n bytes, at a rune boundary.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
