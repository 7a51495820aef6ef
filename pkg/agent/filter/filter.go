// Package filter implements agent v3's layout filters (monolith/agent_service/agent_v3.py): which
// saved models of a layout this host loads. A filter is "pattern;condition", configured with the
// agent.conf key layout_filters (repeated for several):
//
//	layout_filters entry; True
//	layout_filters ps_{i}; ${shard_id} == i % ${shard_num}
//
// ${shard_id} and ${shard_num} are replaced in the whole text first (by max(shard_id, 0) and
// max(num_shard, 1)); {name} in the pattern becomes the named group (?P<name>\d+); the pattern
// must match at the start of the sub graph name (Python's re.match); the condition is then
// evaluated with each named group bound to its integer value (the group may also be written
// ${i}, as ${shard_id} is). A sub graph is loaded when the first filter whose pattern matches it
// has a true condition, or when there are no filters.
//
// Patterns are Go regular expressions (RE2 syntax), which Python's re mostly shares: a construct
// RE2 lacks (lookaround, backreference) is rejected when the filter is parsed, naming it; \d, \w,
// \s and \b are ASCII here where Python's also take other scripts' digits and letters, which
// no sub graph name (entry, ps_N, dense_N) holds.
//
// The reference evaluates the condition with Python's eval. Here it is a small expression
// language (see expr.go): integers, True/False, + - * // % (Python's floor semantics),
// parentheses, == != < <= > >= (chained as in Python), and/or/not. Anything else is rejected when
// the filter is parsed, with an error naming the filter and the column; evaluation errors (division
// by zero, overflow) name the sub graph too. Nothing panics on bad input.
package filter

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Params are the values substituted for ${shard_id} and ${shard_num}.
type Params struct {
	ShardID  int
	ShardNum int
}

// NewParams returns the values AgentV3 substitutes: max(shardID, 0) and max(numShard, 1).
func NewParams(shardID, numShard int) Params {
	return Params{ShardID: max(shardID, 0), ShardNum: max(numShard, 1)}
}

// ParamsFromConfig is NewParams of the config's shard_id (SHARD_ID) and num_shard.
func ParamsFromConfig(c *agentconf.AgentConfig) (Params, error) {
	shard, err := c.ShardID()
	if err != nil {
		return Params{}, fmt.Errorf("layout filters: %w", err)
	}
	num := 1
	if c.NumShard != nil {
		num = *c.NumShard
	}
	return NewParams(shard, num), nil
}

// Error is a filter that cannot be parsed or evaluated.
type Error struct {
	// Filter is the filter as configured.
	Filter string
	// SubGraph is the sub graph being filtered ("" for parse errors).
	SubGraph string
	// Part is "pattern" or "condition" ("" when the filter as a whole is malformed).
	Part string
	// Text is the pattern or condition, after ${shard_id} / ${shard_num} substitution.
	Text string
	// Column is the 1-based column in Text where the problem is (0: not about one place).
	Column int
	Msg    string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "layout filter %q", e.Filter)
	if e.SubGraph != "" {
		fmt.Fprintf(&b, ", sub graph %q", e.SubGraph)
	}
	if e.Part != "" {
		fmt.Fprintf(&b, ": %s %q", e.Part, e.Text)
	}
	if e.Column > 0 {
		fmt.Fprintf(&b, ", column %d", e.Column)
	}
	return b.String() + ": " + e.Msg
}

// group is a named group of the pattern: its name and submatch index.
type group struct {
	name string
	sub  int
}

// Filter is one parsed layout filter. It is immutable and safe for concurrent use.
type Filter struct {
	raw    string
	match  string // the normalized pattern (Python's match)
	cond   string // the condition text as written after substitution (Python's cond)
	re     *regexp.Regexp
	groups []group
	expr   node
}

// Parse parses one filter as configured.
func Parse(raw string, p Params) (*Filter, error) {
	text := strings.ReplaceAll(raw, "${shard_id}", strconv.Itoa(p.ShardID))
	text = strings.ReplaceAll(text, "${shard_num}", strconv.Itoa(p.ShardNum))
	pattern, cond, ok := strings.Cut(text, ";")
	if !ok {
		return nil, errkind.Wrap(errkind.Value, &Error{Filter: raw, Msg: "want pattern;condition (no ';' found)"})
	}
	f := &Filter{raw: raw, match: agentconf.NormalizeRegex(pattern), cond: cond}
	patErr := func(msg string) error {
		return errkind.Wrap(errkind.Value, &Error{Filter: raw, Part: "pattern", Text: f.match, Msg: msg})
	}
	// Compiled alone first: wrapping an unbalanced pattern could make it valid with another meaning.
	if _, err := regexp.Compile(f.match); err != nil {
		return nil, patErr(err.Error())
	}
	re, err := regexp.Compile(`\A(?:` + f.match + `)`)
	if err != nil {
		return nil, patErr(err.Error())
	}
	f.re = re
	vars := map[string]int{}
	var names []string
	for i, name := range re.SubexpNames() {
		if name == "" {
			continue
		}
		if !isIdentifier(name) {
			return nil, patErr(fmt.Sprintf("group name %q is not an identifier", name))
		}
		if _, dup := vars[name]; dup {
			return nil, patErr(fmt.Sprintf("group name %q is used twice", name))
		}
		vars[name] = len(f.groups)
		names = append(names, name)
		f.groups = append(f.groups, group{name: name, sub: i})
	}
	expr, xerr := compile(cond, vars, names)
	if xerr != nil {
		return nil, errkind.Wrap(errkind.Value, &Error{Filter: raw, Part: "condition", Text: cond, Column: xerr.pos + 1, Msg: xerr.msg})
	}
	f.expr = expr
	return f, nil
}

// String is "pattern;condition" with the pattern normalized, as the reference lists the filters in
// its service info's debug_info.
func (f *Filter) String() string { return f.match + ";" + f.cond }

// Raw is the filter as configured.
func (f *Filter) Raw() string { return f.raw }

// Pattern is the normalized pattern.
func (f *Filter) Pattern() string { return f.match }

// Condition is the condition text after substitution.
func (f *Filter) Condition() string { return f.cond }

// maxInlineGroups is how many group values Eval keeps on the stack.
const maxInlineGroups = 8

// Eval reports whether the pattern matches subGraph and, if it does, whether the condition holds.
func (f *Filter) Eval(subGraph string) (matched, accepted bool, err error) {
	loc := f.re.FindStringSubmatchIndex(subGraph)
	if loc == nil {
		return false, false, nil
	}
	var inline [maxInlineGroups]int64
	vars := inline[:0]
	if len(f.groups) > maxInlineGroups {
		vars = make([]int64, 0, len(f.groups))
	}
	// Every named group is converted, used or not, as the reference's groupdict comprehension does.
	for _, g := range f.groups {
		start, end := loc[2*g.sub], loc[2*g.sub+1]
		if start < 0 {
			return true, false, errkind.Wrap(errkind.Type, &Error{Filter: f.raw, SubGraph: subGraph,
				Msg: fmt.Sprintf("group '%s' did not take part in the match, so it has no integer value", g.name)})
		}
		n, err := pyint.Parse(subGraph[start:end])
		if err != nil {
			why := "not an integer"
			if errors.Is(err, pyint.ErrRange) {
				why = "integer out of the 64-bit range"
			}
			return true, false, errkind.Wrap(errkind.Value, &Error{Filter: f.raw, SubGraph: subGraph,
				Msg: fmt.Sprintf("group '%s' = %q: %s", g.name, subGraph[start:end], why)})
		}
		vars = append(vars, n)
	}
	v, xerr := f.expr.eval(vars)
	if xerr != nil {
		return true, false, errkind.Wrap(errkind.Value, &Error{Filter: f.raw, SubGraph: subGraph,
			Part: "condition", Text: f.cond, Column: xerr.pos + 1, Msg: xerr.msg})
	}
	return true, v.truthy(), nil
}

// Set is the ordered list of a host's layout filters.
type Set []*Filter

// ParseAll parses each filter in order; the first bad one is the error.
func ParseAll(raws []string, p Params) (Set, error) {
	out := make(Set, 0, len(raws))
	for _, raw := range raws {
		f, err := Parse(raw, p)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// FromConfig parses the config's layout_filters with ParamsFromConfig's values.
func FromConfig(c *agentconf.AgentConfig) (Set, error) {
	p, err := ParamsFromConfig(c)
	if err != nil {
		return nil, err
	}
	return ParseAll(c.LayoutFilters, p)
}

// Accept reports whether subGraph is to be loaded, and the filter that accepted it (nil when the
// set is empty). Filters are tried in order: the first whose pattern matches and whose condition
// holds accepts; a matching filter with a false condition passes to the next. An evaluation error
// stops the search (the reference's eval raises out of its layout callback).
func (s Set) Accept(subGraph string) (bool, *Filter, error) {
	if len(s) == 0 {
		return true, nil, nil
	}
	for _, f := range s {
		matched, ok, err := f.Eval(subGraph)
		if err != nil {
			return false, nil, err
		}
		if matched && ok {
			return true, f, nil
		}
	}
	return false, nil, nil
}

// Strings lists the filters as String does (the reference's debug_info "layout_filters").
func (s Set) Strings() []string {
	out := make([]string, len(s))
	for i, f := range s {
		out[i] = f.String()
	}
	return out
}
