package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// TestMain runs the command itself when asked to (TestSIGTERM starts this binary as cmd/ps).
func TestMain(m *testing.M) {
	if os.Getenv("PS_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const tableConfig = `
tables {
  name: "slot_1"
  config { entry_config { segments { dim_size: 4 init_config { zeros {} } opt_config { sgd { learning_rate: 0.5 } } } } }
}
tables {
  name: "slot_2"
  config { entry_config { segments { dim_size: 2 init_config { ones {} } opt_config { adagrad {} } } } }
  filter { type: SLIDING_HASH capacity: 1000 occurrence_threshold { default_occurrence_threshold: 1 } }
}
`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// result is a finished run.
type result struct {
	code           int
	stdout, stderr string
}

// started is a run in the background: ready receives its address, stop ends it.
type started struct {
	ready  chan string
	stop   context.CancelFunc
	done   chan int
	stdout *syncbuf.Buffer
	stderr *syncbuf.Buffer
}

func start(t *testing.T, args []string, env trainenv.Env) *started {
	t.Helper()
	if env == nil {
		env = trainenv.Env{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{ready: make(chan string, 1), stop: cancel, done: make(chan int, 1), stdout: new(syncbuf.Buffer), stderr: new(syncbuf.Buffer)}
	go func() {
		s.done <- run(ctx, args, s.stdout, s.stderr, deps{env: env, ready: func(addr string) { s.ready <- addr }})
	}()
	t.Cleanup(cancel)
	return s
}

// addr waits until the run serves.
func (s *started) addr(t *testing.T) string {
	t.Helper()
	select {
	case a := <-s.ready:
		return a
	case code := <-s.done:
		s.done <- code
		t.Fatalf("the run ended with %d before serving; stderr:\n%s", code, s.stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("the run does not serve; stderr:\n%s", s.stderr.String())
	}
	return ""
}

// metrics is the server's /metrics page, from the status endpoint it printed.
func (s *started) metrics(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`status (http://\S+) `).FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("stdout names no status endpoint:\n%s", s.stdout.String())
	}
	resp, err := http.Get(m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// wait stops the run and returns its result.
func (s *started) wait(t *testing.T) result {
	t.Helper()
	s.stop()
	select {
	case code := <-s.done:
		return result{code: code, stdout: s.stdout.String(), stderr: s.stderr.String()}
	case <-time.After(time.Minute):
		t.Fatalf("the run did not stop; stderr:\n%s", s.stderr.String())
	}
	return result{}
}

// runToEnd runs a command line that ends by itself.
func runToEnd(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr syncbuf.Buffer
	code := run(context.Background(), args, &stdout, &stderr, deps{env: trainenv.Env{}})
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func TestCommandLine(t *testing.T) {
	good := writeFile(t, "tables.txt", tableConfig)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // a line of stdout
		stderr string // stderr's one line
		// stderr2 is more of it (the proto library varies the space after "proto:").
		stderr2 string
	}{
		{name: "version", args: []string{"--version"}, code: 0, stdout: "ps "},
		{name: "help", args: []string{"--help"}, code: 0, stdout: "--table_config="},
		{name: "unknown flag", args: []string{"--nope"}, code: 2, stderr: "ps: unknown flag --nope"},
		{name: "bad port", args: []string{"--port=70000"}, code: 2, stderr: "ps: --port 70000: want 0..65535"},
		{name: "bad log level", args: []string{"--log_level=loud"}, code: 2, stderr: "--log_level"},
		{name: "zero id limit", args: []string{"--max_ids_per_request=0"}, code: 2, stderr: "ps: --max_ids_per_request 0 is not positive"},
		{name: "message limit past gRPC's", args: []string{"--max_message_bytes=1099511627776"}, code: 2, stderr: "ps: --max_message_bytes 1099511627776: at most 4294901759"},
		{name: "filter past its bounds", args: []string{"--table_config=" + writeFile(t, "filter.txt", `tables { name: "t" config { entry_config { segments { dim_size: 4 init_config { zeros {} } opt_config { sgd {} } } } } filter { type: SLIDING_HASH capacity: 4611686018427387904 } }`)}, code: 2,
			stderr: `table "t": filter: sliding hash filter: capacity 4611686018427387904 in 7 splits, want at most 21474836160`},
		{name: "worker", args: []string{"--server_type=worker"}, code: 2, stderr: "ps: --server_type worker: cmd/ps runs a parameter server (ps)"},
		{name: "index past num_ps", args: []string{"--num_ps=2", "--index=2"}, code: 2, stderr: "ps: --index 2: this job has 2 parameter servers (--num_ps)"},
		{name: "missing table config", args: []string{"--table_config=/nonexistent/tables.txt"}, code: 2, stderr: "ps: --table_config: open /nonexistent/tables.txt"},
		{name: "table config syntax", args: []string{"--table_config=" + writeFile(t, "bad.txt", "tables {\n  nme: \"x\"\n}\n")}, code: 2,
			stderr: `(line 2:3): unknown field: nme`, stderr2: "bad.txt: proto:"},
		{name: "bad table", args: []string{"--table_config=" + writeFile(t, "zero.txt", `tables { name: "t" config { entry_config { segments { dim_size: 0 } } } }`)}, code: 2,
			stderr: `table "t": embedding table config: segment 0: dim_size 0`},
		{name: "bad table name", args: []string{"--table_config=" + writeFile(t, "name.txt", `tables { name: "a/b" }`)}, code: 2, stderr: `table "a/b": a name is`},
		{name: "sync without model", args: []string{"--sync_targets=127.0.0.1:1"}, code: 2, stderr: "ps: --sync_targets or --sync_agent_addr without --sync_model_name"},
		{name: "sync without targets", args: []string{"--sync_model_name=demo"}, code: 2, stderr: "ps: --sync_model_name demo without --sync_targets or --sync_agent_addr"},
		{name: "sync targets and agent", args: []string{"--sync_model_name=demo", "--sync_targets=127.0.0.1:1", "--sync_agent_addr=127.0.0.1:2"}, code: 2, stderr: "give one source of the serving replicas"},
		{name: "bad sync target", args: []string{"--sync_model_name=demo", "--sync_targets=127.0.0.1:1,nope"}, code: 2, stderr: `ps: --sync_targets: "nope" is not host:port`},
		{name: "zero sync interval", args: []string{"--sync_model_name=demo", "--sync_targets=127.0.0.1:1", "--sync_interval=0s"}, code: 2, stderr: "--sync_interval 0s and --sync_timeout 3s must be positive"},
		{name: "zk without server", args: []string{"--table_config=" + good, "--discovery_type=zk"}, code: 2,
			stderr: "ps: --discovery_type zk needs --zk_server and --deep_insight_name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runToEnd(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if tc.stdout != "" && !strings.Contains(r.stdout, tc.stdout) {
				t.Errorf("stdout %q lacks %q", r.stdout, tc.stdout)
			}
			if tc.stderr != "" {
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				last := strings.ReplaceAll(lines[len(lines)-1], "\u00a0", " ")
				if !strings.Contains(last, tc.stderr) || !strings.Contains(last, tc.stderr2) {
					t.Errorf("stderr's last line %q lacks %q or %q", last, tc.stderr, tc.stderr2)
				}
			}
		})
	}
}

// TestServe runs a parameter server from a table config, trains one id through a client, reads
// the status endpoint, and stops it.
func TestServe(t *testing.T) {
	leakcheck.Check(t)
	s := start(t, []string{"--table_config=" + writeFile(t, "tables.txt", tableConfig), "--num_ps=2", "--index=1", "--log_format=json"}, nil)
	addr := s.addr(t)
	c, err := ps.Dial(addr, ps.ClientConfig{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.GetIndex() != 1 || h.GetNumPs() != 2 || strings.Join(h.GetTables(), ",") != "slot_1,slot_2" || h.GetMaxIdsPerRequest() != 1<<20 {
		t.Fatalf("health %v", h)
	}
	if err := c.ApplyGradients(ctx, "slot_1", 4, []int64{3}, []float32{1, 2, 3, 4}, ps.Update{GlobalStep: 1}); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 4)
	if n, err := c.Lookup(ctx, "slot_1", 4, []int64{3}, out); err != nil || n != 1 || out[0] != -0.5 || out[3] != -2 {
		t.Fatalf("lookup = %v, %d, %v; want SGD at 0.5 from zeros", out, n, err)
	}
	body := s.metrics(t)
	if !strings.Contains(body, `monolith_ps_table_entries{ps="1",table="slot_1"} 1`) ||
		!strings.Contains(body, `monolith_ps_rpc_requests_total{code="OK",method="ApplyGradients"} 1`) {
		t.Errorf("/metrics:\n%s", body)
	}
	r := s.wait(t)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "ps 1 of 2 serving on "+addr+" (tables: slot_1, slot_2)\n") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	for _, want := range []string{`"msg":"parameter server serving"`, `"msg":"parameter server stopped"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the JSON log lacks %s:\n%s", want, r.stderr)
		}
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after the stop", addr)
	}
}

func TestPortTaken(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	port := lis.Addr().(*net.TCPAddr).Port
	r := runToEnd(t, fmt.Sprintf("--port=%d", port), "--status_addr=")
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("ps: listen on 127.0.0.1:%d: ", port)) {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

// TestZKDiscovery starts a job's two parameter servers with ZooKeeper discovery on a real
// ZooKeeper: each registers ps.<index> with its address, a Router over the discovered addresses
// reaches each at its index, and the registrations are gone after the stop.
func TestZKDiscovery(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t)
	ctx := context.Background()
	common := []string{"--discovery_type=zk", "--zk_server=" + srv.Addr(), "--deep_insight_name=ps_job", "--num_ps=2", "--status_addr="}
	var runs []*started
	for i := 0; i < 2; i++ {
		runs = append(runs, start(t, append([]string{fmt.Sprintf("--index=%d", i)}, common...), nil))
	}
	addrs := []string{runs[0].addr(t), runs[1].addr(t)}

	d, err := discovery.NewZK(ctx, discovery.ZKOptions{JobName: "ps_job", Servers: srv.Addr(), Env: trainenv.Env{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Query(ctx, "ps")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != addrs[0] || got[1] != addrs[1] {
		t.Fatalf("the discovery answers %v, the servers serve on %v", got, addrs)
	}
	r, err := ps.NewRouter(ps.RouterConfig{Addrs: []string{got[0], got[1]}, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Health(ctx); err != nil {
		t.Fatalf("the discovered servers: %v", err)
	}
	for i, s := range runs {
		res := s.wait(t)
		if res.code != 0 {
			t.Fatalf("ps %d: exit %d; stderr:\n%s", i, res.code, res.stderr)
		}
		if want := fmt.Sprintf("registered ps.%d at %s (", i, addrs[i]); !strings.Contains(res.stdout, want) {
			t.Errorf("ps %d stdout lacks %q:\n%s", i, want, res.stdout)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := d.Query(ctx, "ps")
		if err == nil && len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stop the discovery still answers %v, %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSIGTERM runs the command as a process of its own and stops it with SIGTERM: exit status 0,
// the stop logged.
func TestSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--table_config="+writeFile(t, "tables.txt", tableConfig), "--status_addr=")
	cmd.Env = append(os.Environ(), "PS_TEST_RUN_MAIN=1")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ps 0 of 1 serving on 127.0.0.1:") {
		t.Fatalf("first line %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `msg="parameter server stopping" index=0 cause="terminated signal received"`) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// TestSIGTERMDuringSave: SIGTERM while a Save is writing a large table stops the process within
// 1 s (not after --grace_period): the Save is cut short, UNAVAILABLE, and leaves no files.
func TestSIGTERMDuringSave(t *testing.T) {
	const bigTable = `
tables {
  name: "big"
  config { entry_config { segments { dim_size: 8 init_config { zeros {} } opt_config { sgd { learning_rate: 0.5 } } } } }
  filter { type: SLIDING_HASH capacity: 1000000 occurrence_threshold { default_occurrence_threshold: 0 } }
}
`
	cmd := exec.Command(os.Args[0], "--table_config="+writeFile(t, "tables.txt", bigTable), "--status_addr=", "--grace_period=10s")
	cmd.Env = append(os.Environ(), "PS_TEST_RUN_MAIN=1")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`^ps 0 of 1 serving on (\S+) `).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("first line %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	c, err := ps.Dial(m[1], ps.ClientConfig{CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n, batch = 300000, 100000
	for start := 0; start < n; start += batch {
		ids := make([]int64, batch)
		for i := range ids {
			ids[i] = int64(start + i)
		}
		if err := c.ApplyGradients(ctx, "big", 8, ids, make([]float32, 8*batch), ps.Update{GlobalStep: 1}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	saved := make(chan error, 1)
	go func() {
		_, err := c.RPC().Save(ctx, &pspb.SaveRequest{Dir: dir, ShardsPerTable: ps.MaxShardsPerTable})
		saved <- err
	}()
	files := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "big", "*"))
		return m
	}
	for deadline := time.Now().Add(10 * time.Second); len(files()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Save wrote nothing in 10 s; stderr:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit after SIGTERM; stderr:\n%s", stderr.String())
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the process stopped %v after SIGTERM during a Save, want under 1 s", took)
	}
	if err := <-saved; status.Code(err) != codes.Unavailable {
		t.Errorf("the Save cut short: %v, want UNAVAILABLE", err)
	}
	if left := files(); len(left) != 0 {
		t.Errorf("the Save cut short left %d files: %v ...", len(left), left[:min(len(left), 3)])
	}
}
