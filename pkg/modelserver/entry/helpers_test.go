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

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
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
func entryServer(t testing.TB, base, name string, cfg Config) (*modelserver.Server, servingapis.PredictionServiceClient) {
	t.Helper()
	l := NewLoader(cfg)
	t.Cleanup(l.Close) // after the server's stop (cleanups run last first)
	ms := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: psshard.Load, modelserver.KindEntry: l.Load},
		exporttest.ModelConfig(t, name+":entry", filepath.Join(base, export.EntrySubGraph)))
	return ms, exporttest.PredictionClient(t, ms.Addr())
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
