package exporttest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver"
)

// ModelConfig is the config of the model name serving base's newest version.
func ModelConfig(t testing.TB, name, base string) *servingconfig.ModelConfig {
	t.Helper()
	mc, err := modelconfig.ModelConfig(name, base, modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// StartModelServer serves models on loopback with loaders (the caller's: this package imports no
// loader, so the loaders' own tests can use it); it returns once every model is available, and the
// server stops when the test ends (within 10 s).
func StartModelServer(t testing.TB, loaders modelserver.Loaders, models ...*servingconfig.ModelConfig) *modelserver.Server {
	t.Helper()
	s, err := modelserver.New(&servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: models}}},
		modelserver.Options{Manager: modelserver.ManagerOptions{Loaders: loaders}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	for _, mc := range models {
		WaitAvailable(t, s.Manager(), mc.GetName())
	}
	return s
}

// ServeServable serves sv as version 1 of the PS sub-graph model name (a "<model>:ps_<i>" name),
// as StartModelServer does.
func ServeServable(t testing.TB, name string, sv modelserver.Servable) *modelserver.Server {
	t.Helper()
	base := filepath.Join(t.TempDir(), name[strings.LastIndexByte(name, ':')+1:]) // <export_base>/ps_<i>
	if err := os.MkdirAll(filepath.Join(base, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	return StartModelServer(t, modelserver.Loaders{
		modelserver.KindPS: func(context.Context, modelserver.Source) (modelserver.Servable, error) { return sv, nil }},
		ModelConfig(t, name, base))
}

// WaitAvailable waits until model name is available on m, failing the test when its load ends
// otherwise or it is not available within 30 s.
func WaitAvailable(t testing.TB, m *modelserver.Manager, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := m.Status(&servingapis.ModelSpec{Name: name})
		if err == nil && len(list) > 0 {
			switch list[0].GetState() {
			case modelserver.StateAvailable:
				return
			case modelserver.StateEnd:
				t.Fatalf("%s ended: %s", name, list[0].GetStatus().GetErrorMessage())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not available: %v %v", name, list, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PredictionClient is a client of the PredictionService at addr, closed when the test ends.
func PredictionClient(t testing.TB, addr string) servingapis.PredictionServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return servingapis.NewPredictionServiceClient(conn)
}
