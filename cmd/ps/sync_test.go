package main

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/ps"
)

// servingPS serves "demo:ps_<index>" of numPS from a model server of this process, its tables
// those of tableConfig (empty, as a fresh export of nothing would be); it returns a client and
// the server's address.
func servingPS(t *testing.T, index, numPS int) (servingapis.PredictionServiceClient, string) {
	t.Helper()
	tables := map[string]*embedding.Table{}
	for name, dim := range map[string]int{"slot_1": 4, "slot_2": 2} {
		c := ps.NewTableConfig(name, dim, &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{LearningRate: proto.Float32(1)}}},
			&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Zeros{Zeros: &initializerpb.ZerosInitializerConfig{}}})
		cfg, _, err := embedding.FromProto(c.GetConfig())
		if err != nil {
			t.Fatal(err)
		}
		if tables[name], err = embedding.New(cfg); err != nil {
			t.Fatal(err)
		}
	}
	sv := psshard.New(&export.PSShard{Manifest: export.PSManifest{ModelName: "demo", Index: index, NumPS: numPS}, Tables: tables})
	s := exporttest.ServeServable(t, "demo:"+export.PSSubGraph(index), sv)
	return exporttest.PredictionClient(t, s.Addr()), s.Addr()
}

// startAgent serves an AgentService whose HeartBeat lists table (agent v3's keys).
func startAgent(t *testing.T, table map[string][]string) string {
	t.Helper()
	svc := agentsvc.NewProviderService(func() map[string][]string { return maps.Clone(table) }, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	agentpb.RegisterAgentServiceServer(gs, svc)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// served is what the serving PS holds for ids of table (dim floats each).
func served(t *testing.T, client servingapis.PredictionServiceClient, table string, ids []int64, dim int) []float32 {
	t.Helper()
	resp, err := client.Predict(context.Background(), &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: "demo:ps_1", SignatureName: psshard.Signature},
		Inputs:    psshard.Request(table, ids)})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(ids)*dim)
	if err := psshard.LookupResult(resp.GetOutputs(), len(ids), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSync: with --sync_model_name the server pushes its updates to the serving replicas of its
// shard, found in --sync_targets or through the agent, and pushes the last ones when it stops.
func TestSync(t *testing.T) {
	tests := []struct {
		name string
		// flags returns the sync flags given the serving replica's address.
		flags func(t *testing.T, addr string) []string
		from  string
		// interval is --sync_interval; with an hour, only the push at the stop can deliver.
		interval time.Duration
	}{
		{"static targets", func(_ *testing.T, addr string) []string { return []string{"--sync_targets=" + addr} }, "to targets ", 50 * time.Millisecond},
		{"agent", func(t *testing.T, addr string) []string {
			return []string{"--sync_agent_addr=" + startAgent(t, map[string][]string{"demo:ps_1": {addr}, "demo:ps_0": {"127.0.0.1:1"}})}
		}, "to the replicas the agent at ", 50 * time.Millisecond},
		{"only the push at the stop", func(_ *testing.T, addr string) []string { return []string{"--sync_targets=" + addr} }, "to targets ", time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			client, addr := servingPS(t, 1, 2)
			args := append([]string{"--table_config=" + writeFile(t, "tables.txt", tableConfig), "--num_ps=2", "--index=1",
				"--sync_model_name=demo", "--sync_interval=" + tc.interval.String()}, tc.flags(t, addr)...)
			s := start(t, args, nil)
			c, err := ps.Dial(s.addr(t), ps.ClientConfig{CallTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			ids := []int64{1, 3, -5}
			if err := c.ApplyGradients(ctx, "slot_1", 4, ids, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, ps.Update{GlobalStep: 1}); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, 12)
			if _, err := c.Lookup(ctx, "slot_1", 4, ids, want); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for tc.interval < time.Hour && !slices.Equal(served(t, client, "slot_1", ids, 4), want) {
				if time.Now().After(deadline) {
					t.Fatalf("the serving replica has %v after 30 s, the server %v", served(t, client, "slot_1", ids, 4), want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			body := s.metrics(t)
			if tc.interval < time.Hour && !strings.Contains(body, `monolith_parameter_sync_pushed_ids_total{target="`+addr+`"} 3`) {
				t.Errorf("/metrics lacks the pushed ids:\n%s", body)
			}
			// An update just before the stop goes with the last push.
			if err := c.ApplyGradients(ctx, "slot_2", 2, []int64{7}, []float32{-1, -1}, ps.Update{GlobalStep: 2}); err != nil {
				t.Fatal(err)
			}
			last := make([]float32, 2)
			if _, err := c.Lookup(ctx, "slot_2", 2, []int64{7}, last); err != nil {
				t.Fatal(err)
			}
			r := s.wait(t)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
			}
			if got := served(t, client, "slot_2", []int64{7}, 2); !slices.Equal(got, last) {
				t.Errorf("after the stop the serving replica has %v for the last update, want %v", got, last)
			}
			if tc.interval == time.Hour && !slices.Equal(served(t, client, "slot_1", ids, 4), want) {
				t.Errorf("after the stop the serving replica has %v, the server had %v", served(t, client, "slot_1", ids, 4), want)
			}
			if !strings.Contains(r.stdout, "parameter sync: pushing the updates of demo:ps_1 every "+tc.interval.String()+" "+tc.from) {
				t.Errorf("stdout:\n%s", r.stdout)
			}
		})
	}
}
