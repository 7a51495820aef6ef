package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The condition language is the subset of Python expressions that layout filter conditions use,
// with Python's semantics:
//
//	or_test    := and_test ('or' and_test)*
//	and_test   := not_test ('and' not_test)*
//	not_test   := 'not' not_test | comparison
//	comparison := arith (('==' | '!=' | '<' | '<=' | '>' | '>=') arith)*   (chained: a < b < c)
//	arith      := term (('+' | '-') term)*
//	term       := factor (('*' | '//' | '%') factor)*
//	factor     := ('+' | '-') factor | atom
//	atom       := INT | 'True' | 'False' | NAME | '${' NAME '}' | '(' or_test ')'
//
// Values are integers (int64; the reference's are unbounded, so an overflow is an error here) and
// booleans, which count as 0 and 1 in arithmetic. 'and' / 'or' short-circuit and yield one of
// their operands, as Python's do. A '#' starts a comment that runs to the end. INT is a Python
// integer literal (decimal, 0x / 0o / 0b, '_' separators). ${name} is the group name, as
// cmd/agent/example.conf writes it; Python has no '$', so the reference rejects that form.

// maxLen bounds a condition's length, and with it the parser's memory.
const maxLen = 64 << 10

// maxDepth bounds nesting (parentheses, unary operators, 'not'), so no input can exhaust the
// stack; Python's own parser stops at a similar depth.
const maxDepth = 100

// value is an evaluated operand: an int, or a bool (b true) whose n is 0 or 1.
type value struct {
	n int64
	b bool
}

func (v value) truthy() bool { return v.n != 0 }

func boolean(t bool) value {
	if t {
		return value{n: 1, b: true}
	}
	return value{b: true}
}

// exprError is a syntax or evaluation error at byte offset pos of the condition.
type exprError struct {
	pos int
	msg string
}

func errAt(pos int, format string, args ...any) *exprError {
	return &exprError{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// token kinds.
const (
	tokEOF = iota
	tokErr // a lexical error (text is the message); always the last token
	tokInt
	tokName
	tokOp
)

type token struct {
	kind int
	text string // the operator, or the name (without ${ })
	n    int64  // tokInt's value
	pos  int
}

// pythonKeywords are Python keywords the condition language does not support: using one is an
// error that says so, rather than "not defined".
var pythonKeywords = map[string]bool{
	"None": true, "as": true, "assert": true, "async": true, "await": true, "break": true, "class": true,
	"continue": true, "def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true, "import": true, "in": true,
	"is": true, "lambda": true, "nonlocal": true, "pass": true, "raise": true, "return": true,
	"try": true, "while": true, "with": true, "yield": true,
}

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || '0' <= c && c <= '9' }

// isIdentifier reports whether s is an ASCII Python identifier.
func isIdentifier(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// tokenize splits src into tokens, ending with tokEOF, or with tokErr at the first thing outside
// the language: the parser reports it when it gets there, so errors come in source order.
func tokenize(src string) []token {
	toks, err := lex(src)
	if err != nil {
		return append(toks, token{kind: tokErr, text: err.msg, pos: err.pos})
	}
	return append(toks, token{kind: tokEOF, pos: len(src)})
}

func lex(src string) ([]token, *exprError) {
	var toks []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\f':
			i++
			continue
		case c == '#':
			i = len(src)
			continue
		case c == '\n' || c == '\r':
			return toks, errAt(i, "line breaks are not supported")
		case '0' <= c && c <= '9':
			start := i
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			if i < len(src) && src[i] == '.' {
				return toks, errAt(start, "float literals are not supported")
			}
			n, err := parseIntLiteral(src[start:i])
			if err != nil {
				return toks, errAt(start, "%s", err.msg)
			}
			toks = append(toks, token{kind: tokInt, text: src[start:i], n: n, pos: start})
			continue
		case isIdentStart(c):
			start := i
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tokName, text: src[start:i], pos: start})
			continue
		case c == '$':
			// ${name}: a group, written the way ${shard_id} is (an extension: Python has no '$').
			end := strings.IndexByte(src[i:], '}')
			if !strings.HasPrefix(src[i:], "${") || end < 0 {
				return toks, errAt(i, "'$' must start a ${name} reference")
			}
			name := src[i+2 : i+end]
			if !isIdentifier(name) {
				return toks, errAt(i, "${%s}: not a name", name)
			}
			toks = append(toks, token{kind: tokName, text: name, pos: i})
			i += end + 1
			continue
		}
		start := i
		op := ""
		for _, o := range []string{"//", "==", "!=", "<=", ">=", "**", "<<", ">>", "<>", ":=", "+", "-", "*", "%", "<", ">", "(", ")", "/", "."} {
			if strings.HasPrefix(src[i:], o) {
				op = o
				break
			}
		}
		switch op {
		case "":
			if c >= 0x80 {
				return toks, errAt(start, "unexpected non-ASCII character")
			}
			return toks, errAt(start, "unexpected character %q", string(c))
		case "/":
			return toks, errAt(start, "true division '/' is not supported (use '//')")
		case ".":
			return toks, errAt(start, "attribute access '.' is not supported")
		case "**", "<<", ">>", "<>", ":=":
			return toks, errAt(start, "operator %q is not supported", op)
		}
		i += len(op)
		toks = append(toks, token{kind: tokOp, text: op, pos: start})
	}
	return toks, nil
}

// parseIntLiteral reads a Python integer literal: decimal (no leading zeros unless all zeros),
// 0x / 0o / 0b, '_' between digits.
func parseIntLiteral(lit string) (int64, *exprError) {
	body, base := lit, 10
	if len(lit) > 1 && lit[0] == '0' {
		switch lit[1] {
		case 'x', 'X':
			body, base = lit[2:], 16
		case 'o', 'O':
			body, base = lit[2:], 8
		case 'b', 'B':
			body, base = lit[2:], 2
		default:
			if rest := strings.Trim(lit, "0_"); rest != "" {
				if strings.Trim(rest, "0123456789_") == "" {
					return 0, &exprError{msg: fmt.Sprintf("invalid integer literal %q (leading zeros are not allowed)", lit)}
				}
				return 0, &exprError{msg: fmt.Sprintf("invalid integer literal %q", lit)}
			}
		}
		// Python allows one '_' right after the prefix: 0x_ff.
		if base != 10 {
			body = strings.TrimPrefix(body, "_")
		}
	}
	if body == "" || body[0] == '_' || body[len(body)-1] == '_' || strings.Contains(body, "__") {
		return 0, &exprError{msg: fmt.Sprintf("invalid integer literal %q", lit)}
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(body, "_", ""), base, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, &exprError{msg: fmt.Sprintf("integer literal %s is out of range (64-bit integers)", lit)}
		}
		return 0, &exprError{msg: fmt.Sprintf("invalid integer literal %q", lit)}
	}
	return n, nil
}

// node is a compiled condition; eval reads group values from vars.
type node interface {
	eval(vars []int64) (value, *exprError)
}

type (
	constNode struct{ v value }
	varNode   struct{ idx int }
	unaryNode struct {
		op  string // "-", "+", "not"
		x   node
		pos int
	}
	binaryNode struct {
		op   string // "+", "-", "*", "//", "%"
		x, y node
		pos  int
	}
	// compareNode is a chain x0 op0 x1 op1 x2 ...: each operand is evaluated at most once, and
	// evaluation stops at the first false comparison.
	compareNode struct {
		ops  []string
		args []node
	}
	// logicNode is 'and' / 'or' over two or more operands, yielding the deciding operand.
	logicNode struct {
		or   bool
		args []node
	}
)

func (n constNode) eval([]int64) (value, *exprError) { return n.v, nil }

func (n varNode) eval(vars []int64) (value, *exprError) { return value{n: vars[n.idx]}, nil }

func (n unaryNode) eval(vars []int64) (value, *exprError) {
	x, err := n.x.eval(vars)
	if err != nil {
		return value{}, err
	}
	switch n.op {
	case "not":
		return boolean(!x.truthy()), nil
	case "-":
		if x.n == math.MinInt64 {
			return value{}, errAt(n.pos, "integer overflow in -%d", x.n)
		}
		return value{n: -x.n}, nil
	}
	return value{n: x.n}, nil
}

func (n binaryNode) eval(vars []int64) (value, *exprError) {
	x, err := n.x.eval(vars)
	if err != nil {
		return value{}, err
	}
	y, err := n.y.eval(vars)
	if err != nil {
		return value{}, err
	}
	a, b := x.n, y.n
	overflow := func() (value, *exprError) {
		return value{}, errAt(n.pos, "integer overflow in %d %s %d", a, n.op, b)
	}
	switch n.op {
	case "+":
		s := a + b
		if (s > a) != (b > 0) {
			return overflow()
		}
		return value{n: s}, nil
	case "-":
		d := a - b
		if (d < a) != (b > 0) {
			return overflow()
		}
		return value{n: d}, nil
	case "*":
		if a == 0 || b == 0 {
			return value{}, nil
		}
		p := a * b
		if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || p/b != a {
			return overflow()
		}
		return value{n: p}, nil
	case "//", "%":
		if b == 0 {
			return value{}, errAt(n.pos, "integer division or modulo by zero")
		}
		if a == math.MinInt64 && b == -1 {
			if n.op == "%" {
				return value{}, nil
			}
			return overflow()
		}
		q, r := a/b, a%b
		// Python floors: the remainder takes the divisor's sign.
		if r != 0 && (r < 0) != (b < 0) {
			q, r = q-1, r+b
		}
		if n.op == "//" {
			return value{n: q}, nil
		}
		return value{n: r}, nil
	}
	return value{}, errAt(n.pos, "unknown operator %q", n.op)
}

func compare(op string, a, b int64) bool {
	switch op {
	case "==":
		return a == b
	case "!=":
		return a != b
	case "<":
		return a < b
	case "<=":
		return a <= b
	case ">":
		return a > b
	}
	return a >= b
}

func (n compareNode) eval(vars []int64) (value, *exprError) {
	left, err := n.args[0].eval(vars)
	if err != nil {
		return value{}, err
	}
	for i, op := range n.ops {
		right, err := n.args[i+1].eval(vars)
		if err != nil {
			return value{}, err
		}
		if !compare(op, left.n, right.n) {
			return boolean(false), nil
		}
		left = right
	}
	return boolean(true), nil
}

func (n logicNode) eval(vars []int64) (value, *exprError) {
	var v value
	for _, a := range n.args {
		var err *exprError
		if v, err = a.eval(vars); err != nil {
			return value{}, err
		}
		if v.truthy() == n.or {
			return v, nil
		}
	}
	return v, nil
}

// parser is a recursive-descent parser over tokens; names resolve to indices into the variable
// slice through vars.
type parser struct {
	toks  []token
	pos   int
	depth int
	vars  map[string]int
	// varNames lists the defined names, for the "not defined" message.
	varNames []string
}

// compile parses src into a node whose names are looked up in vars (name -> index).
func compile(src string, vars map[string]int, varNames []string) (node, *exprError) {
	if len(src) > maxLen {
		return nil, errAt(0, "condition longer than %d bytes", maxLen)
	}
	toks := tokenize(src)
	if toks[0].kind == tokEOF {
		return nil, errAt(toks[0].pos, "empty condition")
	}
	p := &parser{toks: toks, vars: vars, varNames: varNames}
	n, err := p.orTest()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.unexpected(t)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF && t.kind != tokErr {
		p.pos++
	}
	return t
}

func (p *parser) isOp(t token, ops ...string) bool {
	if t.kind != tokOp {
		return false
	}
	for _, o := range ops {
		if t.text == o {
			return true
		}
	}
	return false
}

func (p *parser) isKeyword(t token, kw string) bool { return t.kind == tokName && t.text == kw }

func (p *parser) unexpected(t token) *exprError {
	switch {
	case t.kind == tokErr:
		return errAt(t.pos, "%s", t.text)
	case t.kind == tokEOF:
		return errAt(t.pos, "unexpected end of condition")
	case t.kind == tokName && pythonKeywords[t.text]:
		return errAt(t.pos, "'%s' is not supported", t.text)
	case p.isOp(t, "("):
		return errAt(t.pos, "calls are not supported")
	}
	return errAt(t.pos, "unexpected %q", t.text)
}

func (p *parser) enter(pos int) *exprError {
	if p.depth++; p.depth > maxDepth {
		return errAt(pos, "condition nested deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) logic(kw string, operand func() (node, *exprError)) (node, *exprError) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	args := []node{first}
	for p.isKeyword(p.peek(), kw) {
		p.next()
		n, err := operand()
		if err != nil {
			return nil, err
		}
		args = append(args, n)
	}
	if len(args) == 1 {
		return first, nil
	}
	return logicNode{or: kw == "or", args: args}, nil
}

func (p *parser) orTest() (node, *exprError) { return p.logic("or", p.andTest) }

func (p *parser) andTest() (node, *exprError) { return p.logic("and", p.notTest) }

func (p *parser) notTest() (node, *exprError) {
	if t := p.peek(); p.isKeyword(t, "not") {
		p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.notTest()
		if err != nil {
			return nil, err
		}
		return unaryNode{op: "not", x: x, pos: t.pos}, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (node, *exprError) {
	first, err := p.arith()
	if err != nil {
		return nil, err
	}
	c := compareNode{args: []node{first}}
	for {
		t := p.peek()
		if p.isKeyword(t, "in") || p.isKeyword(t, "is") {
			return nil, errAt(t.pos, "'%s' comparisons are not supported", t.text)
		}
		if p.isKeyword(t, "not") {
			return nil, errAt(t.pos, "'not in' comparisons are not supported")
		}
		if !p.isOp(t, "==", "!=", "<", "<=", ">", ">=") {
			break
		}
		p.next()
		y, err := p.arith()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, t.text)
		c.args = append(c.args, y)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (p *parser) binary(ops []string, operand func() (node, *exprError)) (node, *exprError) {
	x, err := operand()
	if err != nil {
		return nil, err
	}
	for p.isOp(p.peek(), ops...) {
		t := p.next()
		y, err := operand()
		if err != nil {
			return nil, err
		}
		x = binaryNode{op: t.text, x: x, y: y, pos: t.pos}
	}
	return x, nil
}

func (p *parser) arith() (node, *exprError) {
	return p.binary([]string{"+", "-"}, p.term)
}

func (p *parser) term() (node, *exprError) {
	return p.binary([]string{"*", "//", "%"}, p.factor)
}

func (p *parser) factor() (node, *exprError) {
	t := p.peek()
	if !p.isOp(t, "+", "-") {
		return p.atom()
	}
	p.next()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.factor()
	if err != nil {
		return nil, err
	}
	return unaryNode{op: t.text, x: x, pos: t.pos}, nil
}

func (p *parser) atom() (node, *exprError) {
	t := p.next()
	var n node
	switch {
	case t.kind == tokInt:
		n = constNode{value{n: t.n}}
	case p.isKeyword(t, "True"):
		n = constNode{boolean(true)}
	case p.isKeyword(t, "False"):
		n = constNode{boolean(false)}
	case t.kind == tokName && (t.text == "and" || t.text == "or" || t.text == "not" || pythonKeywords[t.text]):
		return nil, p.unexpected(t)
	case t.kind == tokName:
		if f := p.peek(); p.isOp(f, "(") {
			return nil, errAt(f.pos, "calls are not supported")
		}
		idx, ok := p.vars[t.text]
		if !ok {
			return nil, errAt(t.pos, "name '%s' is not defined (%s)", t.text, p.namesHint())
		}
		n = varNode{idx: idx}
	case p.isOp(t, "("):
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.orTest()
		if err != nil {
			return nil, err
		}
		if c := p.next(); !p.isOp(c, ")") {
			if c.kind == tokEOF {
				return nil, errAt(t.pos, "'(' is never closed")
			}
			return nil, p.unexpected(c)
		}
		n = x
	default:
		return nil, p.unexpected(t)
	}
	// What may follow an atom in Python but not here: calls, subscripts, attributes.
	if f := p.peek(); p.isOp(f, "(") {
		return nil, errAt(f.pos, "calls are not supported")
	}
	return n, nil
}

func (p *parser) namesHint() string {
	if len(p.varNames) == 0 {
		return "the pattern has no named groups"
	}
	return "the pattern's groups are " + strings.Join(p.varNames, ", ")
}
