package entry

import (
	"context"
	"maps"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func modelConfig(t testing.TB, name, base string) *servingconfig.ModelConfig {
	t.Helper()
	mc, err := modelconfig.ModelConfig(name, base, modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// modelServer runs a model server of models on loopback with the PS loader and, when given, the
// entry loader; it stops when the test ends (or at stop).
type modelServer struct {
	s    *modelserver.Server
	once sync.Once
}

func startModelServer(t testing.TB, entryLoader *Loader, models ...*servingconfig.ModelConfig) *modelServer {
	t.Helper()
	loaders := modelserver.Loaders{modelserver.KindPS: psshard.Load}
	if entryLoader != nil {
		loaders[modelserver.KindEntry] = entryLoader.Load
	}
	s, err := modelserver.New(&servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: models}}},
		modelserver.Options{Manager: modelserver.ManagerOptions{Loaders: loaders}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ms := &modelServer{s: s}
	t.Cleanup(func() { ms.stop(10 * time.Second) })
	for _, mc := range models {
		waitAvailable(t, s.Manager(), mc.GetName())
	}
	return ms
}

func (m *modelServer) stop(grace time.Duration) {
	m.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		m.s.Stop(ctx)
	})
}

func (m *modelServer) addr() string { return m.s.Addr() }

func waitAvailable(t testing.TB, m *modelserver.Manager, name string) {
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

// agent is an AgentService on loopback answering HeartBeat with a table the test sets, as agent
// v3 does (every saved model, whatever the server type).
type agent struct {
	mu    sync.Mutex
	table map[string][]string
	beats int
	addr  string
}

func startAgent(t testing.TB, table map[string][]string) *agent {
	t.Helper()
	a := &agent{table: table}
	svc := agentsvc.NewProviderService(func() map[string][]string {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.beats++
		return maps.Clone(a.table) // the service reads it after the lock is released
	}, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	agentpb.RegisterAgentServiceServer(gs, svc)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	a.addr = lis.Addr().String()
	return a
}

func (a *agent) set(table map[string][]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.table = table
}

func (a *agent) heartbeats() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.beats
}

// agentReplicas asks the test's agent.
func agentReplicas(t testing.TB, a *agent) *AgentReplicas {
	t.Helper()
	r, err := NewAgentReplicas(AgentOptions{Addr: a.addr, Interval: time.Hour, MinRefresh: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// entryServer serves base's entry as "<name>:entry" with an entry loader finding PS replicas with
// replicas.
func entryServer(t testing.TB, base, name string, cfg Config) (*modelServer, servingapis.PredictionServiceClient) {
	t.Helper()
	l := NewLoader(cfg)
	t.Cleanup(l.Close) // after the server's stop (cleanups run last first)
	ms := startModelServer(t, l, modelConfig(t, name+":entry", filepath.Join(base, export.EntrySubGraph)))
	return ms, client(t, ms.addr())
}

func client(t testing.TB, addr string) servingapis.PredictionServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return servingapis.NewPredictionServiceClient(conn)
}

// exampleBatch is examples as one ExampleBatch (column-major: a feature list per feature).
func exampleBatch(examples []*examplepb.Example) *examplepb.ExampleBatch {
	eb := &examplepb.ExampleBatch{BatchSize: int32(len(examples))}
	lists := map[string]*examplepb.NamedFeatureList{}
	for _, ex := range examples {
		for _, nf := range ex.GetNamedFeature() {
			l, ok := lists[nf.GetName()]
			if !ok {
				l = &examplepb.NamedFeatureList{Name: nf.GetName()}
				lists[nf.GetName()] = l
				eb.NamedFeatureList = append(eb.NamedFeatureList, l)
			}
			l.Feature = append(l.Feature, nf.GetFeature())
		}
	}
	return eb
}
