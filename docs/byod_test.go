// Package docs_test runs the commands of docs/byod.md ("Bring your own data") as a testscript
// (github.com/rogpeppe/go-internal/testscript), so that the walkthrough cannot rot: every command
// it shows runs, against the binaries of this repository, and the output it shows must appear.
//
// How byod.md becomes a script (extract):
//
//   - A ```console block holds commands and their output. A line starting with "$ " is a command;
//     it goes on over the next lines while a line ends with a backslash, or until the end line of a
//     here-document it opens (<<EOF, <<'EOF'). The lines after a command, up to the next one, are
//     its output as shown: each line must match a line of the command's output (stdout and stderr
//     together), in order, others may come between. In a shown line every number stands for any
//     number (figures vary from machine to machine: AUCs, rates, ports), "..." for any text, and a
//     line of "..." alone for lines left out. The test's work directory is shown as /tmp/byod, the
//     doc's. A command ending in "&" runs in the background until the script ends.
//   - Each command runs as `bash -o pipefail -c COMMAND` in the work directory, in a process group
//     of its own (killed when it runs past its time, and, for background commands, at the end:
//     SIGTERM, then SIGKILL 10 s later), with bin/ holding the binaries and the environment the doc's
//     setup block exports (MONOLITH: the checkout; ZK_PORT, AGENT_PORT, TFS_PORT: free loopback
//     ports here). A ```sh block is shown, not run (the setup: building the binaries).
//   - <!-- file: NAME --> before a fenced block: the block is the file NAME of the work directory
//     (a txtar file of the script).
//   - <!-- retry: DURATION --> before a console block: each of its commands is run again, a few
//     times a second, until it succeeds and shows its lines, for at most DURATION (what a reader does
//     while a server starts).
//   - <!-- test: LINES --> holds testscript lines the reader does not see, run at that point: checks
//     of the last command's output beyond the shown lines (stdout, numgt), of files (scoresmatch).
//
// Under Bazel the binaries are data dependencies, passed as -<name>=$(rootpath //cmd/<name>);
// under go test, internal/cmdbin builds them with go build.
package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/monolith-go/monolith/internal/cmdbin"
)

// docFile is the walkthrough, docWorkDir the work directory its outputs show.
const (
	docFile    = "byod.md"
	docWorkDir = "/tmp/byod"
)

const (
	// scriptTimeout bounds the whole walkthrough.
	scriptTimeout = 3 * time.Minute
	// commandTimeout bounds one foreground command (with its retries).
	commandTimeout = 2 * time.Minute
	// stopGrace is how long background commands have between SIGTERM and SIGKILL.
	stopGrace = 10 * time.Second
)

// binaries are the doc's bin/ directory: cmd/<name> for each name.
var binaries = func() map[string]*cmdbin.Binary {
	m := map[string]*cmdbin.Binary{}
	for _, name := range []string{"convert", "train", "export", "agentctl", "agent", "model_server", "tfs_client", "predict"} {
		m[name] = cmdbin.New(name, "github.com/monolith-go/monolith/cmd/"+name)
	}
	return m
}()

var (
	keepWork = flag.Bool("keepwork", false, "keep the script's work directory (its path is logged)")
	docPath  = flag.String("doc", docFile, "the walkthrough to run (to try a change to it)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	// A test stopped by a signal (Bazel's timeout: SIGTERM) stops what it started first.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		groups.killAll(syscall.SIGKILL)
		fmt.Fprintf(os.Stderr, "docs: %v: killed the processes the walkthrough started\n", s)
		os.Exit(1)
	}()
	code := m.Run()
	groups.killAll(syscall.SIGKILL)
	for _, b := range binaries {
		b.Cleanup()
	}
	os.Exit(code)
}

// TestBYOD runs docs/byod.md.
func TestBYOD(t *testing.T) {
	md, err := os.ReadFile(*docPath)
	if err != nil {
		t.Fatal(err)
	}
	script, err := extract(string(md))
	if err != nil {
		t.Fatalf("%s: %v", docFile, err)
	}
	// The setup block builds the binaries the test gives the commands.
	built := map[string]bool{}
	for _, m := range regexp.MustCompile(`\./cmd/([a-z_]+)`).FindAllStringSubmatch(string(md), -1) {
		built[m[1]] = true
	}
	for name := range binaries {
		if !built[name] {
			t.Errorf("%s: the setup does not build ./cmd/%s, which the test gives the commands as bin/%s", *docPath, name, name)
		}
		delete(built, name)
	}
	for name := range built {
		t.Errorf("%s: the setup builds ./cmd/%s, which the test does not give the commands (add it to binaries)", *docPath, name)
	}
	root, err := filepath.Abs("..") // the checkout, or under Bazel the runfiles' workspace root
	if err != nil {
		t.Fatal(err)
	}
	t.Run("binaries", func(t *testing.T) { // built in parallel
		for name, b := range binaries {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b.Path(t)
			})
		}
	})
	if t.Failed() {
		return
	}
	bins := map[string]string{}
	for name, b := range binaries {
		bins[name] = b.Path(t)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "byod.txtar")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Files:              []string{file},
		TestWork:           *keepWork,
		RequireUniqueNames: true,
		Deadline:           time.Now().Add(scriptTimeout),
		Setup: func(env *testscript.Env) error {
			if err := os.Mkdir(filepath.Join(env.WorkDir, "bin"), 0o755); err != nil {
				return err
			}
			for name, p := range bins {
				if err := os.Symlink(p, filepath.Join(env.WorkDir, "bin", name)); err != nil {
					return err
				}
			}
			env.Setenv("MONOLITH", root)
			for _, v := range []string{"ZK_PORT", "AGENT_PORT", "TFS_PORT"} {
				p, err := freePort()
				if err != nil {
					return err
				}
				env.Setenv(v, strconv.Itoa(p))
			}
			s := &session{env: slices.Clone(env.Vars)}
			env.Values[sessionKey{}] = s
			tb, _ := env.T().(testing.TB)
			work := env.WorkDir
			env.Defer(func() {
				s.stop()
				if tb != nil && tb.Failed() {
					logTails(tb, work)
				}
			})
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"doc":         cmdDoc,
			"numgt":       cmdNumGT,
			"scoresmatch": cmdScoresMatch,
		},
	})
}

// logTails logs the end of each *.log file in dir: what the servers said.
func logTails(tb testing.TB, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		lines = lines[max(0, len(lines)-30):]
		tb.Logf("--- %s (its last %d lines)\n%s", filepath.Base(f), len(lines), strings.Join(lines, "\n"))
	}
}

// freePort is a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// A command of the doc, as extract finds it.
type command struct {
	line  int    // of its "$ " in the doc
	text  string // without "$ " and a final "&"
	bg    bool
	want  []string
	retry time.Duration
}

var (
	fenceRE   = regexp.MustCompile("^```+\\s*([A-Za-z0-9_-]*)")
	commentRE = regexp.MustCompile(`(?s)^<!--\s*([a-z]+):(.*?)-->\s*$`)
	heredocRE = regexp.MustCompile(`<<-?\s*(?:'([A-Za-z_]+)'|"([A-Za-z_]+)"|([A-Za-z_]+))`)
)

// extract turns the doc into a testscript (a txtar archive: the script, then the files).
func extract(md string) (string, error) {
	lines := strings.Split(md, "\n")
	var script strings.Builder
	type file struct{ name, body string }
	var files []file
	var nextFile string
	var nextRetry time.Duration
	names := map[string]bool{}
	ncmds := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "<!--") {
			start := i
			c := line
			for !strings.Contains(c, "-->") && i+1 < len(lines) {
				i++
				c += "\n" + lines[i]
			}
			m := commentRE.FindStringSubmatch(strings.TrimSpace(c))
			if m == nil {
				continue // a comment for readers of the source
			}
			arg := strings.TrimSpace(m[2])
			switch m[1] {
			case "file":
				nextFile = arg
			case "retry":
				d, err := time.ParseDuration(arg)
				if err != nil || d <= 0 {
					return "", fmt.Errorf("line %d: retry %q: want a positive duration", start+1, arg)
				}
				nextRetry = d
			case "test":
				fmt.Fprintf(&script, "# %s:%d\n%s\n", docFile, start+1, arg)
			default:
				return "", fmt.Errorf("line %d: unknown directive %q (want file, retry or test)", start+1, m[1])
			}
			continue
		}
		m := fenceRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fence := line[:strings.IndexFunc(line, func(r rune) bool { return r != '`' })]
		lang, start := m[1], i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != fence; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return "", fmt.Errorf("line %d: the block does not end", start+1)
		}
		switch {
		case nextFile != "":
			if names[nextFile] {
				return "", fmt.Errorf("line %d: a second file %s", start+1, nextFile)
			}
			names[nextFile] = true
			files = append(files, file{nextFile, strings.Join(body, "\n") + "\n"})
		case lang == "console":
			cmds, err := parseConsole(body, start+2)
			if err != nil {
				return "", err
			}
			for _, c := range cmds {
				c.retry = nextRetry
				script.WriteString(c.script())
			}
			ncmds += len(cmds)
		case nextRetry != 0:
			return "", fmt.Errorf("line %d: retry before a block that is not a console block", start+1)
		}
		nextFile, nextRetry = "", 0
	}
	if nextFile != "" || nextRetry != 0 {
		return "", errors.New("a file or retry directive at the end, before no block")
	}
	if ncmds == 0 {
		return "", errors.New("no console block with commands")
	}
	for _, f := range files {
		fmt.Fprintf(&script, "-- %s --\n%s", f.name, f.body)
	}
	return script.String(), nil
}

// parseConsole reads a console block whose first line is the doc's line first.
func parseConsole(body []string, first int) ([]*command, error) {
	var cmds []*command
	for i := 0; i < len(body); i++ {
		line := body[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(cmds) == 0 {
				if strings.TrimSpace(line) == "" {
					continue
				}
				return nil, fmt.Errorf("line %d: a console block starts with a command (\"$ \")", first+i)
			}
			c := cmds[len(cmds)-1]
			if w := strings.TrimRight(line, " \t"); w != "" && w != "..." {
				c.want = append(c.want, w)
			}
			continue
		}
		c := &command{line: first + i}
		text := strings.TrimPrefix(line, "$ ")
		for strings.HasSuffix(text, "\\") && i+1 < len(body) {
			i++
			text += "\n" + body[i]
		}
		if m := heredocRE.FindStringSubmatch(text); m != nil {
			end := m[1] + m[2] + m[3]
			for {
				i++
				if i == len(body) {
					return nil, fmt.Errorf("line %d: the here-document does not end with %s", c.line, end)
				}
				text += "\n" + body[i]
				if strings.TrimSpace(body[i]) == end {
					break
				}
			}
		}
		if t, ok := strings.CutSuffix(strings.TrimSpace(text), "&"); ok && !strings.HasSuffix(t, "&") {
			c.bg, text = true, strings.TrimSpace(t)
		}
		c.text = text
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if c.bg && len(c.want) > 0 {
			return nil, fmt.Errorf("line %d: a background command shows no output (redirect it to a file)", c.line)
		}
	}
	return cmds, nil
}

// script is the command as a testscript line: doc [-bg] [-retry=D] 'COMMAND' 'WANT'...
func (c *command) script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s:%d\ndoc -line=%d", docFile, c.line, c.line)
	if c.bg {
		b.WriteString(" -bg")
	}
	if c.retry > 0 {
		fmt.Fprintf(&b, " -retry=%v", c.retry)
	}
	for _, a := range append([]string{c.text}, c.want...) {
		b.WriteString(" " + quote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// quote is a in testscript's single quotes. A testscript line is one line: newlines travel as
// the two characters \n (unquoteNL reverses it), backslashes before an n doubled.
func quote(a string) string {
	a = strings.ReplaceAll(a, `\`, `\\`)
	a = strings.ReplaceAll(a, "\n", `\n`)
	return "'" + strings.ReplaceAll(a, "'", "''") + "'"
}

func unquoteNL(a string) string {
	var b strings.Builder
	for i := 0; i < len(a); i++ {
		if a[i] == '\\' && i+1 < len(a) {
			switch a[i+1] {
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case '\\':
				b.WriteByte('\\')
				i++
				continue
			}
		}
		b.WriteByte(a[i])
	}
	return b.String()
}

var numberRE = regexp.MustCompile(`[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?`)

// linePattern is the regexp of a shown output line: numbers stand for any number, "..." for any
// text, the rest for itself, the whole line.
func linePattern(shown string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i, part := range strings.Split(shown, "...") {
		if i > 0 {
			b.WriteString(".*")
		}
		last := 0
		for _, m := range numberRE.FindAllStringIndex(part, -1) {
			b.WriteString(regexp.QuoteMeta(part[last:m[0]]))
			b.WriteString(`[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?`)
			last = m[1]
		}
		b.WriteString(regexp.QuoteMeta(part[last:]))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// matchLines reports the first shown line that does not match a line of out after the previous
// one's, or "" when all do.
func matchLines(out string, shown []string) string {
	lines := strings.Split(out, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t\r")
	}
	at := 0
	for _, s := range shown {
		re := linePattern(s)
		for at < len(lines) && !re.MatchString(lines[at]) {
			at++
		}
		if at == len(lines) {
			return s
		}
		at++
	}
	return ""
}

type sessionKey struct{}

// session is a script's background commands.
type session struct {
	env []string // the script's environment, as Setup leaves it

	mu  sync.Mutex
	bgs []*background
}

type background struct {
	text string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// stop ends the background commands: SIGTERM to each process group, SIGKILL stopGrace later.
func (s *session) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bg := range s.bgs {
		select {
		case <-bg.done:
		default:
			syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	timeout := time.After(stopGrace)
	for _, bg := range s.bgs {
		select {
		case <-bg.done:
		case <-timeout:
		}
		syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGKILL) // what it started, too
		<-bg.done
		groups.remove(bg.cmd.Process.Pid)
	}
	s.bgs = nil
}

// groups are the process groups started and not yet ended, for TestMain's signal handler.
var groups = &groupSet{m: map[int]bool{}}

type groupSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (g *groupSet) add(pid int)    { g.mu.Lock(); g.m[pid] = true; g.mu.Unlock() }
func (g *groupSet) remove(pid int) { g.mu.Lock(); delete(g.m, pid); g.mu.Unlock() }
func (g *groupSet) killAll(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pid := range g.m {
		syscall.Kill(-pid, sig)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// shell is COMMAND as bash runs it in the script's directory and environment, in a process group
// of its own, stdout and stderr into out.
func shell(ts *testscript.TestScript, text string, out *syncBuffer) *exec.Cmd {
	cmd := exec.Command("bash", "-o", "pipefail", "-c", text)
	cmd.Dir = ts.MkAbs(".")
	s := ts.Value(sessionKey{}).(*session)
	cmd.Env = append(slices.Clone(s.env), "PWD="+cmd.Dir)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// cmdDoc runs a command of the doc and checks the output it shows:
// doc -line=N [-bg] [-retry=D] COMMAND [WANT...].
func cmdDoc(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! doc")
	}
	fs := flag.NewFlagSet("doc", flag.ContinueOnError)
	line := fs.Int("line", 0, "")
	bg := fs.Bool("bg", false, "")
	retry := fs.Duration("retry", 0, "")
	if err := fs.Parse(args); err != nil || fs.NArg() < 1 {
		ts.Fatalf("usage: doc -line=N [-bg] [-retry=D] COMMAND [WANT...]")
	}
	text := unquoteNL(fs.Arg(0))
	var want []string
	for _, w := range fs.Args()[1:] {
		want = append(want, unquoteNL(w))
	}
	s := ts.Value(sessionKey{}).(*session)
	if *bg {
		out := &syncBuffer{}
		cmd := shell(ts, text, out)
		if err := cmd.Start(); err != nil {
			ts.Fatalf("%s:%d: %v", docFile, *line, err)
		}
		groups.add(cmd.Process.Pid)
		b := &background{text: text, cmd: cmd, out: out, done: make(chan struct{})}
		go func() { cmd.Wait(); close(b.done) }()
		s.mu.Lock()
		s.bgs = append(s.bgs, b)
		s.mu.Unlock()
		ts.Logf("started in the background (process group %d)", cmd.Process.Pid)
		ts.Defer(func() {
			if o := b.out.String(); o != "" {
				ts.Logf("[%s: its output]\n%s", firstLine(b.text), o)
			}
		})
		return
	}
	deadline := time.Now().Add(commandTimeout)
	if *retry > 0 {
		deadline = time.Now().Add(*retry)
	}
	work := ts.Getenv("WORK")
	for attempt := 1; ; attempt++ {
		out, err := runUntil(ts, text, time.Until(deadline))
		out = strings.ReplaceAll(out, work, docWorkDir)
		missing := ""
		if err == nil {
			missing = matchLines(out, want)
		}
		if (err == nil && missing == "") || *retry == 0 || time.Now().After(deadline) {
			fmt.Fprint(ts.Stdout(), out)
			switch {
			case err != nil:
				ts.Fatalf("%s:%d: the command failed (attempt %d): %v", docFile, *line, attempt, err)
			case missing != "":
				ts.Fatalf("%s:%d: the output (attempt %d) has no line %q (%s) after the lines shown before it",
					docFile, *line, attempt, missing, linePattern(missing))
			}
			if attempt > 1 {
				ts.Logf("succeeded at attempt %d", attempt)
			}
			return
		}
		if attempt == 1 {
			why := "no line " + strconv.Quote(missing)
			if err != nil {
				why = err.Error()
			}
			ts.Logf("attempt 1: %s: %s; retrying for %v", why, lastLine(out), *retry)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// runUntil runs text in the foreground for at most d, killing its process group then.
func runUntil(ts *testscript.TestScript, text string, d time.Duration) (string, error) {
	out := &syncBuffer{}
	cmd := shell(ts, text, out)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	groups.add(cmd.Process.Pid)
	defer groups.remove(cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), max(d, time.Second))
	defer cancel()
	select {
	case err := <-done:
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it left behind
		return out.String(), err
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.String(), fmt.Errorf("still running after %v: killed", max(d, time.Second).Round(time.Second))
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// cmdNumGT checks the last command's output: numgt REGEXP MIN: REGEXP (with one group, a number)
// matches at least one line, and each match's number is > MIN.
func cmdNumGT(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: numgt REGEXP MIN")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	if err != nil || re.NumSubexp() != 1 {
		ts.Fatalf("numgt: %q: want a regexp with one group", args[0])
	}
	low, err := strconv.ParseFloat(args[1], 64)
	if err != nil {
		ts.Fatalf("numgt: %v", err)
	}
	ms := re.FindAllStringSubmatch(ts.ReadFile("stdout"), -1)
	if len(ms) == 0 {
		ts.Fatalf("numgt: no line matches %q", args[0])
	}
	for _, m := range ms {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || !(v > low) {
			ts.Fatalf("numgt: %q: %s is not above %v", m[0], m[1], low)
		}
		ts.Logf("%s: %s > %v", strings.TrimSpace(m[0]), m[1], low)
	}
}

// cmdScoresMatch checks scoresmatch WANT GOT N TOL: WANT holds N numbers, one a line (cmd/predict),
// GOT the same number of "scores <x>" lines (tfs_client --print_outputs), each within TOL.
func cmdScoresMatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: scoresmatch WANT GOT N TOL")
	}
	n, err1 := strconv.Atoi(args[2])
	tol, err2 := strconv.ParseFloat(args[3], 64)
	if err := errors.Join(err1, err2); err != nil {
		ts.Fatalf("scoresmatch: %v", err)
	}
	want := numbers(ts, args[0], "")
	got := numbers(ts, args[1], "scores ")
	if len(want) != n || len(got) != n {
		ts.Fatalf("scoresmatch: %d scores in %s, %d in %s, want %d each", len(want), args[0], len(got), args[1], n)
	}
	for i := range want {
		if d := math.Abs(want[i] - got[i]); !(d <= tol) {
			ts.Fatalf("scoresmatch: example %d: %s %v, %s %v: %g apart, more than %g", i, args[0], want[i], args[1], got[i], d, tol)
		}
	}
	ts.Logf("%d scores of %s equal to %s's within %g", n, args[1], args[0], tol)
}

// numbers are the numbers of file's lines, after prefix (which every line must have).
func numbers(ts *testscript.TestScript, file, prefix string) []float64 {
	var out []float64
	sc := bufio.NewScanner(strings.NewReader(ts.ReadFile(file)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" {
			continue
		}
		v, ok := strings.CutPrefix(l, prefix)
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			ts.Fatalf("scoresmatch: %s: line %q is not %s<number>", file, l, prefix)
		}
		out = append(out, f)
	}
	return out
}

// TestExtract checks how a doc becomes a script, on a small doc.
func TestExtract(t *testing.T) {
	md := "intro\n" +
		"<!-- file: a.txt -->\n```text\nhello\n```\n" +
		"```sh\nnot run\n```\n" +
		"<!-- a comment for readers -->\n" +
		"<!-- retry: 5s -->\n" +
		"```console\n$ cat a.txt \\\n    | tr h H\nHello\n...\n$ sleep 9 &\n```\n" +
		"<!-- test:\nstdout x\n-->\n" +
		"```console\n$ cat > b <<'EOF'\nit's $X\nEOF\n```\n"
	got, err := extract(md)
	if err != nil {
		t.Fatal(err)
	}
	want := "# byod.md:12\ndoc -line=12 -retry=5s 'cat a.txt \\\\\\n    | tr h H' 'Hello'\n" +
		"# byod.md:16\ndoc -line=16 -bg -retry=5s 'sleep 9'\n" +
		"# byod.md:18\nstdout x\n" +
		"# byod.md:22\ndoc -line=22 'cat > b <<''EOF''\\nit''s $X\\nEOF'\n" +
		"-- a.txt --\nhello\n"
	if got != want {
		t.Errorf("extract:\n%s\nwant:\n%s", got, want)
	}
	if u := unquoteNL(`cat a.txt \\\n    | tr h H`); u != "cat a.txt \\\n    | tr h H" {
		t.Errorf("unquoteNL: %q", u)
	}
	for _, bad := range []string{
		"```console\nno command\n```\n",
		"<!-- retry: soon -->\n```console\n$ true\n```\n",
		"<!-- retry: 1s -->\n```sh\ntrue\n```\n",
		"<!-- nope: x -->\n",
		"```console\n$ cat <<EOF\nnever ends\n```\n",
		"```console\n$ sleep 1 &\nshown output\n```\n",
		"```console\n$ true\n",
		"no commands\n",
	} {
		if _, err := extract(bad); err == nil {
			t.Errorf("extract(%q): no error", bad)
		}
	}
}

// TestMatchLines checks the shown lines' matching: numbers and "..." match anything, lines in order.
func TestMatchLines(t *testing.T) {
	out := "a 1\nrows written  20000 (1430442 rows/s)\nnoise\nzk: ready on 127.0.0.1:34439\nx=0.25 y=-3e-05 z\n"
	for _, c := range []struct {
		shown []string
		miss  string
	}{
		{[]string{"rows written  20000 (459375 rows/s)", "zk: ready on 127.0.0.1:2181"}, ""},
		{[]string{"x=0.5 y=-1e-07 ..."}, ""},
		{[]string{"... ready on ..."}, ""},
		{[]string{"zk: ready on 127.0.0.1:2181", "rows written  1 (2 rows/s)"}, "rows written  1 (2 rows/s)"},
		{[]string{"rows written  20000"}, "rows written  20000"},
		{[]string{"rows written  x (1 rows/s)"}, "rows written  x (1 rows/s)"},
	} {
		if m := matchLines(out, c.shown); m != c.miss {
			t.Errorf("matchLines(%q) = %q, want %q", c.shown, m, c.miss)
		}
	}
}
