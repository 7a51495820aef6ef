package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) {
	// pkg/agentctl logs through slog.Default; keep test output readable.
	slog.SetDefault(quiet)
	os.Exit(m.Run())
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fixture is testdata/fixture.json: the ZooKeeper trees of the scenario and the export.
type fixture struct {
	Roots []string `json:"roots"`
	Nodes []struct {
		Path string `json:"path"`
		Data string `json:"data"`
	} `json:"nodes"`
	SubGraphs []string `json:"sub_graphs"`
	Version   string   `json:"version"`
}

// step is one command line of testdata/cases.json with what the reference did
// (testdata/reference.json).
type step struct {
	refcases.Case
	Args []string `json:"args"`
	Tree bool     `json:"tree"`
}

func loadScenario(t *testing.T) (fixture, []step) {
	t.Helper()
	var f fixture
	refcases.ReadJSON(t, filepath.Join("testdata", "fixture.json"), &f)
	return f, refcases.Load[step](t, "testdata", "../agent_client/testdata/README.md")
}

// writeExport builds the export the reference declared: {sub_graph}/{version}/saved_model.pb,
// each a copy of testdata/saved_model.pb.
func writeExport(t *testing.T, f fixture) string {
	t.Helper()
	pb, err := os.ReadFile(filepath.Join("testdata", "saved_model.pb"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "saved_model")
	for _, sg := range f.SubGraphs {
		p := filepath.Join(dir, sg, f.Version)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "saved_model.pb"), pb, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// seed replaces the fixture's roots by its nodes.
func seed(t *testing.T, c zk.Client, f fixture) {
	t.Helper()
	ctx := tctx(t)
	for _, r := range f.Roots {
		if err := c.Delete(ctx, r, zk.DeleteOptions{Recursive: true}); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
	}
	for _, n := range f.Nodes {
		if _, err := c.Create(ctx, n.Path, []byte(n.Data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// replay runs the scenario's steps in order, comparing each with what the reference did.
func replay(t *testing.T, zkServers string, admin zk.Client, dial dialFunc) {
	f, steps := loadScenario(t)
	export := writeExport(t, f)
	seed(t, admin, f)
	for _, s := range steps {
		ok := t.Run(s.Name, func(t *testing.T) {
			var args []string
			for _, a := range s.Args {
				args = append(args, strings.NewReplacer("{zk}", zkServers, "{export}", export).Replace(a))
			}
			var stdout, stderr bytes.Buffer
			code := run(tctx(t), args, &stdout, &stderr, dial)
			if code != s.Exit {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, s.Exit, stderr.String())
			}
			if got := strings.ReplaceAll(stdout.String(), export, "{export}"); got != s.Stdout {
				t.Errorf("output differs from the reference's\ngot:\n%s\nwant:\n%s", got, s.Stdout)
			}
			if s.Tree {
				got := map[string]string{}
				for k, v := range refcases.DumpTrees(tctx(t), t, admin, f.Roots...) {
					got[k] = strings.ReplaceAll(v, export, "{export}")
				}
				if d := refcases.DiffTrees(got, s.TreeAfter); d != "" {
					t.Errorf("ZooKeeper trees differ from the reference's:\n%s", d)
				}
			}
		})
		if !ok {
			return // later steps depend on this one
		}
	}
}

// TestReference replays the reference's recorded scenario on an in-memory ZooKeeper; every
// command gets a session of its own.
func TestReference(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	admin := srv.Client()
	defer admin.Close()
	replay(t, "127.0.0.1:2181", admin, func(context.Context, string, *slog.Logger) (zk.Client, error) {
		return srv.Client(), nil
	})
}

// TestReferenceRealZooKeeper replays it end to end on a real ZooKeeper server, connecting as the
// command does (dialZK).
func TestReferenceRealZooKeeper(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t)
	admin, err := zkreal.Connect(tctx(t), zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	replay(t, srv.Addr(), admin, dialZK)
}

// TestCommandLine covers bad command lines and input (exit 2, nothing contacted), failures after
// connecting (exit 1) and --help.
func TestCommandLine(t *testing.T) {
	leakcheck.Check(t)
	f, _ := loadScenario(t)
	export := writeExport(t, f)
	noRemote := t.TempDir() // an export whose entry graph calls no PS
	if err := os.MkdirAll(filepath.Join(noRemote, "entry", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	graph := &tfframework.GraphDef{Node: []*tfframework.NodeDef{{Name: "x", Op: "Placeholder"}}}
	pb, err := proto.Marshal(&tfprotobuf.SavedModel{MetaGraphs: []*tfprotobuf.MetaGraphDef{{GraphDef: graph}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(noRemote, "entry", "1", "saved_model.pb"), pb, 0o644); err != nil {
		t.Fatal(err)
	}
	badPB := t.TempDir() // a saved_model.pb without a meta graph
	if err := os.MkdirAll(filepath.Join(badPB, "entry", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(badPB, "entry", "1", "saved_model.pb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	zkArg := "--zk_servers=127.0.0.1:2181"
	tests := []struct {
		name       string
		args       []string
		dialErr    error
		declFirst  bool // the model is declared before the command
		wantExit   int
		wantStdout string
		wantStderr string
		wantDialed bool
	}{
		{name: "help", args: []string{"--help"}, wantStdout: "Usage: agentctl"},
		{name: "unsupported cmd", args: []string{zkArg, "--cmd=deploy"}, wantExit: 2, wantStderr: "--cmd"},
		{name: "no zk_servers", args: []string{"--cmd=bzid_info"}, wantExit: 2, wantStderr: "--zk_servers is empty"},
		{name: "bzid with slash", args: []string{zkArg, "--bzid=a/b"}, wantExit: 2, wantStderr: "--bzid"},
		{name: "timeout", args: []string{zkArg, "--timeout=-1s"}, wantExit: 2, wantStderr: "--timeout"},
		{name: "decl needs export_base", args: []string{zkArg, "--cmd=decl"}, wantExit: 2, wantStderr: "decl needs --export_base"},
		{name: "decl arch", args: []string{zkArg, "--cmd=decl", "--export_base=" + export, "--arch=entry_dense"}, wantExit: 2, wantStderr: "only entry + ps"},
		{name: "decl missing export", args: []string{zkArg, "--cmd=decl", "--export_base=/nonexistent/export"}, wantExit: 2, wantStderr: "/nonexistent/export/entry"},
		{name: "decl without model name", args: []string{zkArg, "--cmd=decl", "--export_base=" + noRemote}, wantExit: 2, wantStderr: "Model name is None"},
		{name: "decl of an unreadable saved model", args: []string{zkArg, "--cmd=decl", "--export_base=" + badPB}, wantExit: 2, wantStderr: "saved_model.pb has no meta graph"},
		{name: "pub needs layout", args: []string{zkArg, "--cmd=pub", "--model_name=m:*"}, wantExit: 2, wantStderr: "pub needs --layout and --model_name"},
		{name: "unpub needs model", args: []string{zkArg, "--cmd=unpub", "--layout=l"}, wantExit: 2, wantStderr: "unpub needs"},
		{name: "pub pattern without colon", args: []string{zkArg, "--cmd=pub", "--model_name=test_ffm_model", "--layout=l"}, wantExit: 2, wantStderr: "model_name:sub_graph_pattern"},
		{name: "ZooKeeper unreachable", args: []string{zkArg}, dialErr: errors.New("connection refused"), wantExit: 1, wantStdout: "\n", wantStderr: "connect to ZooKeeper 127.0.0.1:2181: connection refused", wantDialed: true},
		{name: "decl exists", args: []string{zkArg, "--bzid=gip", "--cmd=decl", "--export_base=" + export}, declFirst: true, wantExit: 1, wantStdout: "\n", wantStderr: "test_ffm_model exists and not in overwrite mode", wantDialed: true},
		{name: "decl", args: []string{zkArg, "--bzid=gip", "--cmd=decl", "--export_base=" + export}, wantStdout: "\n", wantDialed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := zkfake.NewServer()
			admin := srv.Client()
			defer admin.Close()
			if tc.declFirst {
				if code := run(tctx(t), []string{zkArg, "--bzid=gip", "--cmd=decl", "--export_base=" + export}, io.Discard, io.Discard,
					func(context.Context, string, *slog.Logger) (zk.Client, error) { return srv.Client(), nil }); code != 0 {
					t.Fatalf("first decl: exit %d", code)
				}
			}
			dialed := false
			dial := func(_ context.Context, servers string, _ *slog.Logger) (zk.Client, error) {
				dialed = true
				if servers != "127.0.0.1:2181" {
					t.Errorf("dialled %q", servers)
				}
				if tc.dialErr != nil {
					return nil, tc.dialErr
				}
				return srv.Client(), nil
			}
			var stdout, stderr bytes.Buffer
			code := run(tctx(t), tc.args, &stdout, &stderr, dial)
			if code != tc.wantExit {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantExit, stderr.String())
			}
			if tc.name == "help" {
				if !strings.Contains(stdout.String(), tc.wantStdout) {
					t.Errorf("help output %q lacks %q", stdout.String(), tc.wantStdout)
				}
			} else if stdout.String() != tc.wantStdout {
				t.Errorf("output %q, want %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.wantStderr)
			}
			if dialed != tc.wantDialed {
				t.Errorf("connected to ZooKeeper: %v, want %v", dialed, tc.wantDialed)
			}
			if tc.name == "decl" {
				if _, _, err := admin.Get(tctx(t), "/gip/saved_models/test_ffm_model/ps_2"); err != nil {
					t.Errorf("decl declared no ps_2: %v", err)
				}
			}
		})
	}
}

// TestLogFormat: every line the command logs on stderr is in the --log_format asked for, those of
// the packages it uses included (they used to log through slog's default text logger beside the
// command's own); the answer stays on stdout.
func TestLogFormat(t *testing.T) {
	f, _ := loadScenario(t)
	export := writeExport(t, f)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			srv := zkfake.NewServer()
			dial := func(context.Context, string, *slog.Logger) (zk.Client, error) { return srv.Client(), nil }
			var stdout, stderr bytes.Buffer
			args := []string{"--zk_servers=127.0.0.1:2181", "--bzid=gip", "--cmd=decl", "--export_base=" + export, "--log_format=" + format}
			if code := run(tctx(t), args, &stdout, &stderr, dial); code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if len(lines) < 2 {
				t.Fatalf("stderr %q: want the declaration's log", stderr.String())
			}
			for _, line := range lines {
				var rec map[string]any
				isJSON := json.Unmarshal([]byte(line), &rec) == nil
				if format == "json" && !isJSON || format == "text" && !strings.HasPrefix(line, "time=") {
					t.Errorf("stderr line not in %s format: %q", format, line)
				}
			}
			for _, want := range []string{"saved models declared", "loading the exported entry graph"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}
