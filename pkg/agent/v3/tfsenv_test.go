package agentv3

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestTFSEnvironmentHasAgentPort: TF Serving (a real process: a script recording its environment,
// then fake_tfs) runs with PORT2 = agent_port, where the entry of cmd/model_server (and Monolith's)
// finds the agent's HeartBeat, whatever PORT2 the agent itself had; the rest of the agent's
// environment is passed on. (Agent v3 gave TF Serving its own environment unchanged, so an entry
// it served could not find its PS replicas.)
func TestTFSEnvironmentHasAgentPort(t *testing.T) {
	tests := []struct {
		name  string
		port2 string // the agent's own PORT2; "" unset
	}{
		{"agent without PORT2", ""},
		{"agent with another PORT2", "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			if tc.port2 == "" {
				t.Setenv(AgentPortEnv, "") // restored after the test
				os.Unsetenv(AgentPortEnv)
			} else {
				t.Setenv(AgentPortEnv, tc.port2)
			}
			t.Setenv("MONOLITH_TFSENV_TEST", "kept")
			dir := t.TempDir()
			envFile := filepath.Join(dir, "env.txt")
			bin := filepath.Join(dir, "tfs.sh")
			script := fmt.Sprintf("#!/bin/sh\nenv > %s.tmp && mv %s.tmp %s\nexec %s \"$@\"\n", envFile, envFile, envFile, faketfsbin.Path(t))
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			srv := zkfake.NewServer()
			agentZK := srv.Client()
			defer agentZK.Close()
			// No agent_port and no PORT2 in the config's environment: a free port, which TF
			// Serving's environment must carry.
			conf := testConfig(t, nil, nil)
			a, err := New(conf, Options{ZK: agentZK, Host: "127.0.0.1", TFSBinary: bin, ModelConfigDir: dir,
				TFSLog: filepath.Join(dir, "tfs.log"), Logger: quiet, TFSStopGrace: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(tctx(t)); err != nil {
				t.Fatal(err)
			}
			defer a.Stop(context.Background())
			var env []string
			eventually(t, "TF Serving's environment file", func() bool {
				data, err := os.ReadFile(envFile)
				env = strings.Split(string(data), "\n")
				return err == nil
			})
			want := AgentPortEnv + "=" + strconv.Itoa(*conf.AgentPort)
			var port2 []string
			for _, kv := range env {
				if strings.HasPrefix(kv, AgentPortEnv+"=") {
					port2 = append(port2, kv)
				}
			}
			if !slices.Equal(port2, []string{want}) {
				t.Errorf("TF Serving's PORT2: %v, want [%s]", port2, want)
			}
			if !slices.Contains(env, "MONOLITH_TFSENV_TEST=kept") {
				t.Errorf("TF Serving's environment lacks the agent's MONOLITH_TFSENV_TEST: %v", env)
			}
		})
	}
}
