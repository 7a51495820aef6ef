package filter

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// testVars are the names the expression tests can use.
var testVars = map[string]int{"i": 0, "j": 1}

func evalString(src string, i, j int64) (value, *exprError, bool) {
	n, err := compile(src, testVars, []string{"i", "j"})
	if err != nil {
		return value{}, err, false
	}
	v, err := n.eval([]int64{i, j})
	return v, err, true
}

// pythonCase is one line of testdata/python_eval.json (see gen_python_eval.py).
type pythonCase struct {
	Cond  string           `json:"cond"`
	Vars  map[string]int64 `json:"vars"`
	Bool  *bool            `json:"bool"`
	Int   *int64           `json:"int"`
	Error string           `json:"error"`
}

// TestPythonEval compares the evaluator with Python's eval on the recorded conditions: the same
// value (bools stay bools, ints stay ints), and an error wherever Python raised: a compile error
// for SyntaxError / NameError / values that are not ints, an evaluation error for
// ZeroDivisionError.
func TestPythonEval(t *testing.T) {
	data, err := os.ReadFile("testdata/python_eval.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []pythonCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 1000 {
		t.Fatalf("only %d cases in python_eval.json", len(cases))
	}
	kinds := map[string]int{}
	for _, c := range cases {
		v, xerr, compiled := evalString(c.Cond, c.Vars["i"], c.Vars["j"])
		switch {
		case c.Error == "ZeroDivisionError":
			kinds["zerodiv"]++
			if xerr == nil || !compiled || !strings.Contains(xerr.msg, "by zero") {
				t.Errorf("%q %v: Python raised ZeroDivisionError; Go: value %+v, compiled %v, err %v", c.Cond, c.Vars, v, compiled, xerr)
			}
		case c.Error != "":
			kinds["rejected"]++
			if xerr == nil || compiled {
				t.Errorf("%q %v: Python raised %s; Go: value %+v, compiled %v, err %v (want a compile error)", c.Cond, c.Vars, c.Error, v, compiled, xerr)
			}
		case xerr != nil:
			t.Errorf("%q %v: Go error %q at %d; Python gave %v%v", c.Cond, c.Vars, xerr.msg, xerr.pos, deref(c.Bool), derefInt(c.Int))
		case c.Bool != nil:
			kinds["bool"]++
			if !v.b || v.truthy() != *c.Bool {
				t.Errorf("%q %v: got %+v, want bool %v", c.Cond, c.Vars, v, *c.Bool)
			}
		case c.Int != nil:
			kinds["int"]++
			if v.b || v.n != *c.Int {
				t.Errorf("%q %v: got %+v, want int %d", c.Cond, c.Vars, v, *c.Int)
			}
		default:
			t.Fatalf("case %q has no result", c.Cond)
		}
	}
	// The table must exercise every outcome, or this test checks less than it claims.
	for _, k := range []string{"zerodiv", "rejected", "bool", "int"} {
		if kinds[k] == 0 {
			t.Errorf("no %s case in python_eval.json", k)
		}
	}
}

func deref(b *bool) any {
	if b == nil {
		return ""
	}
	return *b
}

func derefInt(n *int64) any {
	if n == nil {
		return ""
	}
	return *n
}

// TestRejected covers what the language rejects, including Python that eval would run: the error
// names what is wrong and where (0-based offset in the condition).
func TestRejected(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("(", n) + "1" + strings.Repeat(")", n) }
	cases := []struct {
		src  string
		pos  int
		want string
	}{
		// Python runs these; the filter language does not have them.
		{"i.real", 1, "attribute access"},
		{"abs(i)", 3, "calls are not supported"},
		{"__import__('os').system('rm -rf /')", 10, "calls are not supported"},
		{"(i)(j)", 3, "calls are not supported"},
		{"True()", 4, "calls are not supported"},
		{"i ** 2", 2, `operator "**" is not supported`},
		{"2 ** 2 ** 2 ** 2 ** 2", 2, `operator "**"`},
		{"~i", 0, `unexpected character "~"`},
		{"i & 1", 2, `unexpected character "&"`},
		{"i | 1", 2, `unexpected character "|"`},
		{"i ^ 1", 2, `unexpected character "^"`},
		{"i << 1", 2, `operator "<<"`},
		{"i >> 1", 2, `operator ">>"`},
		{"i / 2", 2, "true division"},
		{"1 if i else 0", 2, "'if' is not supported"},
		{"lambda: 1", 0, "'lambda' is not supported"},
		{"i is j", 2, "'is' comparisons"},
		{"i in j", 2, "'in' comparisons"},
		{"i not in j", 2, "'not in' comparisons"},
		{"'a' == 'a'", 0, `unexpected character "'"`},
		{`"a"`, 0, `unexpected character "\""`},
		{"[i]", 0, `unexpected character "["`},
		{"{i}", 0, `unexpected character "{"`},
		{"i, j", 1, `unexpected character ","`},
		{"None", 0, "'None' is not supported"},
		{"os", 0, "name 'os' is not defined (the pattern's groups are i, j)"},
		{"__builtins__", 0, "name '__builtins__' is not defined"},
		{"i = 1", 2, `unexpected character "="`},
		{"(i := 1)", 3, `operator ":="`},
		{"1.5", 0, "float literals"},
		{"1e3", 0, `invalid integer literal "1e3"`},
		{"1j", 0, `invalid integer literal "1j"`},
		{"01", 0, "leading zeros"},
		{"1__0", 0, "invalid integer literal"},
		{"1_", 0, "invalid integer literal"},
		{"0x", 0, "invalid integer literal"},
		{"0b12", 0, "invalid integer literal"},
		{"i é", 2, "non-ASCII"},
		{"i\n== 1", 1, "line breaks"},
		// Numbers beyond 64 bits.
		{"99999999999999999999", 0, "out of range"},
		{"i == 0x1_0000_0000_0000_0000", 5, "out of range"},
		// Structure.
		{"", 0, "empty condition"},
		{"   ", 3, "empty condition"},
		{"# just a comment", 16, "empty condition"},
		{"i ==", 4, "unexpected end of condition"},
		{"== i", 0, `unexpected "=="`},
		{"i and", 5, "unexpected end"},
		{"and i", 0, `unexpected "and"`},
		{"not", 3, "unexpected end"},
		{"1 2", 2, `unexpected "2"`},
		{"(i", 0, "'(' is never closed"},
		{"(i j)", 3, `unexpected "j"`},
		{"i)", 1, `unexpected ")"`},
		{"$i", 0, "'$' must start a ${name} reference"},
		{"${}", 0, "${}: not a name"},
		{"${a b}", 0, "not a name"},
		{"${k}", 0, "name 'k' is not defined"},
		{deep(maxDepth + 1), maxDepth, "nested deeper than"},
		{strings.Repeat("not ", maxDepth+1) + "1", 4 * maxDepth, "nested deeper than"},
		{strings.Repeat("-", maxDepth+1) + "1", maxDepth, "nested deeper than"},
		{strings.Repeat("(", maxLen), maxDepth, "nested deeper than"},
		{strings.Repeat("1", maxLen+1), 0, "condition longer than 65536 bytes"},
		{"0a", 0, `invalid integer literal "0a"`},
	}
	for _, c := range cases {
		n, err := compile(c.src, testVars, []string{"i", "j"})
		if err == nil {
			t.Errorf("%q: compiled (%T), want an error containing %q", c.src, n, c.want)
			continue
		}
		if !strings.Contains(err.msg, c.want) || err.pos != c.pos {
			t.Errorf("%q: error %q at %d, want %q at %d", c.src, err.msg, err.pos, c.want, c.pos)
		}
	}
}

// TestEvalErrors covers failures at evaluation: division by zero and 64-bit overflow, each naming
// the operator's offset, and Python's short-circuits that skip them.
func TestEvalErrors(t *testing.T) {
	cases := []struct {
		src     string
		i, j    int64
		pos     int    // -1: no error
		want    string // the error, or the value's %+v
		wantVal value
	}{
		{src: "1 // 0", pos: 2, want: "integer division or modulo by zero"},
		{src: "i % j", i: 5, pos: 2, want: "by zero"},
		{src: "i % (j - j)", i: 5, j: 3, pos: 2, want: "by zero"},
		{src: "9223372036854775807 + 1", pos: 20, want: "integer overflow in 9223372036854775807 + 1"},
		{src: "-9223372036854775807 - 1 - 1", pos: 25, want: "integer overflow"},
		{src: "(-9223372036854775807 - 1) // -1", pos: 27, want: "integer overflow"},
		{src: "-(-9223372036854775807 - 1)", pos: 0, want: "integer overflow"},
		{src: "(-9223372036854775807 - 1) * -1", pos: 27, want: "integer overflow"},
		{src: "-1 * (-9223372036854775807 - 1)", pos: 3, want: "integer overflow"},
		{src: "3037000500 * 3037000500", pos: 11, want: "integer overflow"},
		{src: "i * j", i: 1 << 62, j: 4, pos: 2, want: "integer overflow"},
		{src: "i - j", i: -(1 << 62), j: 1<<62 + 1, pos: 2, want: "integer overflow"},
		// No error: the values fit, or the failing operand is never evaluated.
		{src: "(-9223372036854775807 - 1) % -1", pos: -1, wantVal: value{n: 0}},
		{src: "9223372036854775807 + -9223372036854775807", pos: -1, wantVal: value{n: 0}},
		{src: "3037000499 * 3037000499", pos: -1, wantVal: value{n: 9223372030926249001}},
		{src: "0 and 1 // 0", pos: -1, wantVal: value{n: 0}},
		{src: "False and 1 // 0", pos: -1, wantVal: boolean(false)},
		{src: "1 or 1 // 0", pos: -1, wantVal: value{n: 1}},
		{src: "1 > 2 < 1 // 0", pos: -1, wantVal: boolean(false)},
		{src: "i < j < i // 0", i: 1, j: 0, pos: -1, wantVal: boolean(false)},
		{src: "i < j < i // 0", i: 0, j: 1, pos: 10, want: "by zero"},
	}
	for _, c := range cases {
		v, err, compiled := evalString(c.src, c.i, c.j)
		if !compiled {
			t.Errorf("%q: compile error %v", c.src, err)
			continue
		}
		if c.pos < 0 {
			if err != nil || v != c.wantVal {
				t.Errorf("%q (i=%d j=%d): got %+v, %v; want %+v", c.src, c.i, c.j, v, err, c.wantVal)
			}
			continue
		}
		if err == nil || !strings.Contains(err.msg, c.want) || err.pos != c.pos {
			t.Errorf("%q (i=%d j=%d): got %+v, %v; want error %q at %d", c.src, c.i, c.j, v, err, c.want, c.pos)
		}
	}
}

// TestAccepted covers the forms the language has that the Python table does not reach.
func TestAccepted(t *testing.T) {
	cases := []struct {
		src  string
		i, j int64
		want value
	}{
		{"${i} == 2", 2, 0, boolean(true)},
		{"${i} % ${j}", 7, 4, value{n: 3}},
		{"0x_ff == 255", 0, 0, boolean(true)},
		{"0O17 + 0B1", 0, 0, value{n: 16}},
		{"9223372036854775807", 0, 0, value{n: 9223372036854775807}},
		{"i == 1 # trailing comment with 'quotes' and (", 1, 0, boolean(true)},
		{"\f i \t== 1", 1, 0, boolean(true)},
		{strings.Repeat("(", maxDepth) + "1" + strings.Repeat(")", maxDepth), 0, 0, value{n: 1}},
		{strings.Repeat("not ", maxDepth) + "0", 0, 0, boolean(false)},
		{strings.Repeat("i + ", 10000) + "1", 1, 0, value{n: 10001}},
		{strings.Repeat("1 == ", 5000) + "1", 0, 0, boolean(true)},
	}
	for _, c := range cases {
		v, err, _ := evalString(c.src, c.i, c.j)
		if err != nil || v != c.want {
			t.Errorf("%.60q (i=%d j=%d): got %+v, %v; want %+v", c.src, c.i, c.j, v, err, c.want)
		}
	}
}

// FuzzCompileEval: no input makes the evaluator panic, error offsets stay inside the source, and
// evaluation is deterministic.
func FuzzCompileEval(f *testing.F) {
	data, err := os.ReadFile("testdata/python_eval.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases []pythonCase
	if err := json.Unmarshal(data, &cases); err != nil {
		f.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if !seen[c.Cond] {
			seen[c.Cond] = true
			f.Add(c.Cond, int64(3), int64(-2))
		}
	}
	f.Add("${i} == ${j} % 4", int64(1), int64(5))
	f.Add("(-9223372036854775807 - 1) // i", int64(-1), int64(0))
	f.Fuzz(func(t *testing.T, src string, i, j int64) {
		n, cerr := compile(src, testVars, []string{"i", "j"})
		if cerr != nil {
			if cerr.pos < 0 || cerr.pos > len(src) || cerr.msg == "" {
				t.Fatalf("%q: compile error %q at %d (len %d)", src, cerr.msg, cerr.pos, len(src))
			}
			return
		}
		v1, e1 := n.eval([]int64{i, j})
		v2, e2 := n.eval([]int64{i, j})
		if v1 != v2 || (e1 == nil) != (e2 == nil) {
			t.Fatalf("%q: not deterministic: %+v %v / %+v %v", src, v1, e1, v2, e2)
		}
		if e1 != nil && (e1.pos < 0 || e1.pos >= len(src) || e1.msg == "") {
			t.Fatalf("%q: eval error %q at %d (len %d)", src, e1.msg, e1.pos, len(src))
		}
		if v1.b && v1.n != 0 && v1.n != 1 {
			t.Fatalf("%q: bool with value %d", src, v1.n)
		}
	})
}
