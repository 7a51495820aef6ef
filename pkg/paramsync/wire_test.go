package paramsync

import (
	"bytes"
	"context"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	paramsyncpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/parameter_sync"
	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
)

// TestWire: the messages put their fields under the reference's numbers (proto2: repeated scalars
// unpacked), with its defaults.
func TestWire(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want []byte
	}{
		{"PushRequest", &paramsyncpb.PushRequest{
			ModelName: ptr("m"), SignatureName: ptr("s"), TimeoutInMs: ptr[int64](7),
			DeltaHashTables:      []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{{UniqueId: ptr("t"), DimSize: ptr[int32](2), Fids: []int64{1, 300}, Embeddings: []float32{1}}},
			DeltaMultiHashTables: []*paramsyncpb.PushRequest_DeltaEmbeddingHashTable{{UniqueId: ptr("u")}},
		}, []byte{
			0x0a, 0x01, 'm', // 1: model_name
			0x12, 0x01, 's', // 2: signature_name
			0x1a, 0x0f, // 3: delta_hash_tables
			0x0a, 0x01, 't', // 1: unique_id
			0x10, 0x02, // 2: dim_size
			0x18, 0x01, 0x18, 0xac, 0x02, // 3: fids, unpacked
			0x25, 0x00, 0x00, 0x80, 0x3f, // 4: embeddings, fixed32 1.0
			0x20, 0x07, // 4: timeout_in_ms
			0x2a, 0x03, 0x0a, 0x01, 'u', // 5: delta_multi_hash_tables
		}},
		{"PushResponse", &paramsyncpb.PushResponse{Target: ptr("a:1"), StatusCode: ptr[int32](14), ErrorMessage: ptr("x"), UpdateNum: ptr[int32](3)}, []byte{
			0x08, 0x0e, // 1: status_code
			0x12, 0x01, 'x', // 2: error_message
			0x1a, 0x03, 'a', ':', '1', // 3: target
			0x20, 0x03, // 4: update_num
		}},
		{"ClientConfig", &paramsyncpb.ClientConfig{ModelName: ptr("m"), Targets: []string{"a"}, TargetsExtraInfo: []*paramsyncpb.ClientConfig_TargetExtraInfo{{Idc: ptr("i"), ReplicaId: ptr[int64](2)}}}, []byte{
			0x0a, 0x01, 'm', // 1: model_name
			0x1a, 0x01, 'a', // 3: targets
			0x2a, 0x05, 0x0a, 0x01, 'i', 0x18, 0x02, // 5: targets_extra_info {1: idc, 3: replica_id}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("wire bytes\n got % x\nwant % x", got, tc.want)
			}
		})
	}
	if d := (&paramsyncpb.PushRequest{}).GetTimeoutInMs(); d != 1000 {
		t.Errorf("default timeout_in_ms %d, want 1000", d)
	}
	if d := (&paramsyncpb.ClientConfig_TargetExtraInfo{}).GetReplicaId(); d != -1 {
		t.Errorf("default replica_id %d, want -1", d)
	}
}

// TestAgentTargets: with the AgentService's HeartBeat as Targets (pkg/modelserver/entry's
// AgentReplicas, as cmd/ps uses it), the pushes reach the replicas the agent lists for the
// shard, and a replica added later once the agent lists it.
func TestAgentTargets(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	first, second := startTarget(t), startTarget(t)
	table := map[string][]string{"demo:ps_1": {first.addr}, "demo:ps_0": {"127.0.0.1:1"}}
	agentAddr, setTable := startAgent(t, table)
	reps, err := entry.NewAgentReplicas(entry.AgentOptions{Addr: agentAddr, Interval: time.Hour, MinRefresh: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reps.Close()
	src := newSource(t, map[string]int{"a": 2})
	p := newPusher(t, Config{Source: src, Targets: reps, Shard: 1})
	src.add(t, "a", []int64{1, 3}, 1)
	res, err := p.PushOnce(ctx)
	if err != nil || len(res.Targets) != 1 || res.Targets[0].Addr != first.addr || res.Targets[0].IDs != 2 {
		t.Fatalf("push through the agent's table: %+v, %v", res, err)
	}
	setTable(map[string][]string{"demo:ps_1": {first.addr, second.addr}})
	reps.Failed("") // as a failed push would: ask the agent again
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err = p.PushOnce(ctx) // nothing to push: it only lists the targets
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Targets) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's new replica not among the targets after 10 s: %+v", res)
		}
		time.Sleep(5 * time.Millisecond)
	}
	src.add(t, "a", []int64{5}, 1)
	if res, err = p.PushOnce(ctx); err != nil || len(res.Targets) != 2 || len(second.table("a")) != 1 || len(first.table("a")) != 3 {
		t.Fatalf("push to both replicas: %+v, %v; first has %d ids, second %d", res, err, len(first.table("a")), len(second.table("a")))
	}
}

// startAgent serves an AgentService answering HeartBeat with a table the test sets (agent v3's
// saved model names as keys).
func startAgent(t testing.TB, table map[string][]string) (string, func(map[string][]string)) {
	t.Helper()
	var cur = make(chan map[string][]string, 1)
	cur <- table
	svc := agentsvc.NewProviderService(func() map[string][]string {
		m := <-cur
		cur <- m
		return maps.Clone(m)
	}, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	agentpb.RegisterAgentServiceServer(gs, svc)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), func(m map[string][]string) {
		<-cur
		cur <- m
	}
}

// TestMetrics: the pushes count the ids pushed and failed by target, and the tries.
func TestMetrics(t *testing.T) {
	leakcheck.Check(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registered twice without an error")
	}
	src := newSource(t, map[string]int{"a": 2})
	good := startTarget(t)
	down := downAddr(t)
	p := newPusher(t, Config{Source: src, Targets: StaticTargets{good.addr, down}, Metrics: m, Retries: -1, MaxIDsPerRequest: 4})
	src.add(t, "a", ids(0, 10), 1)
	if _, err := p.PushOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`monolith_parameter_sync_taken_ids_total{table="a"}`:                                 10,
		`monolith_parameter_sync_pushed_ids_total{target="` + good.addr + `"}`:               10,
		`monolith_parameter_sync_failed_ids_total{code="Unavailable",target="` + down + `"}`: 10,
		`monolith_parameter_sync_requests_total{code="OK",target="` + good.addr + `"}`:       3,
		`monolith_parameter_sync_requests_total{code="Unavailable",target="` + down + `"}`:   1,
		`monolith_parameter_sync_request_duration_seconds_count{target="` + good.addr + `"}`: 3,
		`monolith_parameter_sync_targets`:                                                    2,
		`monolith_parameter_sync_push_duration_seconds_count`:                                1,
		`monolith_parameter_sync_retouched_ids_total`:                                        0,
		`monolith_parameter_sync_no_target_total`:                                            0,
	}
	got := gather(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// gather scrapes the registry's text exposition: "name{labels}" -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := map[string]float64{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}
