package faketfs

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

// rpcTimeout bounds every RPC of the tests.
const rpcTimeout = 5 * time.Second

// goroutines returns the stacks of the goroutines that belong to gRPC or to this package, by
// goroutine header, leaving out the calling goroutine.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 { // the caller
			continue
		}
		if !strings.Contains(g, "google.golang.org/grpc") && !strings.Contains(g, "faketfs.(*") {
			continue
		}
		header, _, _ := strings.Cut(g, " [")
		out[header] = g
	}
	return out
}

// checkLeaks returns a function that fails t if goroutines of gRPC or of this package started after
// checkLeaks are still running (it waits up to 5 s for them to end).
func checkLeaks(t testing.TB) func() {
	t.Helper()
	before := goroutines()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var leaked []string
			for id, stack := range goroutines() {
				if _, ok := before[id]; !ok {
					leaked = append(leaked, stack)
				}
			}
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines leaked after Stop:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// fixture is a started fake with clients connected over loopback.
type fixture struct {
	srv  *Server
	conn *grpc.ClientConn
	ms   servingapis.ModelServiceClient
	ps   servingapis.PredictionServiceClient
}

// start starts a fake serving cfg and connects to it; the cleanup closes the connection, stops the
// server and checks that no goroutine is left behind.
func start(t testing.TB, cfg *servingconfig.ModelServerConfig, opts Options) *fixture {
	t.Helper()
	leaks := checkLeaks(t)
	srv, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("close conn: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		leaks()
	})
	return &fixture{srv: srv, conn: conn, ms: servingapis.NewModelServiceClient(conn), ps: servingapis.NewPredictionServiceClient(conn)}
}

func (f *fixture) status(t testing.TB, spec *servingapis.ModelSpec) []*servingapis.ModelVersionStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := f.ms.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: spec})
	if err != nil {
		t.Fatalf("GetModelStatus(%v): %v", spec, err)
	}
	return resp.GetModelVersionStatus()
}

func (f *fixture) reload(t testing.TB, configs ...*servingconfig.ModelConfig) *servingapis.ReloadConfigResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := f.ms.HandleReloadConfigRequest(ctx, &servingapis.ReloadConfigRequest{Config: serverConfig(configs...)})
	if err != nil {
		t.Fatalf("HandleReloadConfigRequest: %v", err)
	}
	return resp
}

// states returns "version:STATE" for every status of the model (or the NOT_FOUND status).
func (f *fixture) states(t testing.TB, name string) []string {
	t.Helper()
	var out []string
	for _, s := range f.status(t, spec(name)) {
		if s.GetStatus().GetErrorCode() != 0 {
			out = append(out, s.GetStatus().GetErrorCode().String()+": "+s.GetStatus().GetErrorMessage())
			continue
		}
		out = append(out, strconv.FormatInt(s.GetVersion(), 10)+":"+s.GetState().String())
	}
	return out
}

func spec(name string) *servingapis.ModelSpec {
	return modelconfig.ModelSpec(name, modelconfig.Version{}, nil)
}

func specVersion(name string, v int64) *servingapis.ModelSpec {
	return modelconfig.ModelSpec(name, modelconfig.Version{Number: &v}, nil)
}

func specLabel(name, label string) *servingapis.ModelSpec {
	return modelconfig.ModelSpec(name, modelconfig.Version{Label: &label}, nil)
}

func mustConfig(t testing.TB, name, basePath, policy string, data modelconfig.VersionData, labels map[string]int64) *servingconfig.ModelConfig {
	t.Helper()
	mc, err := modelconfig.ModelConfig(name, basePath, policy, data, labels)
	if err != nil {
		t.Fatalf("ModelConfig: %v", err)
	}
	return mc
}

func latest(t testing.TB, name string, n int64) *servingconfig.ModelConfig {
	return mustConfig(t, name, "/tmp/"+name, modelconfig.PolicyLatest, modelconfig.VersionData{N: n}, nil)
}

func serverConfig(configs ...*servingconfig.ModelConfig) *servingconfig.ModelServerConfig {
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: configs}}}
}
