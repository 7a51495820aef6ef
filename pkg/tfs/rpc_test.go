package tfs

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// stubModelService answers from a table and records reloads.
type stubModelService struct {
	servingapis.UnimplementedModelServiceServer
	mu       sync.Mutex
	statuses map[string][]*servingapis.ModelVersionStatus // by model name
	fail     map[string]codes.Code
	reloads  []*servingconfig.ModelServerConfig
	hang     chan struct{}
}

func (s *stubModelService) GetModelStatus(_ context.Context, req *servingapis.GetModelStatusRequest) (*servingapis.GetModelStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := req.GetModelSpec().GetName()
	if c, ok := s.fail[name]; ok {
		return nil, status.Error(c, "boom "+name)
	}
	return &servingapis.GetModelStatusResponse{ModelVersionStatus: s.statuses[name]}, nil
}

func (s *stubModelService) HandleReloadConfigRequest(ctx context.Context, req *servingapis.ReloadConfigRequest) (*servingapis.ReloadConfigResponse, error) {
	if s.hang != nil {
		select {
		case <-s.hang:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	s.reloads = append(s.reloads, req.GetConfig())
	s.mu.Unlock()
	return &servingapis.ReloadConfigResponse{Status: modelconfig.Status(0, nil)}, nil
}

func serveStub(t *testing.T, svc *stubModelService) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	servingapis.RegisterModelServiceServer(srv, svc)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().(*net.TCPAddr).Port
}

func TestPublishStatusAndReload(t *testing.T) {
	stub := &stubModelService{
		statuses: map[string][]*servingapis.ModelVersionStatus{
			"m:ps_0": {{Version: 12, State: servingapis.ModelVersionStatus_AVAILABLE}, {Version: 11, State: servingapis.ModelVersionStatus_END}},
		},
		fail: map[string]codes.Code{"m:ps_2": codes.Unavailable},
	}
	port := serveStub(t, stub)
	env["PORT3"] = strconv.Itoa(port)
	m := newMonitor(t, "deploy_type ps\n")
	env["PORT3"] = "8003"
	m.SetHost("127.0.0.1") // the stub listens on loopback
	if err := m.Connect(); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := "m"
	pm := datadef.PublishMeta{ModelName: &name, SubModels: []datadef.SubModel{
		{Name: "ps_0", Path: "/e/ps_0/12"}, {Name: "ps_1", Path: "/e/ps_1/12"}, {Name: "ps_2", Path: "/e/ps_2/12"}, {Name: "entry", Path: "/e/entry/12"}}}
	got, err := m.PublishStatus(ctx, pm, false)
	if err != nil {
		t.Fatal(err)
	}
	// UNKNOWN is the enum's zero value: text format leaves it out.
	want := map[string]string{
		"m:ps_0": "version: 12\nstate: AVAILABLE\n",
		"m:ps_1": "status {\n  error_code: NOT_FOUND\n  error_message: \"m:ps_1 not found\"\n}\n",
		"m:ps_2": "status {\n  error_code: UNAVAILABLE\n  error_message: \"boom m:ps_2\"\n}\n",
	}
	if len(got) != len(want) {
		t.Fatalf("statuses for %d sub models, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if g := pytext.Format(got[k].Status); g != w {
			t.Errorf("%s: got\n%s\nwant\n%s", k, g, w)
		}
	}

	cfgs, err := m.GenModelConfig([]datadef.PublishMeta{pm}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reload(ctx, "ps", cfgs["ps"]); err != nil {
		t.Fatal(err)
	}
	applied := m.AppliedConfig("ps")
	names := []string{}
	for _, mc := range applied.GetModelConfigList().GetConfig() {
		names = append(names, mc.GetName())
	}
	if len(names) != 4 || names[3] != "default" {
		t.Fatalf("applied config models %v: want the three PS models and the default appended", names)
	}
	if len(stub.reloads) != 1 {
		t.Fatalf("%d reloads", len(stub.reloads))
	}

	// A reload that hangs ends at the deadline.
	stub.hang = make(chan struct{})
	defer close(stub.hang)
	m.ReloadTimeout = 200 * time.Millisecond
	start := time.Now()
	if _, err := m.Reload(ctx, "ps", cfgs["ps"]); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("hanging reload: %v after %v", err, time.Since(start))
	}
}
