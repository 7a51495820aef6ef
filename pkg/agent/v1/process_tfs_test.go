package agentv1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentbase "github.com/monolith-go/monolith/pkg/agent/base"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestTFSNodeBinaryAndDir: a TF Serving node takes its binary from $MONOLITH_TFS_BINARY, runs
// from any working directory (in the binary's directory when the serving host's bin directory
// does not exist), and a missing binary fails the start with what was looked for. (It used to
// run /opt/tiger/monolith_serving/bin/tensorflow_model_server in that directory, and die on
// chdir off a serving host.)
func TestTFSNodeBinaryAndDir(t *testing.T) {
	leakcheck.Check(t)
	noChildren(t)
	wd := t.TempDir()
	t.Chdir(wd)
	binDir := t.TempDir()
	out := filepath.Join(t.TempDir(), "pwd")
	tfs := filepath.Join(binDir, "tensorflow_model_server")
	if err := os.WriteFile(tfs, []byte("#!/bin/sh\npwd > "+out+"\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(binDir, "missing")
	conf := newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps") })

	tests := []struct {
		name    string
		env     []string
		wantErr string // "" : the node starts
	}{
		{"from $MONOLITH_TFS_BINARY", []string{"PATH=/usr/bin:/bin", agentbase.TFSBinaryEnv + "=" + tfs}, ""},
		{"missing", []string{"PATH=/usr/bin:/bin", agentbase.TFSBinaryEnv + "=" + missing},
			"start PS: TF Serving binary not found: $MONOLITH_TFS_BINARY=" + missing + " does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := NewNodeFromConfig(conf, PS, NodeOptions{Env: tc.env, ConfigFile: "/c", Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if bin := strings.Fields(n.Cmd())[0]; tc.wantErr == "" && bin != tfs || tc.wantErr != "" && bin != missing {
				t.Errorf("command %q, want it to run the binary $MONOLITH_TFS_BINARY names", n.Cmd())
			}
			err = n.start(tctx(t, 10*time.Second))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || errkind.Of(err) != errkind.NotFound {
					n.Kill()
					t.Fatalf("start: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer n.Kill()
			want := binDir
			if st, err := os.Stat(agentbase.BinDir); err == nil && st.IsDir() {
				want = agentbase.BinDir
			}
			waitFor(t, 10*time.Second, "the process to write its directory", func() bool {
				b, _ := os.ReadFile(out)
				return strings.TrimSpace(string(b)) == want
			})
			if now, _ := os.Getwd(); now != wd {
				t.Errorf("the agent's working directory changed to %s", now)
			}
		})
	}
}
