package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
	"github.com/monolith-go/monolith/pkg/tfs/profile"
)

// loadServer is a PredictionService that records every Predict request it gets, answers after
// delay (or when the request's deadline passes, for hang), and fails the requests fail says to.
type loadServer struct {
	servingapis.UnimplementedPredictionServiceServer
	delay time.Duration
	hang  bool
	fail  func(n int) error

	mu       sync.Mutex
	n        int
	failures map[codes.Code]int
	reqs     []*servingapis.PredictRequest
	first    time.Time
	last     time.Time
}

func (s *loadServer) Predict(ctx context.Context, req *servingapis.PredictRequest) (*servingapis.PredictResponse, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.reqs = append(s.reqs, req)
	s.last = time.Now()
	if n == 1 {
		s.first = s.last
	}
	var err error
	if s.fail != nil {
		err = s.fail(n)
	}
	if err != nil {
		if s.failures == nil {
			s.failures = map[codes.Code]int{}
		}
		s.failures[status.Code(err)]++
	}
	s.mu.Unlock()
	if s.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return &servingapis.PredictResponse{ModelSpec: req.GetModelSpec()}, nil
}

// requests returns the requests so far, the failures by code and the time of the last request.
func (s *loadServer) requests() (int, []*servingapis.PredictRequest, map[codes.Code]int, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := map[codes.Code]int{}
	for c, n := range s.failures {
		f[c] = n
	}
	return s.n, slices.Clone(s.reqs), f, s.last
}

func startLoadServer(t *testing.T, s *loadServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	servingapis.RegisterPredictionServiceServer(g, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

func featureListFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "pkg", "instance", "testdata", "feature_list.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func exampleBatchFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "pkg", "instance", "testdata", "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fixClock makes the random inputs' request time fixed for the test.
func fixClock(t *testing.T) {
	t.Helper()
	saved := now
	now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	t.Cleanup(func() { now = saved })
}

// profileRun runs tfs_client --cmd_type=profile with args, and returns its exit status, stdout,
// stderr and the summary it wrote with --profile_json.
func profileRun(t *testing.T, ctx context.Context, args ...string) (int, string, string, profile.Summary) {
	t.Helper()
	js := filepath.Join(t.TempDir(), "summary.json")
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"--cmd_type=profile", "--model_name=m", "--signature_name=sig", "--profile_json=" + js}, args...), &out, &errb, noEnv)
	var s profile.Summary
	if data, err := os.ReadFile(js); err == nil {
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("summary: %v\n%s", err, data)
		}
	} else if code != 2 {
		t.Fatalf("no summary (exit %d): %v\nstderr: %s", code, err, errb.String())
	}
	return code, out.String(), errb.String(), s
}

// decodeInput checks a request's model spec and returns its input name and the serialized values.
func decodeInput(t *testing.T, req *servingapis.PredictRequest) (string, [][]byte) {
	t.Helper()
	if req.GetModelSpec().GetName() != "m" || req.GetModelSpec().GetSignatureName() != "sig" {
		t.Fatalf("model spec %v, want m / sig", req.GetModelSpec())
	}
	if len(req.GetInputs()) != 1 {
		t.Fatalf("inputs %v", req.GetInputs())
	}
	for name, tensor := range req.GetInputs() {
		if tensor.GetDtype() != tfframework.DataType_DT_STRING || len(tensor.GetTensorShape().GetDim()) != 1 ||
			tensor.GetTensorShape().GetDim()[0].GetSize() != int64(len(tensor.GetStringVal())) {
			t.Fatalf("tensor %v is not a string vector", tensor)
		}
		return name, tensor.GetStringVal()
	}
	return "", nil
}

// checkRandomBatch checks an ExampleBatch the profile made: batch size, the sparse features
// named as wanted with fids of their slot, then line ids and labels.
func checkRandomBatch(t *testing.T, eb *examplepb.ExampleBatch, batchSize int, names []string, slots []int) {
	t.Helper()
	lists := eb.GetNamedFeatureList()
	if int(eb.GetBatchSize()) != batchSize || len(lists) != len(names)+2 {
		t.Fatalf("batch size %d, %d lists; want %d, %d", eb.GetBatchSize(), len(lists), batchSize, len(names)+2)
	}
	for i, name := range names {
		if lists[i].GetName() != name || int(lists[i].GetId()) != slots[i] || len(lists[i].GetFeature()) != batchSize {
			t.Fatalf("list %d: %s (id %d, %d features), want %s (id %d)", i, lists[i].GetName(), lists[i].GetId(), len(lists[i].GetFeature()), name, slots[i])
		}
		for _, f := range lists[i].GetFeature() {
			for _, fid := range f.GetFidV2List().GetValue() {
				if int(fid>>48) != slots[i] {
					t.Fatalf("%s: fid %#x has slot %d", name, fid, fid>>48)
				}
			}
		}
	}
	if lists[len(names)].GetName() != instance.LineIDFeature || lists[len(names)+1].GetName() != instance.LabelFeature {
		t.Fatalf("last lists %s, %s", lists[len(names)].GetName(), lists[len(names)+1].GetName())
	}
}

// modelSpecFile writes an export's entry manifest (cmd/export's format) of a model reading
// dense:4, slot_1 (a table of 3 entries) and slot_2 (50), and returns its path.
func modelSpecFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.json")
	const manifest = `{"format": "monolith-go/export/entry/v1", "model_name": "ctr", "version": 7, "num_ps": 2,
  "model": {"model": "dnn", "sparse_features": [{"name": "slot_1", "slot": 1, "table": "slot_1", "dim": 8, "pooling": "sum"},
    {"name": "slot_2", "slot": 2, "table": "slot_2", "dim": 8, "pooling": "sum"}],
    "dense_features": [{"name": "dense", "dim": 4}], "interaction": "dot", "hidden": [8]},
  "tables": [{"name": "slot_1", "dim": 8, "entries": 3}, {"name": "slot_2", "dim": 8, "entries": 50}]}`
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkModelBatch checks a batch made for modelSpecFile's model: dense with 4 values, one fid of
// slot_1 and slot_2 each with an id of their tables, then line ids and labels.
func checkModelBatch(t *testing.T, eb *examplepb.ExampleBatch, batchSize int) {
	t.Helper()
	lists := eb.GetNamedFeatureList()
	var names []string
	for _, l := range lists {
		names = append(names, l.GetName())
		if len(l.GetFeature()) != batchSize {
			t.Fatalf("%s: %d features, want %d", l.GetName(), len(l.GetFeature()), batchSize)
		}
	}
	if want := []string{"dense", "slot_1", "slot_2", instance.LineIDFeature, instance.LabelFeature}; int(eb.GetBatchSize()) != batchSize || !slices.Equal(names, want) {
		t.Fatalf("batch size %d, lists %v; want %d, %v", eb.GetBatchSize(), names, batchSize, want)
	}
	for i := range batchSize {
		if n := len(lists[0].GetFeature()[i].GetFloatList().GetValue()); n != 4 {
			t.Fatalf("dense[%d]: %d values", i, n)
		}
		for k, entries := range map[int]uint64{1: 3, 2: 50} {
			fids := lists[k].GetFeature()[i].GetFidV2List().GetValue()
			if len(fids) != 1 || fids[0]>>48 != uint64(k) || fids[0]&(1<<48-1) < 1 || fids[0]&(1<<48-1) > entries {
				t.Fatalf("slot_%d[%d]: fids %x, want one of slot %d with an id in 1..%d", k, i, fids, k, entries)
			}
		}
	}
}

// distinct is the set of different input values in reqs, checking the input name.
func distinct(t *testing.T, reqs []*servingapis.PredictRequest, wantName string) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	for _, r := range reqs {
		name, vals := decodeInput(t, r)
		if name != wantName {
			t.Fatalf("input %q, want %q", name, wantName)
		}
		out[string(bytes.Join(vals, []byte{0}))] = vals
	}
	return out
}

func TestProfileSendsTheRightRequests(t *testing.T) {
	leakcheck.Check(t)
	fixClock(t)
	ebFile := exampleBatchFile(t)
	fileBatch, err := instance.ReadExampleBatch(ebFile, instance.FormatPBTxt, instance.Header{})
	if err != nil {
		t.Fatal(err)
	}
	fileBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(fileBatch)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	other := proto.Clone(fileBatch).(*examplepb.ExampleBatch)
	other.NamedFeatureList = other.NamedFeatureList[:1]
	otherBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(ebFile)
	if err != nil {
		t.Fatal(err)
	}
	otherText, err := prototext.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"a.pbtxt": text, "b.pbtxt": otherText} {
		if err := os.WriteFile(filepath.Join(dataDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dataDir, "sub"), 0o755); err != nil { // not an input
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, reqs []*servingapis.PredictRequest)
	}{
		{"random example batches", []string{"--input_type=example_batch", "--batch_size=4", "--slots=1,5,200", "--profile_data_num=3"},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				inputs := distinct(t, reqs, "example_batch")
				if len(inputs) > 3 {
					t.Errorf("%d different inputs, want at most --profile_data_num 3", len(inputs))
				}
				for _, vals := range inputs {
					eb := &examplepb.ExampleBatch{}
					if len(vals) != 1 || proto.Unmarshal(vals[0], eb) != nil {
						t.Fatalf("input %d values", len(vals))
					}
					checkRandomBatch(t, eb, 4, []string{"fc_slot_1", "fc_slot_5", "fc_slot_200"}, []int{1, 5, 200})
				}
			}},
		{"random instances", []string{"--batch_size=3", "--slots=2,7", "--profile_data_num=2"},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				for _, vals := range distinct(t, reqs, "instances") {
					if len(vals) != 3 {
						t.Fatalf("%d instances, want --batch_size 3", len(vals))
					}
					for _, v := range vals {
						inst := &parserpb.Instance{}
						if err := proto.Unmarshal(v, inst); err != nil {
							t.Fatal(err)
						}
						if inst.GetLineId().GetUid()>>48 != 1 || len(inst.GetLabel()) != 1 {
							t.Fatalf("instance %v: want a line id and a label", inst)
						}
						for _, f := range inst.GetFeature() {
							if slot := f.GetFid()[0] >> 48; f.GetName() != fmt.Sprintf("fc_slot_%d", slot) || (slot != 2 && slot != 7) {
								t.Fatalf("feature %s with fid slot %d", f.GetName(), slot)
							}
						}
					}
				}
			}},
		{"random, feature list", []string{"--input_type=example_batch", "--batch_size=2", "--slots=1,219", "--feature_list=" + featureListFile(t), "--profile_data_num=1"},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				for _, vals := range distinct(t, reqs, "example_batch") {
					eb := &examplepb.ExampleBatch{}
					if err := proto.Unmarshal(vals[0], eb); err != nil {
						t.Fatal(err)
					}
					checkRandomBatch(t, eb, 2, []string{"f_user_id", "f_doc_keyword"}, []int{1, 219})
				}
			}},
		{"random, model spec", []string{"--input_type=example_batch", "--batch_size=5", "--model_spec=" + modelSpecFile(t), "--profile_data_num=2"},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				for _, vals := range distinct(t, reqs, "example_batch") {
					eb := &examplepb.ExampleBatch{}
					if err := proto.Unmarshal(vals[0], eb); err != nil {
						t.Fatal(err)
					}
					checkModelBatch(t, eb, 5)
				}
			}},
		{"random instances, model spec", []string{"--batch_size=2", "--model_spec=" + filepath.Dir(modelSpecFile(t)), "--profile_data_num=1"},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				for _, vals := range distinct(t, reqs, "instances") {
					for _, v := range vals {
						inst := &parserpb.Instance{}
						if err := proto.Unmarshal(v, inst); err != nil {
							t.Fatal(err)
						}
						var names []string
						for _, f := range inst.GetFeature() {
							names = append(names, f.GetName())
						}
						if !slices.Equal(names, []string{"dense", "slot_1", "slot_2"}) || len(inst.GetFeature()[0].GetFloatValue()) != 4 {
							t.Fatalf("instance features %v", inst.GetFeature())
						}
					}
				}
			}},
		{"input file", []string{"--input_type=example_batch", "--file_type=pbtxt", "--input_file=" + ebFile},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				inputs := distinct(t, reqs, "example_batch")
				if len(inputs) != 1 || inputs[string(fileBytes)] == nil {
					t.Errorf("%d different inputs, want only the file's batch", len(inputs))
				}
			}},
		{"data dir", []string{"--input_type=example_batch", "--file_type=pbtxt", "--profile_data_dir=" + dataDir},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				inputs := distinct(t, reqs, "example_batch")
				if len(reqs) >= 10 && (len(inputs) != 2 || inputs[string(fileBytes)] == nil || inputs[string(otherBytes)] == nil) {
					t.Errorf("%d different inputs in %d requests, want the two files' batches", len(inputs), len(reqs))
				}
			}},
		{"data dir, first file only", []string{"--input_type=example_batch", "--file_type=pbtxt", "--profile_data_dir=" + dataDir, "--profile_data_num=1"},
			func(t *testing.T, reqs []*servingapis.PredictRequest) {
				inputs := distinct(t, reqs, "example_batch")
				if len(inputs) != 1 || inputs[string(fileBytes)] == nil {
					t.Errorf("%d different inputs, want a.pbtxt's alone", len(inputs))
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &loadServer{}
			addr := startLoadServer(t, srv)
			code, _, stderr, s := profileRun(t, context.Background(), append(tc.args, "--target="+addr, "--seed=11", "--parallel_num=2", "--profile_duration=0.3")...)
			n, reqs, _, _ := srv.requests()
			if code != 0 || n == 0 || s.OK != uint64(n) || s.Requests != uint64(n) {
				t.Fatalf("exit %d, server got %d requests, summary %d sent %d ok; stderr %s", code, n, s.Requests, s.OK, stderr)
			}
			tc.check(t, reqs)
			if t.Failed() {
				return
			}
			// The same seed sends the same inputs in the same order.
			srv2 := &loadServer{}
			addr2 := startLoadServer(t, srv2)
			if code, _, stderr, _ := profileRun(t, context.Background(), append(tc.args, "--target="+addr2, "--seed=11", "--parallel_num=1", "--profile_duration=0.2")...); code != 0 {
				t.Fatalf("second run: exit %d: %s", code, stderr)
			}
			srv3 := &loadServer{}
			addr3 := startLoadServer(t, srv3)
			if code, _, stderr, _ := profileRun(t, context.Background(), append(tc.args, "--target="+addr3, "--seed=11", "--parallel_num=1", "--profile_duration=0.2")...); code != 0 {
				t.Fatalf("third run: exit %d: %s", code, stderr)
			}
			_, a, _, _ := srv2.requests()
			_, b, _, _ := srv3.requests()
			for i := range min(len(a), len(b)) {
				if !proto.Equal(a[i], b[i]) {
					t.Fatalf("request %d differs between two runs of seed 11", i)
				}
			}
		})
	}
}

func TestProfileSpreadsOverTargets(t *testing.T) {
	leakcheck.Check(t)
	a, b := &loadServer{}, &loadServer{}
	addrA, addrB := startLoadServer(t, a), startLoadServer(t, b)
	code, _, stderr, s := profileRun(t, context.Background(), "--target="+addrA+","+addrB, "--parallel_num=3", "--profile_duration=0.3", "--profile_data_num=2")
	na, _, _, _ := a.requests()
	nb, _, _, _ := b.requests()
	if code != 0 || na == 0 || nb == 0 || na-nb > 1 || nb-na > 1 || s.OK != uint64(na+nb) {
		t.Fatalf("exit %d: %d and %d requests (summary: %d ok); want them in turn; stderr %s", code, na, nb, s.OK, stderr)
	}
	if !slices.Equal(s.Targets, []string{addrA, addrB}) {
		t.Errorf("targets %v", s.Targets)
	}
}

func TestProfileReportsErrors(t *testing.T) {
	leakcheck.Check(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	for _, tc := range []struct {
		name   string
		srv    *loadServer
		args   []string
		codes  []codes.Code
		noneOK bool
	}{
		{"failing server", &loadServer{fail: func(n int) error {
			switch {
			case n%3 == 0:
				return status.Error(codes.Unavailable, "shard gone")
			case n%5 == 0:
				return status.Error(codes.ResourceExhausted, "queue full")
			}
			return nil
		}}, nil, []codes.Code{codes.ResourceExhausted, codes.Unavailable}, false},
		{"hanging server", &loadServer{hang: true}, []string{"--timeout=100ms"}, []codes.Code{codes.DeadlineExceeded}, true},
		{"server down", nil, []string{"--timeout=1s"}, []codes.Code{codes.Unavailable}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := closed
			if tc.srv != nil {
				target = startLoadServer(t, tc.srv)
			}
			code, out, stderr, s := profileRun(t, context.Background(), append(tc.args, "--target="+target, "--parallel_num=2", "--profile_duration=0.4")...)
			if code != 1 || !strings.Contains(stderr, "requests failed") {
				t.Fatalf("exit %d, stderr %q: want 1 and the failures named", code, stderr)
			}
			byName := map[string]codes.Code{}
			for c := codes.OK; c <= codes.Unauthenticated; c++ {
				byName[c.String()] = c
			}
			var got []codes.Code
			var failed uint64
			for name, n := range s.Errors {
				c, ok := byName[name]
				if !ok {
					t.Fatalf("error code %q", name)
				}
				got = append(got, c)
				failed += n
				if s.ErrorExamples[name] == "" {
					t.Errorf("no message for %s", name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.codes) || s.Requests != s.OK+failed || (tc.noneOK && s.OK != 0) {
				t.Fatalf("errors %v (%v), %d sent, %d ok; want codes %v", s.Errors, got, s.Requests, s.OK, tc.codes)
			}
			if tc.srv != nil && tc.srv.fail != nil {
				n, _, failures, _ := tc.srv.requests()
				for c, k := range failures {
					if s.Errors[c.String()] != uint64(k) {
						t.Errorf("%s: %d reported, the server failed %d", c, s.Errors[c.String()], k)
					}
				}
				if s.OK+failed != uint64(n) {
					t.Errorf("%d ok + %d failed, the server got %d", s.OK, failed, n)
				}
			}
			for _, c := range tc.codes {
				if !strings.Contains(out, "  "+c.String()+": ") {
					t.Errorf("text summary does not list %s:\n%s", c, out)
				}
			}
		})
	}
}

func TestProfileStopsAtDuration(t *testing.T) {
	leakcheck.Check(t)
	for _, tc := range []struct {
		name     string
		srv      *loadServer
		args     []string
		duration time.Duration
		minTime  time.Duration // the run lasts at least this (requests in flight finish)
	}{
		{"fast server", &loadServer{}, []string{"--parallel_num=4"}, 500 * time.Millisecond, 500 * time.Millisecond},
		{"slow server: requests in flight finish", &loadServer{delay: 400 * time.Millisecond}, []string{"--parallel_num=2"}, 200 * time.Millisecond, 400 * time.Millisecond},
		{"open loop", &loadServer{}, []string{"--parallel_num=2", "--target_qps=50"}, 500 * time.Millisecond, 480 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startLoadServer(t, tc.srv)
			code, _, stderr, s := profileRun(t, context.Background(), append(tc.args, "--target="+addr, fmt.Sprintf("--profile_duration=%g", tc.duration.Seconds()))...)
			n, _, _, last := tc.srv.requests()
			if code != 0 || n == 0 || s.OK != uint64(n) {
				t.Fatalf("exit %d, %d requests, %d ok: %s", code, n, s.OK, stderr)
			}
			// No request starts after the duration (with a little room for one the scheduler
			// let start just before), and the run ends when the last answer is in.
			tc.srv.mu.Lock()
			first := tc.srv.first
			tc.srv.mu.Unlock()
			if last.Sub(first) > tc.duration+200*time.Millisecond {
				t.Errorf("last request %v after the first, the duration is %v", last.Sub(first), tc.duration)
			}
			if s.ElapsedS < tc.minTime.Seconds() || s.ElapsedS > (tc.minTime+5*time.Second).Seconds() {
				t.Errorf("the run took %gs, want at least %v and not much more", s.ElapsedS, tc.minTime)
			}
		})
	}
}

func TestProfileOpenLoop(t *testing.T) {
	leakcheck.Check(t)
	t.Run("rate", func(t *testing.T) {
		srv := &loadServer{}
		addr := startLoadServer(t, srv)
		code, _, stderr, s := profileRun(t, context.Background(), "--target="+addr, "--parallel_num=4", "--target_qps=40", "--profile_duration=1")
		n, _, _, _ := srv.requests()
		// 40 requests are due in a second: never more are sent, and those not sent are reported.
		if code != 0 || n > 40 || n < 20 || s.Requests+s.Unsent != 40 || s.Mode != "open_loop" {
			t.Fatalf("exit %d: %d requests, summary %d sent + %d unsent, mode %s; want 40 due: %s", code, n, s.Requests, s.Unsent, s.Mode, stderr)
		}
	})
	t.Run("latency counts from when a request was due", func(t *testing.T) {
		// One request at a time, 50 ms each, 100 due a second: the server falls behind, and the
		// queue it causes is in the latency, not hidden by the client slowing down.
		srv := &loadServer{delay: 50 * time.Millisecond}
		addr := startLoadServer(t, srv)
		code, _, stderr, s := profileRun(t, context.Background(), "--target="+addr, "--parallel_num=1", "--target_qps=100", "--profile_duration=1")
		if code != 0 || s.OK < 5 || s.Unsent == 0 {
			t.Fatalf("exit %d: %d ok, %d unsent: %s", code, s.OK, s.Unsent, stderr)
		}
		if s.LatencyMS.P99 < 4*s.ServiceMS.P99 || s.ServiceMS.P50 < 50 {
			t.Errorf("latency p99 %.1f ms, service p99 %.1f ms (p50 %.1f): want the queueing counted", s.LatencyMS.P99, s.ServiceMS.P99, s.ServiceMS.P50)
		}
		// Closed loop, the same server: each request is sent when the last is answered, so its
		// latency is the service time.
		code, _, stderr, c := profileRun(t, context.Background(), "--target="+addr, "--parallel_num=1", "--profile_duration=0.5")
		if code != 0 || c.LatencyMS != c.ServiceMS || c.Unsent != 0 || c.Mode != "closed_loop" {
			t.Errorf("closed loop: exit %d, latency %+v, service %+v, unsent %d: %s", code, c.LatencyMS, c.ServiceMS, c.Unsent, stderr)
		}
	})
}

func TestProfileInterrupted(t *testing.T) {
	leakcheck.Check(t)
	srv := &loadServer{}
	addr := startLoadServer(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var interruptedAt time.Time
	go func() { // interrupt once the load runs
		for ctx.Err() == nil {
			if n, _, _, _ := srv.requests(); n > 0 {
				time.Sleep(100 * time.Millisecond)
				interruptedAt = time.Now()
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	code, out, stderr, s := profileRun(t, ctx, "--target="+addr, "--profile_duration=60")
	if code != 0 || !s.Interrupted || s.OK == 0 || !strings.Contains(out, "(interrupted)") || time.Since(interruptedAt) > 5*time.Second {
		t.Fatalf("exit %d %v after the interrupt, interrupted %v, %d ok: %s", code, time.Since(interruptedAt), s.Interrupted, s.OK, stderr)
	}
}

func TestProfileOutput(t *testing.T) {
	leakcheck.Check(t)
	srv := &loadServer{delay: time.Millisecond}
	addr := startLoadServer(t, srv)
	dir := t.TempDir()
	cpu := filepath.Join(dir, "cpu.pprof")
	code, out, stderr, s := profileRun(t, context.Background(), "--target="+addr, "--parallel_num=2", "--profile_duration=0.5",
		"--progress_interval=100ms", "--cpu_profile="+cpu, "--log_format=json")
	n, _, _, _ := srv.requests()
	if code != 0 || s.OK != uint64(n) {
		t.Fatalf("exit %d, %d ok of %d: %s", code, s.OK, n, stderr)
	}
	// The reference's line, then ours.
	if !strings.Contains(out, fmt.Sprintf("[Profile] Count: %d, Avg Latency: %.3f, P99 Latency: %.3f, QPS: %.1f\n", s.OK, s.LatencyMS.Mean, s.LatencyMS.P99, s.QPS)) ||
		!strings.Contains(out, fmt.Sprintf("latency ms: min %.3f mean %.3f p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f", s.LatencyMS.Min, s.LatencyMS.Mean, s.LatencyMS.P50, s.LatencyMS.P90, s.LatencyMS.P99, s.LatencyMS.P999, s.LatencyMS.Max)) {
		t.Errorf("text summary:\n%s\nsummary %+v", out, s)
	}
	l := s.LatencyMS
	if !(l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max && l.Min >= 1 && l.Min <= l.Mean && l.Mean <= l.Max) {
		t.Errorf("latency %+v: want ordered percentiles of at least the server's 1 ms", l)
	}
	var inBands uint64
	for _, b := range s.Histogram {
		inBands += b.Count
	}
	if inBands != s.OK || len(s.Histogram) == 0 || s.Histogram[len(s.Histogram)-1].LeMS < l.Max {
		t.Errorf("histogram %+v holds %d, want the %d ok requests up to %.3f ms", s.Histogram, inBands, s.OK, l.Max)
	}
	progress := 0
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, `"msg":"profile progress"`) {
			continue
		}
		progress++
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"elapsed", "requests", "ok", "errors", "qps", "p50_ms", "p99_ms"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("progress line without %s: %s", k, line)
			}
		}
	}
	if progress == 0 {
		t.Errorf("no progress line in %s", stderr)
	}
	data, err := os.ReadFile(cpu)
	if err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("cpu profile: %v, %d bytes: want a gzipped pprof profile", err, len(data))
	}

	// --profile_json=- prints the JSON alone.
	var o, e bytes.Buffer
	if code := run(context.Background(), []string{"--cmd_type=profile", "--model_name=m", "--target=" + addr, "--profile_duration=0.1", "--profile_json=-"}, &o, &e, noEnv); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	var js profile.Summary
	if err := json.Unmarshal(o.Bytes(), &js); err != nil || js.OK == 0 || js.Model != "m" {
		t.Errorf("stdout is not the summary: %v: %s", err, o.String())
	}
}

func TestProfileBadCommandLine(t *testing.T) {
	leakcheck.Check(t)
	srv := &loadServer{}
	addr := startLoadServer(t, srv)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"parallel_num", []string{"--parallel_num=0"}, "--parallel_num 0 is not positive"},
		{"duration", []string{"--profile_duration=0"}, "--profile_duration 0 is not a positive"},
		{"negative qps", []string{"--target_qps=-1"}, "--target_qps -1 is not a rate"},
		{"data num", []string{"--profile_data_num=0"}, "--profile_data_num 0 is not positive"},
		{"progress", []string{"--progress_interval=0s"}, "--progress_interval 0s is not positive"},
		{"empty data dir", []string{"--profile_data_dir=" + dir}, "no files"},
		{"missing data dir", []string{"--profile_data_dir=" + filepath.Join(dir, "none")}, "no such file"},
		{"cpu profile in a missing dir", []string{"--cpu_profile=" + filepath.Join(dir, "none", "cpu.pprof")}, "--cpu_profile"},
		{"bad slots", []string{"--slots=a"}, `"a" is not a slot number`},
		{"batch size 0", []string{"--batch_size=0"}, "batch size 0 is not positive"},
		{"missing model spec", []string{"--model_spec=" + filepath.Join(dir, "none", "model.json")}, "--model_spec: model spec " + filepath.Join(dir, "none", "model.json") + " does not exist"},
		{"model spec and feature list", []string{"--model_spec=" + modelSpecFile(t), "--feature_list=" + featureListFile(t)}, "--model_spec and --feature_list: give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr, _ := profileRun(t, context.Background(), append([]string{"--target=" + addr, "--profile_duration=0.2"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
				t.Fatalf("exit %d, stderr %q, stdout %q; want 2 and %q", code, stderr, out, tc.want)
			}
		})
	}
	if n, _, _, _ := srv.requests(); n != 0 {
		t.Errorf("%d requests sent for bad command lines", n)
	}
}

// TestProfileAgainstFakeTFS: the load runs against the project's fake TF Serving.
func TestProfileAgainstFakeTFS(t *testing.T) {
	leakcheck.Check(t)
	srv, err := faketfs.New(faketfs.SingleModelConfig("entry", "/models/entry", 1), faketfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--cmd_type=profile", "--model_name=entry", "--target=" + srv.Addr(),
		"--input_type=example_batch", "--batch_size=16", "--parallel_num=2", "--profile_duration=0.3", "--seed=1"}, &out, &errb, noEnv)
	if code != 0 || !regexp.MustCompile(`\[Profile\] Count: [1-9]\d*, `).MatchString(out.String()) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
}

// TestGetRandom: get without --input_file sends a random batch (as gen_random_file makes it),
// the same one for the same seed.
func TestGetRandom(t *testing.T) {
	leakcheck.Check(t)
	fixClock(t)
	rec := &recorder{predict: &servingapis.PredictResponse{}}
	addr := startRecorder(t, rec)
	var got []*servingapis.PredictRequest
	for _, seed := range []string{"5", "5", "6"} {
		code, _, stderr := runCLI(t, noEnv, "--model_name=m", "--signature_name=sig", "--target="+addr, "--input_type=example_batch", "--seed="+seed)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		got = append(got, rec.Last().(*servingapis.PredictRequest))
	}
	name, vals := decodeInput(t, got[0])
	eb := &examplepb.ExampleBatch{}
	if name != "example_batch" || len(vals) != 1 || proto.Unmarshal(vals[0], eb) != nil {
		t.Fatalf("input %s with %d values", name, len(vals))
	}
	checkRandomBatch(t, eb, 8, []string{"fc_slot_1", "fc_slot_2", "fc_slot_3", "fc_slot_4", "fc_slot_5", "fc_slot_6"}, []int{1, 2, 3, 4, 5, 6})
	if !proto.Equal(got[0], got[1]) || proto.Equal(got[0], got[2]) {
		t.Errorf("seed 5 twice: equal %v; seeds 5 and 6: equal %v", proto.Equal(got[0], got[1]), proto.Equal(got[0], got[2]))
	}
}
