package modelserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
)

// testServable answers its signature with its model's name and version; Predict can be held.
type testServable struct {
	src    Source
	hold   chan struct{} // when set, Predict waits for it to close
	closed atomic.Bool
	// predicting is closed when a Predict has started (once).
	predicting chan struct{}
	once       sync.Once
}

func (s *testServable) Signatures() map[string]*tfprotobuf.SignatureDef {
	return map[string]*tfprotobuf.SignatureDef{DefaultSignature: {
		MethodName: PredictMethod,
		Outputs: map[string]*tfprotobuf.TensorInfo{
			"version": {Dtype: tfframework.DataType_DT_INT64},
			"model":   {Dtype: tfframework.DataType_DT_STRING},
		},
	}}
}

func (s *testServable) Predict(ctx context.Context, _ string, _ map[string]*tfframework.TensorProto) (map[string]*tfframework.TensorProto, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("predict on a closed servable %s/%d", s.src.Model, s.src.Version)
	}
	s.once.Do(func() { close(s.predicting) })
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return map[string]*tfframework.TensorProto{
		"version": tensors.FromInt64s([]int64{s.src.Version}, 1),
		"model":   tensors.FromStrings([][]byte{[]byte(s.src.Model)}, 1),
	}, nil
}

func (s *testServable) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("servable %s/%d closed twice", s.src.Model, s.src.Version)
	}
	return nil
}

// testLoader loads testServables; per directory it can hold the load (gates) or fail it.
type testLoader struct {
	mu       sync.Mutex
	gates    map[string]chan struct{} // dir -> closed when the load may finish
	fail     map[string][]error       // dir -> errors of the next attempts
	calls    map[string]int
	loaded   map[string]*testServable
	holdNext chan struct{} // Predict hold of the servables loaded from now on
}

func newTestLoader() *testLoader {
	return &testLoader{gates: map[string]chan struct{}{}, fail: map[string][]error{}, calls: map[string]int{}, loaded: map[string]*testServable{}}
}

func (l *testLoader) gate(dir string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := make(chan struct{})
	l.gates[dir] = g
	return g
}

func (l *testLoader) failWith(dir string, errs ...error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail[dir] = errs
}

func (l *testLoader) callsOf(dir string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[dir]
}

func (l *testLoader) servable(dir string) *testServable {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded[dir]
}

func (l *testLoader) load(ctx context.Context, src Source) (Servable, error) {
	l.mu.Lock()
	l.calls[src.Dir]++
	g := l.gates[src.Dir]
	var err error
	if errs := l.fail[src.Dir]; len(errs) > 0 {
		err, l.fail[src.Dir] = errs[0], errs[1:]
	}
	l.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	s := &testServable{src: src, hold: l.holdNext, predicting: make(chan struct{})}
	l.mu.Lock()
	l.loaded[src.Dir] = s
	l.mu.Unlock()
	return s, nil
}

func (l *testLoader) loaders() Loaders { return Loaders{KindPS: l.load, KindEntry: l.load} }

// mkVersions creates version directories under base.
func mkVersions(t *testing.T, base string, versions ...int64) {
	t.Helper()
	for _, v := range versions {
		if err := os.MkdirAll(filepath.Join(base, strconv.FormatInt(v, 10)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func modelConfig(t *testing.T, name, base, policy string, versions ...int64) *servingconfig.ModelConfig {
	t.Helper()
	data := modelconfig.VersionData{N: 1}
	switch {
	case policy == modelconfig.PolicySpecific:
		data = modelconfig.VersionData{List: versions, IsList: true}
	case len(versions) == 1:
		data = modelconfig.VersionData{N: versions[0]}
	}
	mc, err := modelconfig.ModelConfig(name, base, policy, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// states is a model's version states, "1:AVAILABLE 2:LOADING" (newest first, as Status lists
// them), or the error.
func states(m *Manager, name string) string {
	list, err := m.Status(&servingapis.ModelSpec{Name: name})
	if err != nil {
		return "error: " + err.Error()
	}
	out := ""
	for i, s := range list {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%d:%s", s.GetVersion(), s.GetState())
	}
	return out
}

// waitStates waits (at most 10 s: loads run in goroutines) until the model's states are want.
func waitStates(t *testing.T, m *Manager, name, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := states(m, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: states %q, want %q", name, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func closeManager(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Error(err)
	}
}

// startServer starts a server of cfg on loopback and returns a connection to it; both stop when
// the test ends.
func startServer(t *testing.T, cfg *servingconfig.ModelServerConfig, opts Options) (*Server, *grpc.ClientConn) {
	t.Helper()
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn
}

func configOf(models ...*servingconfig.ModelConfig) *servingconfig.ModelServerConfig {
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: models}}}
}

func rpcCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
