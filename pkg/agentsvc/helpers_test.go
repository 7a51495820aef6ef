package agentsvc

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

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
