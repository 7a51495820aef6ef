package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Policy is what the specs declare about the cases.
type Policy struct {
	// ExactMessages marks calls (golden `call` values) whose error messages must equal the reference's;
	// other calls compare error kinds only.
	ExactMessages map[string]bool
	// Declared holds intentional differences, by case name.
	Declared map[string]Declaration
	// Rules declare classes of intentional differences; a case declaration takes precedence.
	Rules []Rule
}

// Declaration is an intentional difference from the reference on one case.
type Declaration struct {
	Symbol, Why string
	// ExpectError, when set, is the errkind name the Go call must fail with for the declaration to hold.
	ExpectError string
}

// Status is the verdict on one case.
type Status string

// Verdicts, as printed.
const (
	StatusPass     Status = "PASS"
	StatusFail     Status = "FAIL"
	StatusSkip     Status = "SKIP"
	StatusDeclared Status = "DECLARED"
)

// Result is the verdict on one case.
type Result struct {
	Module, Case, Call, File string
	Status                   Status
	// Detail is the reason printed after the name: a diff, an error, the declaration's why.
	Detail string
	// Diffs are all differences found (Detail shows the first few).
	Diffs []string
	// Note is extra information on a PASS (a declaration that may be stale).
	Note string
	// Rule names the rule that declared the case (DECLARED by a rule only).
	Rule string
}

// Counts tallies verdicts.
type Counts struct {
	Passed, Failed, Skipped, Declared int
}

func (c *Counts) add(s Status) {
	switch s {
	case StatusPass:
		c.Passed++
	case StatusFail:
		c.Failed++
	case StatusSkip:
		c.Skipped++
	case StatusDeclared:
		c.Declared++
	}
}

// Summary is the outcome of a run.
type Summary struct {
	Counts
	// Modules breaks the counts down by golden module (agent_service/utils, ...).
	Modules map[string]Counts
	// SkippedCalls counts the cases of each call that has no adapter.
	SkippedCalls map[string]int
	Results      []Result
}

// ModuleNames returns the modules of the run, sorted.
func (s *Summary) ModuleNames() []string {
	names := make([]string, 0, len(s.Modules))
	for m := range s.Modules {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

// Options tune a run's report.
type Options struct {
	// Verbose adds the file, the call and every difference under each FAIL and DECLARED line.
	Verbose bool
}

// Run replays cases through the registry's adapters, one at a time, writing one line per case and a
// summary to w.
func Run(cases []Case, r *Registry, p Policy, w io.Writer) Summary {
	return RunWithOptions(cases, r, p, w, Options{})
}

// RunWithOptions is Run with report options.
func RunWithOptions(cases []Case, r *Registry, p Policy, w io.Writer, opts Options) Summary {
	s := Summary{Modules: map[string]Counts{}, SkippedCalls: map[string]int{}}
	for i := range cases {
		res := runOne(&cases[i], r, p)
		s.record(res)
		printResult(w, res, opts)
	}
	printSummary(w, &s)
	return s
}

func (s *Summary) record(res Result) {
	s.Results = append(s.Results, res)
	s.add(res.Status)
	m := s.Modules[res.Module]
	m.add(res.Status)
	s.Modules[res.Module] = m
	if res.Status == StatusSkip {
		s.SkippedCalls[res.Call]++
	}
}

func printResult(w io.Writer, res Result, opts Options) {
	line := fmt.Sprintf("%s %s/%s", res.Status, res.Module, res.Case)
	if res.Detail != "" {
		line += ": " + res.Detail
	}
	if res.Note != "" {
		line += " (note: " + res.Note + ")"
	}
	fmt.Fprintln(w, line)
	if !opts.Verbose || (res.Status != StatusFail && res.Status != StatusDeclared) {
		return
	}
	fmt.Fprintf(w, "    file: %s\n    call: %s\n", res.File, res.Call)
	for _, d := range res.Diffs {
		fmt.Fprintf(w, "    %s\n", d)
	}
}

func printSummary(w io.Writer, s *Summary) {
	if len(s.SkippedCalls) > 0 {
		fmt.Fprintln(w, "skipped calls:")
		calls := make([]string, 0, len(s.SkippedCalls))
		for c := range s.SkippedCalls {
			calls = append(calls, c)
		}
		sort.Strings(calls)
		for _, c := range calls {
			fmt.Fprintf(w, "  %4d  %s\n", s.SkippedCalls[c], c)
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped, %d declared\n", s.Passed, s.Failed, s.Skipped, s.Declared)
}

// outcome is what the Go side did for one case.
type outcome struct {
	value []byte // the marshaled result, when err is nil
	err   error
	panic string // non-empty when the adapter (or the result's MarshalJSON) panicked
}

func (o outcome) String() string {
	if o.err != nil {
		return fmt.Sprintf("error of kind %s: %v", errkind.Of(o.err), o.err)
	}
	return "value " + show(mustDecode(o.value))
}

func mustDecode(b []byte) any {
	v, err := decodeGeneric(b)
	if err != nil {
		return string(b)
	}
	return v
}

func runOne(c *Case, r *Registry, p Policy) Result {
	res := Result{Module: c.Module, Case: c.Case, Call: c.Call, File: c.File}
	fn, ok := r.Lookup(c.Call)
	if !ok {
		res.Status, res.Detail = StatusSkip, "call not ported: "+c.Call
		return res
	}
	tmp, err := os.MkdirTemp("", "parity-")
	if err != nil {
		return failed(res, fmt.Sprintf("temp dir: %v", err))
	}
	defer os.RemoveAll(tmp)
	env, err := caseEnv(c.Input)
	if err != nil {
		return failed(res, err.Error())
	}
	restore, err := ApplyEnv(env)
	if err != nil {
		return failed(res, err.Error())
	}
	defer restore()
	out := call(fn, &Ctx{Env: env, tmp: tmp}, Input(c.Input))
	return verdict(res, c, out, tmp, p)
}

func failed(res Result, detail string) Result {
	res.Status, res.Detail = StatusFail, detail
	return res
}

// call runs the adapter and marshals its result, turning a panic into an outcome.
func call(fn Func, ctx *Ctx, in Input) (out outcome) {
	defer func() {
		if v := recover(); v != nil {
			out = outcome{panic: fmt.Sprintf("panic: %v%s", v, panicSite())}
		}
	}()
	v, err := fn(ctx, in)
	if err != nil {
		return outcome{err: err}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return outcome{panic: fmt.Sprintf("cannot marshal the Go result: %v", err)}
	}
	return outcome{value: b}
}

// panicSite names the first frame outside the runtime and this package's call wrapper, where the
// panic happened.
func panicSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf(" (at %s %s:%d)", f.Function, f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// verdict judges the outcome against the reference, then applies the case's declaration.
func verdict(res Result, c *Case, out outcome, tmp string, p Policy) Result {
	var inErr *InputError
	switch {
	case out.panic != "":
		return failed(res, out.panic) // never acceptable, declared or not
	case errors.As(out.err, &inErr):
		return failed(res, "adapter: "+out.err.Error())
	}
	diffs, total, hard := differences(c, out, tmp, p.ExactMessages[c.Call])
	if hard != nil {
		return failed(res, hard.Error())
	}
	decl, declared := p.Declared[c.Case]
	switch {
	case len(diffs) == 0 && declared:
		res.Status = StatusPass
		res.Note = fmt.Sprintf("declared difference of %s not observed; the declaration may be stale", decl.Symbol)
		return res
	case len(diffs) == 0:
		res.Status = StatusPass
		return res
	}
	res.Diffs = diffs
	if total > len(diffs) {
		res.Diffs = append(res.Diffs, fmt.Sprintf("... and %d more", total-len(diffs)))
	}
	if !declared {
		if r, ok := ruleVerdict(res, c, out, p.Rules, diffSummary(diffs, total)); ok {
			return r
		}
		return failed(res, diffSummary(diffs, total))
	}
	return declaredVerdict(res, decl, out)
}

func declaredVerdict(res Result, d Declaration, out outcome) Result {
	if d.ExpectError == "" {
		res.Status, res.Detail = StatusDeclared, d.Why
		return res
	}
	want, err := errkind.Parse(d.ExpectError)
	if err != nil {
		return failed(res, fmt.Sprintf("declaration of %s: %v", d.Symbol, err))
	}
	if out.err == nil || errkind.Of(out.err) != want {
		return failed(res, fmt.Sprintf("declaration not met: %s declares an error of kind %s (%s), got %s",
			d.Symbol, want, d.Why, out))
	}
	res.Status, res.Detail = StatusDeclared, d.Why
	return res
}

// differences lists how the outcome differs from the reference; a non-nil error means the case
// cannot be judged at all (a broken golden, an exception class with no errkind).
func differences(c *Case, out outcome, tmp string, exact bool) ([]string, int, error) {
	if c.Error != nil {
		d, err := errorDifferences(c.Error, out, exact)
		return d, len(d), err
	}
	if out.err != nil {
		return []string{fmt.Sprintf("expected a value, got %s", out)}, 1, nil
	}
	return compareJSON(c.Output, out.value, tmp, exact, keptDiffs)
}

// diffSummary is the first few differences, for the FAIL line.
func diffSummary(diffs []string, total int) string {
	s := strings.Join(head(diffs, shownDiffs), "; ")
	if total > shownDiffs {
		s += fmt.Sprintf("; and %d more (-v lists them)", total-shownDiffs)
	}
	return s
}

func errorDifferences(want *PyError, out outcome, exact bool) ([]string, error) {
	kind, err := KindOfPython(want.Type)
	if err != nil {
		return nil, err
	}
	if out.err == nil {
		return []string{fmt.Sprintf("expected %s (kind %s): %q, got %s", want.Type, kind, want.Message, out)}, nil
	}
	if got := errkind.Of(out.err); got != kind {
		return []string{fmt.Sprintf("expected %s (kind %s), got %s", want.Type, kind, out)}, nil
	}
	if exact && !messageMatches(want.Message, out.err.Error()) {
		return []string{fmt.Sprintf("error message: expected %q, got %q", want.Message, out.err.Error())}, nil
	}
	return nil, nil
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
