package agentconf

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Number is the value of an arithmetic expression: an exact integer or a float, as in Python.
type Number struct {
	IsFloat bool
	Int     *big.Int
	Float   float64
}

func intNum(i *big.Int) Number  { return Number{Int: i} }
func floatNum(f float64) Number { return Number{IsFloat: true, Float: f} }
func (n Number) float() float64 {
	if n.IsFloat {
		return n.Float
	}
	f, _ := new(big.Float).SetInt(n.Int).Float64()
	return f
}

// maxExponent bounds integer powers so a config value cannot make the parser allocate without limit.
const maxExponent = 4096

// EvalArithmetic evaluates the numeric expressions the reference reads with Python's eval: integer
// and float literals (0x/0o/0b prefixes and _ separators too), unary + and -, + - * / // % ** and
// parentheses, with Python's semantics (true division, floor division and modulo, ** binding
// tighter than a unary minus on its left). Anything else (names, calls, strings) is an error.
func EvalArithmetic(s string) (Number, error) {
	p := &exprParser{src: s}
	if err := p.tokenize(); err != nil {
		return Number{}, err
	}
	if len(p.toks) == 0 {
		return Number{}, fmt.Errorf("empty expression")
	}
	n, err := p.expr()
	if err != nil {
		return Number{}, err
	}
	if p.pos < len(p.toks) {
		return Number{}, fmt.Errorf("unexpected %q at offset %d", p.toks[p.pos].text, p.toks[p.pos].off)
	}
	return n, nil
}

// ToInt converts like Python's int(): floats truncate toward zero; the result must fit in an int.
func (n Number) ToInt() (int, error) {
	if n.IsFloat {
		if math.IsNaN(n.Float) || math.IsInf(n.Float, 0) {
			return 0, fmt.Errorf("cannot convert %v to an integer", n.Float)
		}
		t := math.Trunc(n.Float)
		if t > math.MaxInt64 || t < math.MinInt64 {
			return 0, fmt.Errorf("%v is out of range for an integer", n.Float)
		}
		return int(t), nil
	}
	if !n.Int.IsInt64() {
		return 0, fmt.Errorf("%s is out of range for a 64-bit integer", n.Int)
	}
	return int(n.Int.Int64()), nil
}

// ToFloat converts like Python's float().
func (n Number) ToFloat() float64 { return n.float() }

type token struct {
	text string
	off  int
	num  *Number
}

type exprParser struct {
	src  string
	toks []token
	pos  int
}

func (p *exprParser) tokenize() error {
	s := p.src
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '*' || c == '/':
			if i+1 < len(s) && s[i+1] == c {
				p.toks = append(p.toks, token{text: s[i : i+2], off: i})
				i += 2
			} else {
				p.toks = append(p.toks, token{text: s[i : i+1], off: i})
				i++
			}
		case strings.ContainsRune("+-%()", rune(c)):
			p.toks = append(p.toks, token{text: s[i : i+1], off: i})
			i++
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(s) && (isAlnum(s[j]) || s[j] == '.' || s[j] == '_' ||
				((s[j] == '+' || s[j] == '-') && j > i && (s[j-1] == 'e' || s[j-1] == 'E') && !isHexLit(s[i:j]))) {
				j++
			}
			n, err := parseNumber(s[i:j])
			if err != nil {
				return err
			}
			p.toks = append(p.toks, token{text: s[i:j], off: i, num: &n})
			i = j
		default:
			j := i + 1
			for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
				j++
			}
			return fmt.Errorf("%q at offset %d is not allowed: only numbers, + - * / // %% ** and parentheses", s[i:j], i)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isHexLit(s string) bool { return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') }

func parseNumber(lit string) (Number, error) {
	bad := fmt.Errorf("%q is not a number", lit)
	if strings.HasPrefix(lit, "_") || strings.HasSuffix(lit, "_") || strings.Contains(lit, "__") {
		return Number{}, bad
	}
	clean := strings.ReplaceAll(lit, "_", "")
	low := strings.ToLower(clean)
	if len(low) > 1 && low[0] == '0' && strings.ContainsRune("xob", rune(low[1])) {
		base := map[byte]int{'x': 16, 'o': 8, 'b': 2}[low[1]]
		i, ok := new(big.Int).SetString(low[2:], base)
		if !ok || strings.HasPrefix(low[2:], "-") || strings.HasPrefix(low[2:], "+") {
			return Number{}, bad
		}
		return intNum(i), nil
	}
	if strings.ContainsAny(low, ".e") {
		f, err := strconv.ParseFloat(clean, 64)
		if err != nil && !strings.Contains(err.Error(), "range") {
			return Number{}, bad
		}
		return floatNum(f), nil
	}
	// Python 3 rejects leading zeros in non-zero decimal integers ("010").
	if len(low) > 1 && low[0] == '0' && strings.Trim(low, "0") != "" {
		return Number{}, fmt.Errorf("%q: leading zeros are not allowed in decimal integers", lit)
	}
	// Python 3.11+ refuses decimal literals longer than this (sys.get_int_max_str_digits()); the
	// limit also keeps a multi-megabyte value from costing seconds of conversion.
	if len(low) > maxIntDigits {
		return Number{}, fmt.Errorf("exceeds the limit (%d digits) for integer string conversion: value has %d digits", maxIntDigits, len(low))
	}
	i, ok := new(big.Int).SetString(low, 10)
	if !ok {
		return Number{}, bad
	}
	return intNum(i), nil
}

// maxIntDigits is Python's default int_max_str_digits.
const maxIntDigits = 4300

func (p *exprParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos].text
	}
	return ""
}

func (p *exprParser) expr() (Number, error) {
	l, err := p.term()
	if err != nil {
		return l, err
	}
	for op := p.peek(); op == "+" || op == "-"; op = p.peek() {
		p.pos++
		r, err := p.term()
		if err != nil {
			return r, err
		}
		if l, err = binop(op, l, r); err != nil {
			return l, err
		}
	}
	return l, nil
}

func (p *exprParser) term() (Number, error) {
	l, err := p.factor()
	if err != nil {
		return l, err
	}
	for op := p.peek(); op == "*" || op == "/" || op == "//" || op == "%"; op = p.peek() {
		p.pos++
		r, err := p.factor()
		if err != nil {
			return r, err
		}
		if l, err = binop(op, l, r); err != nil {
			return l, err
		}
	}
	return l, nil
}

func (p *exprParser) factor() (Number, error) {
	if op := p.peek(); op == "+" || op == "-" {
		p.pos++
		n, err := p.factor()
		if err != nil || op == "+" {
			return n, err
		}
		if n.IsFloat {
			return floatNum(-n.Float), nil
		}
		return intNum(new(big.Int).Neg(n.Int)), nil
	}
	return p.power()
}

func (p *exprParser) power() (Number, error) {
	base, err := p.atom()
	if err != nil {
		return base, err
	}
	if p.peek() == "**" {
		p.pos++
		exp, err := p.factor() // right-associative; binds a unary minus on its right
		if err != nil {
			return exp, err
		}
		return binop("**", base, exp)
	}
	return base, nil
}

func (p *exprParser) atom() (Number, error) {
	if p.pos >= len(p.toks) {
		return Number{}, fmt.Errorf("expression ends early")
	}
	t := p.toks[p.pos]
	p.pos++
	if t.num != nil {
		return *t.num, nil
	}
	if t.text == "(" {
		n, err := p.expr()
		if err != nil {
			return n, err
		}
		if p.peek() != ")" {
			return n, fmt.Errorf("missing ) for ( at offset %d", t.off)
		}
		p.pos++
		return n, nil
	}
	return Number{}, fmt.Errorf("unexpected %q at offset %d", t.text, t.off)
}

func binop(op string, l, r Number) (Number, error) {
	if !l.IsFloat && !r.IsFloat && op != "/" {
		return intOp(op, l.Int, r.Int)
	}
	a, b := l.float(), r.float()
	switch op {
	case "+":
		return floatNum(a + b), nil
	case "-":
		return floatNum(a - b), nil
	case "*":
		return floatNum(a * b), nil
	case "/":
		if b == 0 {
			return Number{}, fmt.Errorf("division by zero")
		}
		return floatNum(a / b), nil
	case "//":
		if b == 0 {
			return Number{}, fmt.Errorf("division by zero")
		}
		return floatNum(math.Floor(a / b)), nil
	case "%":
		if b == 0 {
			return Number{}, fmt.Errorf("modulo by zero")
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return floatNum(m), nil
	case "**":
		if a == 0 && b < 0 {
			return Number{}, fmt.Errorf("0 cannot be raised to a negative power")
		}
		if a < 0 && b != math.Trunc(b) {
			return Number{}, fmt.Errorf("negative number raised to a fractional power")
		}
		return floatNum(math.Pow(a, b)), nil
	}
	return Number{}, fmt.Errorf("unknown operator %q", op)
}

func intOp(op string, a, b *big.Int) (Number, error) {
	z := new(big.Int)
	switch op {
	case "+":
		return intNum(z.Add(a, b)), nil
	case "-":
		return intNum(z.Sub(a, b)), nil
	case "*":
		return intNum(z.Mul(a, b)), nil
	case "//", "%":
		if b.Sign() == 0 {
			return Number{}, fmt.Errorf("integer division or modulo by zero")
		}
		q, m := new(big.Int), new(big.Int)
		q.DivMod(a, b, m) // Euclidean: 0 <= m < |b|
		if m.Sign() != 0 && b.Sign() < 0 {
			// Python floors: the remainder takes the divisor's sign.
			q.Sub(q, big.NewInt(1))
			m.Add(m, b)
		}
		if op == "//" {
			return intNum(q), nil
		}
		return intNum(m), nil
	case "**":
		if b.Sign() < 0 {
			return binop("**", floatNum(Number{Int: a}.float()), floatNum(Number{Int: b}.float()))
		}
		if !b.IsInt64() || b.Int64() > maxExponent {
			return Number{}, fmt.Errorf("exponent %s is too large (at most %d)", b, maxExponent)
		}
		return intNum(z.Exp(a, b, nil)), nil
	}
	return Number{}, fmt.Errorf("unknown operator %q", op)
}
