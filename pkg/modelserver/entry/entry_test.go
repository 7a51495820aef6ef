package entry

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
)

// served is a trained model, exported and served: each PS shard by its own model servers (replicas
// of a shard), the entry by another, the replicas listed by an agent.
type served struct {
	job    *exporttest.Job
	base   string
	ps     [][]*modelserver.Server // ps[shard][replica]
	agent  *agent
	entry  *modelserver.Server
	client servingapis.PredictionServiceClient
}

// serve trains and exports a model onto numPS shards and serves it with replicas model servers per
// shard.
func serve(t testing.TB, numPS, replicas int, cfg Config) *served {
	t.Helper()
	ctx := tctx(t)
	s := &served{job: exporttest.NewJob(t, 2, []int{16, 8})}
	s.job.Train(ctx, 30)
	s.base = filepath.Join(t.TempDir(), "demo")
	s.job.Export(ctx, s.base, numPS)
	table := map[string][]string{}
	for i := range numPS {
		sub := export.PSSubGraph(i)
		var shard []*modelserver.Server
		for range replicas {
			ms := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: psshard.Load},
				exporttest.ModelConfig(t, "demo:"+sub, filepath.Join(s.base, sub)))
			shard = append(shard, ms)
			table["demo:"+sub] = append(table["demo:"+sub], ms.Addr())
		}
		s.ps = append(s.ps, shard)
	}
	s.agent = startAgent(t, table)
	if cfg.Replicas == nil {
		cfg.Replicas = agentReplicas(t, s.agent)
	}
	s.entry, s.client = entryServer(t, s.base, "demo", cfg)
	return s
}

func predict(ctx context.Context, c servingapis.PredictionServiceClient, name string, t *tfframework.TensorProto) (*servingapis.PredictResponse, error) {
	return c.Predict(ctx, &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"}, Inputs: map[string]*tfframework.TensorProto{name: t}})
}

func marshalAll[M proto.Message](t testing.TB, msgs []M) [][]byte {
	t.Helper()
	out, err := instance.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPredictionsEqualTheTrainer: the entry's scores, its embeddings looked up on the PS
// sub-graphs over gRPC, are the trainer's predictions for the same examples and checkpoint
// (within 1e-6: the float32 of the trainer's float64), whatever the input format and batch size,
// also on an export re-sharded onto 3 PS sub-graphs.
func TestPredictionsEqualTheTrainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		numPS int
	}{
		{"2 ps", 2},
		{"exported onto 3 ps", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := tctx(t)
			s := serve(t, tc.numPS, 1, Config{})
			for _, n := range []int{1, 64} {
				examples := s.job.Examples(9, n)
				want := s.job.Predict(ctx, examples)
				eb := exampleBatch(examples)
				insts, err := instance.ExampleBatchToInstances(eb)
				if err != nil {
					t.Fatal(err)
				}
				ebBytes, _ := proto.Marshal(eb)
				for _, in := range []struct {
					name   string
					tensor *tfframework.TensorProto
				}{
					{InputExamples, instance.MakeTensorProto(marshalAll(t, examples))},
					{InputExampleBatch, instance.MakeTensorProto([][]byte{ebBytes})},
					{InputInstances, instance.MakeTensorProto(marshalAll(t, insts))},
				} {
					resp, err := predict(ctx, s.client, in.name, in.tensor)
					if err != nil {
						t.Fatalf("batch %d, %s: %v", n, in.name, err)
					}
					got, err := tensors.Float32s(resp.GetOutputs()[OutputScores])
					if err != nil || len(got) != n {
						t.Fatalf("batch %d, %s: scores %v, %v", n, in.name, got, err)
					}
					for i := range got {
						if math.Abs(float64(got[i])-want[i]) > 1e-6 {
							t.Errorf("batch %d, %s: example %d scored %v, the trainer %v", n, in.name, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestBadInputs: inputs the signature refuses are INVALID_ARGUMENT, naming what is wrong.
func TestBadInputs(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	s := serve(t, 2, 1, Config{})
	examples := s.job.Examples(9, 2)
	noDense := proto.Clone(examples[0]).(*examplepb.Example)
	noDense.NamedFeature = noDense.NamedFeature[1:] // the dense feature is first
	badSlot := proto.Clone(examples[0]).(*examplepb.Example)
	badSlot.NamedFeature[1].Feature = &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{9<<48 | 1}}}}
	shortDense := proto.Clone(examples[0]).(*examplepb.Example)
	shortDense.NamedFeature[0].Feature = &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: []float32{1}}}}
	ok := instance.MakeTensorProto(marshalAll(t, examples))
	tests := []struct {
		name   string
		inputs map[string]*tfframework.TensorProto
		want   string
	}{
		{"no dense feature", map[string]*tfframework.TensorProto{InputExamples: instance.MakeTensorProto(marshalAll(t, []*examplepb.Example{noDense}))}, `no float feature "dense"`},
		{"short dense feature", map[string]*tfframework.TensorProto{InputExamples: instance.MakeTensorProto(marshalAll(t, []*examplepb.Example{shortDense}))}, "has 1 values, the model takes 4"},
		{"fid of another slot", map[string]*tfframework.TensorProto{InputExamples: instance.MakeTensorProto(marshalAll(t, []*examplepb.Example{badSlot}))}, "slot 9"},
		{"unknown input", map[string]*tfframework.TensorProto{"x": ok}, "input tensor alias not found in signature: x"},
		{"two inputs", map[string]*tfframework.TensorProto{InputExamples: ok, InputInstances: ok}, "give one"},
		{"no input", map[string]*tfframework.TensorProto{}, "no input"},
		{"not an example", map[string]*tfframework.TensorProto{InputExamples: instance.MakeTensorProto([][]byte{{0xff, 0xff}})}, "parse Example"},
		{"not strings", map[string]*tfframework.TensorProto{InputExamples: tensors.FromInt64s([]int64{1}, 1)}, "DT_INT64"},
		{"no example", map[string]*tfframework.TensorProto{InputExamples: instance.MakeTensorProto(nil)}, "no example"},
		{"short example batch", map[string]*tfframework.TensorProto{InputExampleBatch: instance.MakeTensorProto([][]byte{func() []byte {
			eb := exampleBatch(examples)
			eb.BatchSize = 5
			b, _ := proto.Marshal(eb)
			return b
		}()})}, "batch_size is 5"},
	}
	for _, tc := range tests {
		_, err := s.client.Predict(ctx, &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"}, Inputs: tc.inputs})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT with %q", tc.name, err, tc.want)
		}
	}
}

// hangingPS is a PS replica that takes lookups and never answers.
type hangingPS struct {
	servingapis.UnimplementedPredictionServiceServer
	calls   atomic.Int32
	started chan struct{}
}

func (h *hangingPS) Predict(ctx context.Context, _ *servingapis.PredictRequest) (*servingapis.PredictResponse, error) {
	if h.calls.Add(1) == 1 {
		close(h.started)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func startHangingPS(t *testing.T) (*hangingPS, *grpc.Server, string) {
	t.Helper()
	h := &hangingPS{started: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	servingapis.RegisterPredictionServiceServer(gs, h)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return h, gs, lis.Addr().String()
}

// TestReplicaGoesAwayMidRequest: a PS replica that holds a lookup and then goes away (its
// connection closes) makes the entry retry on the shard's other replica at once: the request
// succeeds, long before the attempt's timeout.
func TestReplicaGoesAwayMidRequest(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	h, gs, hangAddr := startHangingPS(t)
	s := serve(t, 2, 1, Config{Timeout: 30 * time.Second, Retries: 1, Replicas: StaticReplicas{}})
	// The replica that hangs comes first for both shards (static replicas are tried in order): the
	// entry's first attempts go to it.
	replicas := StaticReplicas{"demo:ps_0": {hangAddr, s.ps[0][0].Addr()}, "demo:ps_1": {hangAddr, s.ps[1][0].Addr()}}
	_, client := entryServer(t, s.base, "demo", Config{Timeout: 30 * time.Second, Retries: 1, Replicas: replicas})
	examples := s.job.Examples(9, 8)
	want := s.job.Predict(ctx, examples)
	done := make(chan error, 1)
	var resp *servingapis.PredictResponse
	start := time.Now()
	go func() {
		var err error
		resp, err = predict(ctx, client, InputExamples, instance.MakeTensorProto(marshalAll(t, examples)))
		done <- err
	}()
	<-h.started
	gs.Stop() // the replica goes away with the lookups in flight
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Predict with a replica gone: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Predict hung after its replica went away")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v: the retry waited for the attempt's timeout", took)
	}
	got, _ := tensors.Float32s(resp.GetOutputs()[OutputScores])
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > 1e-6 {
			t.Errorf("example %d scored %v, the trainer %v", i, got[i], want[i])
		}
	}
}

// TestHungReplica: a replica that never answers costs one attempt's timeout, then the other
// replica answers; with no other replica the request fails within its bounds, naming the shard.
func TestHungReplica(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	_, _, hangAddr := startHangingPS(t)
	s := serve(t, 2, 1, Config{Replicas: StaticReplicas{}})
	examples := instance.MakeTensorProto(marshalAll(t, s.job.Examples(9, 4)))
	tests := []struct {
		name     string
		replicas StaticReplicas
		retries  int
		wantCode codes.Code
	}{
		{"retried on the good replica", StaticReplicas{"demo:ps_0": {hangAddr, s.ps[0][0].Addr()}, "demo:ps_1": {hangAddr, s.ps[1][0].Addr()}}, 1, codes.OK},
		{"no good replica", StaticReplicas{"demo:ps_0": {hangAddr}, "demo:ps_1": {s.ps[1][0].Addr()}}, 2, codes.Unavailable},
		{"shard unknown", StaticReplicas{"demo:ps_1": {s.ps[1][0].Addr()}}, 2, codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 200 * time.Millisecond
			_, client := entryServer(t, s.base, "demo", Config{Timeout: timeout, Retries: tc.retries, Replicas: tc.replicas})
			start := time.Now()
			_, err := predict(ctx, client, InputExamples, examples)
			took := time.Since(start)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("Predict: %v, want %v", err, tc.wantCode)
			}
			if err != nil && !strings.Contains(err.Error(), "demo:ps_0") {
				t.Errorf("the error does not name the shard: %v", err)
			}
			// Bounded: (retries+1) attempts of timeout each, with generous room for a loaded machine.
			if limit := time.Duration(tc.retries+1)*timeout + 5*time.Second; took > limit {
				t.Errorf("took %v, more than %v", took, limit)
			}
		})
	}
	t.Run("client deadline", func(t *testing.T) {
		_, client := entryServer(t, s.base, "demo", Config{Timeout: time.Hour, Retries: 5, Replicas: StaticReplicas{"demo:ps_0": {hangAddr}, "demo:ps_1": {hangAddr}}})
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := predict(dctx, client, InputExamples, examples)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("Predict past the client's deadline: %v", err)
		}
	})
}

// TestAgentReplicas: the entry finds the replicas through the agent's HeartBeat (v3's
// "<model>:ps_<i>" keys, or v1's "ps:<i>"), asks again when a shard is missing, and a replica
// added later is found without waiting for the next beat.
func TestAgentReplicas(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	s := serve(t, 2, 1, Config{})
	examples := instance.MakeTensorProto(marshalAll(t, s.job.Examples(9, 4)))
	if _, err := predict(ctx, s.client, InputExamples, examples); err != nil {
		t.Fatal(err)
	}
	// Agent v1's keys.
	s.agent.set(map[string][]string{"ps:0": {s.ps[0][0].Addr()}, "ps:1": {s.ps[1][0].Addr()}})
	_, c1 := entryServer(t, s.base, "demo", Config{Replicas: agentReplicas(t, s.agent)})
	if _, err := predict(ctx, c1, InputExamples, examples); err != nil {
		t.Fatalf("with agent v1's keys: %v", err)
	}
	// A shard missing, then listed: the first request fails naming what the agent lists, the
	// next one (after MinRefresh) finds it.
	s.agent.set(map[string][]string{"demo:ps_0": {s.ps[0][0].Addr()}})
	r := agentReplicas(t, s.agent)
	_, c2 := entryServer(t, s.base, "demo", Config{Replicas: r, Retries: -1})
	_, err := predict(ctx, c2, InputExamples, examples)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no replica of demo:ps_1") || !strings.Contains(err.Error(), "demo:ps_0") {
		t.Errorf("with ps_1 missing: %v", err)
	}
	s.agent.set(map[string][]string{"demo:ps_0": {s.ps[0][0].Addr()}, "demo:ps_1": {s.ps[1][0].Addr()}})
	time.Sleep(20 * time.Millisecond)
	if _, err := predict(ctx, c2, InputExamples, examples); err != nil {
		t.Errorf("after ps_1 appeared: %v", err)
	}
}

// TestNoAgent: an agent that does not answer fails the requests promptly with UNAVAILABLE naming
// it; an entry with no way to find replicas does not load.
func TestNoAgent(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	r, err := NewAgentReplicas(AgentOptions{Addr: dead, Interval: time.Hour, MinRefresh: time.Millisecond, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := serve(t, 2, 1, Config{Replicas: StaticReplicas{}})
	_, client := entryServer(t, s.base, "demo", Config{Replicas: r, Retries: 1})
	start := time.Now()
	_, err = predict(ctx, client, InputExamples, instance.MakeTensorProto(marshalAll(t, s.job.Examples(9, 1))))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), dead) {
		t.Errorf("with the agent down: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}

	l := NewLoader(Config{})
	defer l.Close()
	_, err = l.Load(ctx, modelserver.Source{Model: "demo:entry", Dir: filepath.Join(s.base, "entry", "30")})
	if err == nil || !modelserver.IsPermanent(err) || !strings.Contains(err.Error(), "--agent_addr") {
		t.Errorf("entry without replicas: %v", err)
	}
}

// TestCorruptEntry: an entry whose files are damaged does not load; the error names the file.
func TestCorruptEntry(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := exporttest.NewJob(t, 1, []int{})
	j.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "demo")
	res := j.Export(ctx, base, 1)
	dir := res.Dirs["entry"]
	data := filepath.Join(dir, export.DensePrefix+".data")
	if err := os.WriteFile(data, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := NewLoader(Config{Replicas: StaticReplicas{}})
	defer l.Close()
	_, err := l.Load(ctx, modelserver.Source{Model: "demo:entry", Dir: dir})
	if err == nil || !strings.Contains(err.Error(), dir) || !modelserver.IsPermanent(err) {
		t.Errorf("corrupt dense file: %v", err)
	}
}
