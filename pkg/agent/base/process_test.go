package agentbase

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestServingLogPath: the reference's os.path.join(dirname(tfs_log), f"{prefix}_{basename}"),
// spelling included (expected values printed by Python).
func TestServingLogPath(t *testing.T) {
	cases := []struct{ tfsLog, want string }{
		{"/var/log/tfs.std.log", "/var/log/ps_tfs.std.log"},
		{"monolith_serving/logs/log.log", "monolith_serving/logs/ps_log.log"},
		{"log.log", "ps_log.log"},
		{"/var/log/", "/var/log/ps_"},
		{"/x", "/ps_x"},
		{"a//b/c.log", "a//b/ps_c.log"},
		{"//a/b", "//a/ps_b"},
		{"", "ps_"},
		{"/", "/ps_"},
	}
	for _, c := range cases {
		if got := (ServingLog{Prefix: "ps", TFSLog: c.tfsLog}).Path(); got != c.want {
			t.Errorf("Path(%q) = %q, want %q", c.tfsLog, got, c.want)
		}
	}
}

func TestArgv(t *testing.T) {
	cases := []struct {
		cmd  string
		want []string
	}{
		{"/bin/server --port=1 --grpc_target=localhost:2 &", []string{"/bin/server", "--port=1", "--grpc_target=localhost:2"}},
		{"  tfs \t--a=1   --b=2 ", []string{"tfs", "--a=1", "--b=2"}},
		{"echo a&", []string{"echo", "a&"}},
		{"&", []string{}},
		{"", []string{}},
	}
	for _, c := range cases {
		if got := Argv(c.cmd); !reflect.DeepEqual(got, c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("Argv(%q) = %q, want %q", c.cmd, got, c.want)
		}
	}
}

// writeScript writes an executable shell script and returns its path.
func writeScript(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "serve.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStartProcess: the child runs in the given directory with the given environment, stdout and
// stderr appended to its serving log; the agent's own working directory never changes.
func TestStartProcess(t *testing.T) {
	tmp := t.TempDir()
	work := filepath.Join(tmp, "bin")
	logs := filepath.Join(tmp, "logs")
	for _, d := range []string{work, logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := writeScript(t, tmp, `echo "out $# $1 $2"; echo "err $FOO" >&2; pwd`+"\n")
	log := &ServingLog{Prefix: "entry", TFSLog: filepath.Join(logs, "tfs.std.log")}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		cmd, err := StartProcess(context.Background(), ProcessSpec{
			Cmd: script + " a b &", Dir: work, Env: []string{"FOO=bar"}, Log: log,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if now, _ := os.Getwd(); now != cwd {
		t.Errorf("working directory changed to %s", now)
	}
	once := "out 2 a b\nerr bar\n" + work + "\n"
	if got := readFile(t, filepath.Join(logs, "entry_tfs.std.log")); got != once+once {
		t.Errorf("log:\n%s\nwant (appended twice):\n%s", got, once+once)
	}
}

// TestStartProcessDefaultDir: with no Dir the child runs in BinDir, or, off a serving host (no
// BinDir), in its binary's directory: never in a directory that does not exist, and never
// depending on the agent's working directory.
func TestStartProcessDefaultDir(t *testing.T) {
	t.Chdir(t.TempDir())
	logs := t.TempDir()
	bin := t.TempDir()
	script := writeScript(t, bin, "pwd\n")
	log := &ServingLog{Prefix: "ps", TFSLog: filepath.Join(logs, "tfs.log")}
	cmd, err := StartProcess(context.Background(), ProcessSpec{Cmd: script, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	want := bin
	if st, err := os.Stat(BinDir); err == nil && st.IsDir() {
		want = BinDir
	}
	if got := readFile(t, log.Path()); got != want+"\n" {
		t.Errorf("ran in %q, want %s", got, want)
	}
}

// TestStartProcessStdout: with no log the child writes to the agent's stdout, stderr too.
func TestStartProcessStdout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stdout")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdout
	os.Stdout = f
	cmd, err := StartProcess(context.Background(), ProcessSpec{Cmd: writeScript(t, t.TempDir(), "echo o; echo e >&2\n"), Dir: "/"})
	os.Stdout = saved
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, out); got != "o\ne\n" {
		t.Errorf("stdout %q", got)
	}
}

// TestStartProcessCancel: cancelling the context kills the process.
func TestStartProcessCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := StartProcess(ctx, ProcessSpec{Cmd: "sleep 60", Dir: "/", Log: &ServingLog{Prefix: "x", TFSLog: filepath.Join(t.TempDir(), "l")}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Exited() {
		t.Errorf("Wait after cancel: %v, want the process killed", err)
	}
	// The process was killed, not waited out (a generous bound: no timing assertion is meant).
	if time.Since(start) > 30*time.Second {
		t.Errorf("the process outlived its context by %v", time.Since(start))
	}
}

func TestStartProcessErrors(t *testing.T) {
	tmp := t.TempDir()
	cases := []struct {
		p    ProcessSpec
		want string
		kind errkind.Kind
	}{
		{ProcessSpec{Cmd: " & ", Dir: tmp}, "empty command line", errkind.Value},
		{ProcessSpec{Cmd: filepath.Join(tmp, "missing") + " --port=1", Dir: tmp}, "start " + filepath.Join(tmp, "missing") + " in " + tmp, errkind.Unknown},
		{ProcessSpec{Cmd: "/bin/sh", Dir: filepath.Join(tmp, "nodir")}, "nodir", errkind.Unknown},
		{ProcessSpec{Cmd: "/bin/sh", Dir: tmp, Log: &ServingLog{Prefix: "ps", TFSLog: filepath.Join(tmp, "nolog", "tfs.log")}}, "serving log", errkind.Unknown},
	}
	for _, c := range cases {
		cmd, err := StartProcess(context.Background(), c.p)
		if err == nil {
			cmd.Wait()
			t.Errorf("%+v: started", c.p)
			continue
		}
		if cmd != nil || !strings.Contains(err.Error(), c.want) || errkind.Of(err) != c.kind {
			t.Errorf("%+v: %v, %v (kind %v); want an error containing %q of kind %v", c.p, cmd, err, errkind.Of(err), c.want, c.kind)
		}
	}
}

// TestSetEnv: key=value comes last, every earlier key= entry is dropped (and only those: a key
// that merely starts with key stays), and env itself is left as it was.
func TestSetEnv(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"unset", []string{"A=1"}, []string{"A=1", "PORT2=9"}},
		{"empty env", nil, []string{"PORT2=9"}},
		{"replaced", []string{"PORT2=1", "A=1"}, []string{"A=1", "PORT2=9"}},
		{"every earlier entry dropped", []string{"PORT2=1", "A=1", "PORT2=2"}, []string{"A=1", "PORT2=9"}},
		{"longer name kept", []string{"PORT22=1", "PORT2"}, []string{"PORT22=1", "PORT2", "PORT2=9"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]string(nil), tc.env...)
			if got := SetEnv(tc.env, "PORT2", "9"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SetEnv(%q) = %q, want %q", tc.env, got, tc.want)
			}
			if !reflect.DeepEqual(tc.env, before) {
				t.Errorf("SetEnv changed its input: %q, was %q", tc.env, before)
			}
		})
	}
}
