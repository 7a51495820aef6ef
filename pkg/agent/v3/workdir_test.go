package agentv3

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestRunsOutsideSourceTree: started from a directory outside any source tree, with only
// $MONOLITH_TFS_BINARY set and the model config directory given relative to it, the agent runs
// TF Serving (a real process: fake_tfs) and serves; its own working directory does not change.
// (It used to fall back to /opt/tiger/monolith_serving as TF Serving's directory and fail on
// chdir.)
func TestRunsOutsideSourceTree(t *testing.T) {
	leakcheck.Check(t)
	bin := faketfsbin.Path(t) // before Chdir: it may build the binary in this module
	wd := t.TempDir()
	t.Chdir(wd)
	if err := os.Mkdir("configs", 0o755); err != nil {
		t.Fatal(err)
	}
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	defer agentZK.Close()
	defer ctl.Close()
	conf := testConfig(t, map[string]string{TFSBinaryEnv: bin}, nil)
	a, err := New(conf, Options{ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: "configs", TFSLog: "tfs.log", Logger: quiet,
		ReloadBackoff: 5 * time.Millisecond, ReloadBackoffMax: 50 * time.Millisecond, TFSStopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(a.ModelConfigFile()) {
		t.Errorf("model config file %s is relative: TF Serving runs in another directory", a.ModelConfigFile())
	}
	if err := a.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	declare(t, ctl, "m", ptr("latest"), "entry")
	publish(t, ctl, "m", "entry")
	eventually(t, "m:entry AVAILABLE", func() bool {
		rep := a.Status(context.Background())
		return len(rep.Models) == 1 && rep.Models[0].State == "AVAILABLE" && slices.Equal(rep.Bound, []string{"m:entry"})
	})
	if now, _ := os.Getwd(); now != wd {
		t.Errorf("the agent's working directory changed to %s", now)
	}
}

// TestTFSBinaryNotFound: a TF Serving binary that cannot be found fails New with an error saying
// what was looked for, $MONOLITH_TFS_BINARY included, and leaves nothing behind.
func TestTFSBinaryNotFound(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "bin", "tensorflow_model_server")
	defer func(saved string) { defaultTFSBinary = saved }(defaultTFSBinary)
	defaultTFSBinary = missing
	tests := []struct {
		name string
		env  map[string]string
		opt  string
		want string
	}{
		{"nothing set", nil, "", "TF Serving binary not found: $MONOLITH_TFS_BINARY is unset and " + missing + " does not exist"},
		{"environment", map[string]string{TFSBinaryEnv: missing + "_env"}, "",
			"TF Serving binary not found: $MONOLITH_TFS_BINARY=" + missing + "_env does not exist"},
		{"option", nil, missing + "_opt", "TF Serving binary not found: --tfs_binary " + missing + "_opt does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfgDir := t.TempDir()
			_, err := New(testConfig(t, tc.env, nil), Options{TFSBinary: tc.opt, TFSBinaryFrom: "--tfs_binary", ModelConfigDir: cfgDir, Logger: quiet})
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.NotFound {
				t.Fatalf("New: %v (kind %v), want an error containing %q", err, errkind.Of(err), tc.want)
			}
			if left, _ := os.ReadDir(cfgDir); len(left) != 0 {
				t.Errorf("files left: %v", left)
			}
		})
	}
}
