// Package exitcodes_test holds the exit-code contract of every binary of cmd/: 0 for a clean stop
// (--help, --version), 2 for bad flags, config or input, with one "name: message" line on stderr
// that says what was wrong, and 1 for a failure at run time.
package exitcodes_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/cmdbin"
)

// bins are the binaries, by name (under Bazel -<name>=$(rootpath //cmd/<name>)).
var bins = map[string]*cmdbin.Binary{}

func init() {
	for _, name := range []string{"agent", "agent_client", "agentctl", "convert", "export", "fake_tfs", "kafka_producer",
		"model_server", "online", "predict", "ps", "serving_client", "tfs_client", "train"} {
		bins[name] = cmdbin.New(name, "github.com/monolith-go/monolith/cmd/"+name)
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	for _, b := range bins {
		b.Cleanup()
	}
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins[name].Path(t), args...)
	cmd.Dir = t.TempDir()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not exit within 60 s", name, args)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		code = ee.ExitCode()
	}
	return result{code, out.String(), errb.String()}
}

// TestCommonFlags: every binary's --help and --version stop with 0, an unknown flag with 2 and
// one line naming it.
func TestCommonFlags(t *testing.T) {
	for name := range bins {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if r := run(t, name, "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage: "+name) {
				t.Errorf("--help: exit %d, stdout %.200q", r.code, r.stdout)
			}
			if r := run(t, name, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, name+" ") {
				t.Errorf("--version: exit %d, stdout %q", r.code, r.stdout)
			}
			r := run(t, name, "--no_such_flag")
			if want := name + ": unknown flag --no_such_flag\n"; r.code != 2 || r.stderr != want {
				t.Errorf("--no_such_flag: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
			}
		})
	}
}

// TestUsageErrors: bad flags, config or input of each binary: exit 2 and a last stderr line
// "name: ..." that names what was wrong (logs may come before it).
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	agentConf := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(agentConf, []byte("bzid demo\nbase_name m\ndeploy_type unified\nagent_version 3\nzk_servers 127.0.0.1:2181\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badVersion := filepath.Join(dir, "version9.conf")
	if err := os.WriteFile(badVersion, []byte("bzid demo\nbase_name m\ndeploy_type unified\nagent_version 9\nzk_servers 127.0.0.1:2181\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in the last stderr line
	}{
		{"agent", []string{"--status_addr=:99999"}, ":99999"},
		{"agent", []string{"--conf=/nonexistent/agent.conf"}, "/nonexistent/agent.conf"},
		{"agent", []string{"--conf=" + badVersion, "--status_addr="}, "agent_version error 9: the agent.conf's agent_version is 1 or 3"},
		{"agent_client", []string{"--cmd_type=nope"}, "--cmd_type"},
		{"agentctl", []string{"--cmd=nope"}, "--cmd"},
		{"convert", nil, "--schema is required"},
		{"export", []string{"--model_dir=/nonexistent/m", "--export_base=e"}, "/nonexistent/m"},
		{"export", []string{"--model_dir=m", "--export_base=e", "--timeout=0s"}, "--timeout"},
		{"fake_tfs", []string{"--port=x"}, "--port"},
		{"kafka_producer", nil, "--topic is required"},
		{"model_server", []string{"--port=-1"}, "--port -1"},
		{"model_server", []string{"--port=0", "--status_addr=:99999"}, ":99999"},
		{"online", []string{"--rate=0"}, "rate 0"},
		{"predict", nil, "--export_base is required"},
		{"ps", []string{"--port=notaport"}, "--port"},
		{"ps", []string{"--status_addr=:99999"}, ":99999"},
		{"serving_client", []string{"--nope=1"}, "--nope"},
		{"tfs_client", []string{"--cmd_type=nope"}, "--cmd_type"},
		{"train", []string{"--status_addr=:99999"}, ":99999"},
		{"train", []string{"--controller_addr=127.0.0.1:notaport", "--demo_examples=2000", "--model_dir=" + filepath.Join(dir, "m")}, "notaport"},
		{"train", []string{"--batch_size=0"}, "--batch_size"},
		// TLS files given by half.
		{"agent", []string{"--tls_cert=x.pem"}, "--tls_cert and --tls_key: give both or neither"},
		{"model_server", []string{"--port=0", "--status_addr=", "--tls_cert=x.pem"}, "--tls_cert and --tls_key: give both or neither"},
		{"ps", []string{"--status_addr=", "--tls_key=x.pem"}, "--tls_cert and --tls_key: give both or neither"},
		{"train", []string{"--tls_cert=x.pem"}, "--tls_cert and --tls_key: give both or neither"},
		{"ps", []string{"--status_addr=", "--tls_cert=/nonexistent/c.pem", "--tls_key=/nonexistent/k.pem"}, "/nonexistent/c.pem"},
		{"tfs_client", []string{"--cmd_type=status", "--target=127.0.0.1:1", "--model_name=m", "--tls_ca=/nonexistent/ca.pem"}, "--tls_ca: open /nonexistent/ca.pem"},
		{"agent_client", []string{"--conf=" + agentConf, "--cmd_type=hb", "--target=127.0.0.1:1", "--tls_key=k.pem"}, "--tls_cert and --tls_key: give both or neither"},
	} {
		t.Run(tc.name+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, tc.name, tc.args...)
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if r.code != 2 || !strings.HasPrefix(last, tc.name+": ") || !strings.Contains(last, tc.want) {
				t.Errorf("exit %d, last stderr line %q; want 2 and %q\nstderr:\n%s", r.code, last, tc.want, r.stderr)
			}
		})
	}
}
