// Command check replays the Python goldens of agent_service against the Go port through the
// parity adapters and prints one verdict per case (see parity/harness).
//
//	check --goldens=DIR [--goldens=DIR2,DIR3] [--specs=DIR] [--run=REGEXP] [-v]
//
// Exit status: 0 when no case fails, 1 when one does (or the goldens or specs cannot be loaded),
// 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/parity/adapters"
	"github.com/monolith-go/monolith/parity/harness"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, stdout, stderr, adapters.RegisterAll)
}

// usageError is a bad command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// runWith is run with the adapters to register passed in, so tests can supply their own.
func runWith(args []string, stdout, stderr io.Writer, register func(*harness.Registry)) int {
	opts, err := parseArgs(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		var code int
		code, err = check(opts, stdout, stderr, register)
		if err == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "check: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func check(o *options, stdout, stderr io.Writer, register func(*harness.Registry)) (int, error) {
	policy, specs, err := loadPolicy(o.specs, stderr)
	if err != nil {
		return 0, err
	}
	all, err := loadCases(o.goldens)
	if err != nil {
		return 0, err
	}
	warnUnknownDeclared(policy, all, stderr)
	cases := filterCases(all, o.filter)
	if len(cases) == 0 {
		fmt.Fprintln(stderr, "check: warning: no cases to run")
	}
	reg := harness.NewRegistry()
	register(reg)
	s := harness.RunWithOptions(cases, reg, policy, stdout, harness.Options{Verbose: o.verbose})
	if o.filter == nil {
		warnUnusedRules(policy, s, stderr)
	}
	if o.report != "" {
		if err := os.WriteFile(o.report, []byte(renderReport(specs, s)), 0o644); err != nil {
			return 0, fmt.Errorf("report: %w", err)
		}
		fmt.Fprintf(stderr, "check: wrote %s\n", o.report)
	}
	if s.Failed > 0 {
		return 1, nil
	}
	return 0, nil
}

func loadCases(dirs []string) ([]harness.Case, error) {
	var cases []harness.Case
	for _, d := range dirs {
		cs, err := harness.LoadDir(d)
		if err != nil {
			return nil, err
		}
		cases = append(cases, cs...)
	}
	return cases, nil
}

// filterCases keeps the cases whose module/case matches filter (all when it is nil).
func filterCases(cases []harness.Case, filter *regexp.Regexp) []harness.Case {
	if filter == nil {
		return cases
	}
	var kept []harness.Case
	for _, c := range cases {
		if filter.MatchString(c.Name()) {
			kept = append(kept, c)
		}
	}
	return kept
}

// warnUnknownDeclared flags declarations that name no loaded case: a typo or a renamed golden would
// otherwise leave a difference undeclared without notice.
func warnUnknownDeclared(p harness.Policy, cases []harness.Case, stderr io.Writer) {
	known := map[string]bool{}
	for _, c := range cases {
		known[c.Case] = true
	}
	var unknown []string
	for name, d := range p.Declared {
		if !known[name] {
			unknown = append(unknown, fmt.Sprintf("%s (declared by %s)", name, d.Symbol))
		}
	}
	sort.Strings(unknown)
	for _, u := range unknown {
		fmt.Fprintf(stderr, "check: warning: declared case %s matches no golden case\n", u)
	}
}

// warnUnusedRules flags rules that declared no case of the run: legitimate for a rule kept for
// inputs nobody recorded, but also the sign of a rule whose conditions never match.
func warnUnusedRules(p harness.Policy, s harness.Summary, stderr io.Writer) {
	used := map[string]bool{}
	for _, res := range s.Results {
		used[res.Rule] = true
	}
	for _, r := range p.Rules {
		if !used[r.Name] {
			fmt.Fprintf(stderr, "check: note: rule %s (%s) declares no recorded case\n", r.Name, r.Symbol)
		}
	}
}

type options struct {
	goldens []string
	specs   string
	filter  *regexp.Regexp
	verbose bool
	report  string
}

// dirList is a repeatable, comma-separated directory flag.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }

func (d *dirList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*d = append(*d, p)
		}
	}
	return nil
}

func parseArgs(args []string, stdout io.Writer) (*options, error) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported on one line by runWith
	var goldens dirList
	fs.Var(&goldens, "goldens", "directory of golden cases (`DIR`; repeatable, comma-separated); required")
	specs := fs.String("specs", "", "specs directory (`DIR`; default: specs/ in the repository root)")
	runRe := fs.String("run", "", "run only the cases whose module/case matches `REGEXP`")
	verbose := fs.Bool("v", false, "show the file, the call and every difference of failing cases")
	report := fs.String("report", "", "also write the parity report (markdown) to `FILE` (relative to the workspace under bazel run)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, err
		}
		return nil, usagef("%v (see -h)", err)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (see -h)", fs.Arg(0))
	}
	o := &options{verbose: *verbose}
	if *report != "" {
		base, err := baseDir()
		if err != nil {
			return nil, err
		}
		o.report = *report
		if !filepath.IsAbs(o.report) {
			o.report = filepath.Join(base, o.report)
		}
	}
	var err error
	if o.goldens, err = goldenDirs(goldens); err != nil {
		return nil, err
	}
	if o.specs, err = specsDir(*specs); err != nil {
		return nil, err
	}
	if *runRe != "" {
		if o.filter, err = regexp.Compile(*runRe); err != nil {
			return nil, usagef("--run: %v", err)
		}
	}
	return o, nil
}

func goldenDirs(dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, usagef("--goldens=DIR is required")
	}
	base, err := baseDir()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(base, d)
		}
		if err := isDir(d); err != nil {
			return nil, usagef("--goldens: %v", err)
		}
		out[i] = d
	}
	return out, nil
}

func specsDir(flagValue string) (string, error) {
	d := flagValue
	if d == "" {
		start, err := baseDir()
		if err != nil {
			return "", err
		}
		root, err := repoRoot(start)
		if err != nil {
			return "", usagef("--specs not given and %v", err)
		}
		d = filepath.Join(root, "specs")
	} else if !filepath.IsAbs(d) {
		base, err := baseDir()
		if err != nil {
			return "", err
		}
		d = filepath.Join(base, d)
	}
	if err := isDir(d); err != nil {
		return "", usagef("--specs: %v", err)
	}
	return d, nil
}

// baseDir is where relative paths are resolved: the workspace under `bazel run` (whose working
// directory is the runfiles tree), else the working directory.
func baseDir() (string, error) {
	if ws := os.Getenv("BUILD_WORKSPACE_DIRECTORY"); ws != "" {
		return ws, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return wd, nil
}

// repoRoot walks up from dir to the directory holding go.mod.
func repoRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod in %s or above", dir)
		}
		d = parent
	}
}

func isDir(d string) error {
	st, err := os.Stat(d)
	if err != nil {
		return fmt.Errorf("%s: no such directory", d)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: not a directory", d)
	}
	return nil
}
