package agentsvc

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// noLeak fails the test if goroutines started during it are still running at its end (gRPC
// transports take a moment to wind down after Stop/Close).
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

// newConf builds an AgentConfig as the reference's AgentConfig(**kwargs) with env as the whole
// environment.
func newConf(t testing.TB, env map[string]string, set func(*utilsspec.AgentConfig)) *agentconf.AgentConfig {
	t.Helper()
	fields := utilsspec.DefaultAgentConfig()
	set(&fields)
	conf, err := agentconf.New(fields, agentconf.Options{Env: agentconf.MapEnv(env), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

func strp(s string) *string { return &s }

// wantStatus checks err is a gRPC status with code and a message containing msg.
func wantStatus(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Errorf("error %v, want status %s containing %q", err, code, msg)
	}
}

func bg() context.Context { return context.Background() }

// fieldsT is the generated AgentConfig fields struct newConf's callback fills.
type fieldsT = utilsspec.AgentConfig
