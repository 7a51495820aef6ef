package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	parserpb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/parser"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// recorder is a TF Serving server that records the requests it gets and answers canned
// responses.
type recorder struct {
	servingapis.UnimplementedModelServiceServer
	servingapis.UnimplementedPredictionServiceServer
	mu         sync.Mutex
	last       proto.Message
	status     *servingapis.GetModelStatusResponse
	meta       *servingapis.GetModelMetadataResponse
	reload     *servingapis.ReloadConfigResponse
	predict    *servingapis.PredictResponse
	hangReload bool
}

func (r *recorder) record(m proto.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = proto.Clone(m)
}

func (r *recorder) Last() proto.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *recorder) GetModelStatus(_ context.Context, req *servingapis.GetModelStatusRequest) (*servingapis.GetModelStatusResponse, error) {
	r.record(req)
	return r.status, nil
}

func (r *recorder) HandleReloadConfigRequest(ctx context.Context, req *servingapis.ReloadConfigRequest) (*servingapis.ReloadConfigResponse, error) {
	r.record(req)
	if r.hangReload { // TF Serving reloads can hang (tensorflow/serving#1565)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return r.reload, nil
}

func (r *recorder) GetModelMetadata(_ context.Context, req *servingapis.GetModelMetadataRequest) (*servingapis.GetModelMetadataResponse, error) {
	r.record(req)
	return r.meta, nil
}

func (r *recorder) Predict(_ context.Context, req *servingapis.PredictRequest) (*servingapis.PredictResponse, error) {
	r.record(req)
	return r.predict, nil
}

func startRecorder(t *testing.T, r *recorder) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	servingapis.RegisterModelServiceServer(s, r)
	servingapis.RegisterPredictionServiceServer(s, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

func noEnv(string) (string, bool) { return "", false }

func sig(s string) *string { return &s }

func runCLI(t *testing.T, env agentconf.LookupEnv, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb, env)
	return code, out.String(), errb.String()
}

func TestCommands(t *testing.T) {
	rec := &recorder{
		status: &servingapis.GetModelStatusResponse{ModelVersionStatus: []*servingapis.ModelVersionStatus{
			modelconfig.VersionStatus(3, servingapis.ModelVersionStatus_AVAILABLE, tfprotobuf.Code_OK, nil),
		}},
		meta: &servingapis.GetModelMetadataResponse{
			ModelSpec: modelconfig.ModelSpec("ps_0", modelconfig.Version{}, sig("serving_default")),
			Metadata:  map[string]*anypb.Any{"base_path": {Value: []byte("'/m'")}},
		},
		reload:  &servingapis.ReloadConfigResponse{Status: modelconfig.Status(tfprotobuf.Code_OK, nil)},
		predict: &servingapis.PredictResponse{ModelSpec: modelconfig.ModelSpec("entry", modelconfig.Version{}, nil)},
	}
	addr := startRecorder(t, rec)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "models.pbtxt")
	if err := os.WriteFile(cfgPath, []byte(`model_config_list { config { name: "ps_0" base_path: "/m/ps_0" model_platform: "tensorflow" } }`), 0o644); err != nil {
		t.Fatal(err)
	}
	ebFile, err := filepath.Abs(filepath.Join("..", "..", "pkg", "instance", "testdata", "example_batch.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	eb, err := instance.ReadExampleBatch(ebFile, instance.FormatPBTxt, instance.Header{})
	if err != nil {
		t.Fatal(err)
	}
	insts, err := instance.ExampleBatchToInstances(eb)
	if err != nil {
		t.Fatal(err)
	}
	instVals, err := instance.Marshal(insts)
	if err != nil {
		t.Fatal(err)
	}
	ebBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
	if err != nil {
		t.Fatal(err)
	}
	instJSON := filepath.Join(dir, "inst.json")
	if err := os.WriteFile(instJSON, []byte(`{"fid": [7]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	one, err := proto.Marshal(&parserpb.Instance{Fid: []uint64{7}})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		args    []string
		wantReq proto.Message
		resp    proto.Message
	}{
		{"status", []string{"--cmd_type=status", "--model_name=ps_0"},
			&servingapis.GetModelStatusRequest{ModelSpec: modelconfig.ModelSpec("ps_0", modelconfig.Version{}, sig("serving_default"))}, rec.status},
		{"meta", []string{"--cmd_type=meta", "--model_name=ps_0", "--signature_name=sig"},
			&servingapis.GetModelMetadataRequest{ModelSpec: modelconfig.ModelSpec("ps_0", modelconfig.Version{}, sig("sig")),
				MetadataField: []string{"base_path", "num_versions", "signature_name"}}, rec.meta},
		{"load", []string{"--cmd_type=load", "--model_name=x", "--input_file=" + cfgPath},
			&servingapis.ReloadConfigRequest{Config: mustConfig(t, cfgPath)}, rec.reload},
		{"predict example batch to instances", []string{"--model_name=entry", "--file_type=pbtxt", "--input_file=" + ebFile},
			&servingapis.PredictRequest{ModelSpec: modelconfig.ModelSpec("entry", modelconfig.Version{}, sig("serving_default")),
				Inputs: map[string]*tfframework.TensorProto{"instances": instance.MakeTensorProto(instVals)}}, rec.predict},
		{"predict example batch", []string{"--model_name=entry", "--input_type=example_batch", "--file_type=pbtxt", "--input_file=" + ebFile},
			&servingapis.PredictRequest{ModelSpec: modelconfig.ModelSpec("entry", modelconfig.Version{}, sig("serving_default")),
				Inputs: map[string]*tfframework.TensorProto{"example_batch": instance.MakeTensorProto([][]byte{ebBytes})}}, rec.predict},
		{"predict instance json", []string{"--model_name=entry", "--input_type=instance", "--file_type=json", "--batch_size=2", "--input_file=" + instJSON},
			&servingapis.PredictRequest{ModelSpec: modelconfig.ModelSpec("entry", modelconfig.Version{}, sig("serving_default")),
				Inputs: map[string]*tfframework.TensorProto{"instances": instance.MakeTensorProto([][]byte{one, one})}}, rec.predict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, noEnv, append(tc.args, "--target="+addr+",127.0.0.1:1")...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			if !proto.Equal(rec.Last(), tc.wantReq) {
				t.Errorf("request:\n got %v\nwant %v", rec.Last(), tc.wantReq)
			}
			if want := pytext.Format(tc.resp) + "\n"; out != want {
				t.Errorf("stdout:\n got %q\nwant %q", out, want)
			}
		})
	}
}

// TestFailedStatusExits1: a status answer reporting a failed version (NOT_FOUND) is printed, and
// the command exits 1 naming the version and the error.
func TestFailedStatusExits1(t *testing.T) {
	notFound := "Servable not found"
	for _, tc := range []struct {
		name     string
		statuses []*servingapis.ModelVersionStatus
		code     int
		stderr   string
	}{
		{"available", []*servingapis.ModelVersionStatus{
			modelconfig.VersionStatus(3, servingapis.ModelVersionStatus_AVAILABLE, tfprotobuf.Code_OK, nil)}, 0, ""},
		{"not found", []*servingapis.ModelVersionStatus{
			modelconfig.VersionStatus(-1, servingapis.ModelVersionStatus_UNKNOWN, tfprotobuf.Code_NOT_FOUND, &notFound)},
			1, "tfs_client: status: version -1: NOT_FOUND: Servable not found\n"},
		{"one of two failed", []*servingapis.ModelVersionStatus{
			modelconfig.VersionStatus(3, servingapis.ModelVersionStatus_AVAILABLE, tfprotobuf.Code_OK, nil),
			modelconfig.VersionStatus(4, servingapis.ModelVersionStatus_END, tfprotobuf.Code_UNKNOWN, nil)},
			1, "tfs_client: status: version 4: UNKNOWN\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{status: &servingapis.GetModelStatusResponse{ModelVersionStatus: tc.statuses}}
			addr := startRecorder(t, rec)
			code, out, errOut := runCLI(t, noEnv, "--cmd_type=status", "--model_name=m", "--target="+addr)
			if code != tc.code || errOut != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, errOut, tc.code, tc.stderr)
			}
			if want := pytext.Format(rec.status) + "\n"; out != want {
				t.Errorf("stdout %q, want the answer %q", out, want)
			}
		})
	}
}

func mustConfig(t *testing.T, path string) *servingconfig.ModelServerConfig {
	t.Helper()
	cfg, err := readModelServerConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.GetModelConfigList().GetConfig()) != 1 {
		t.Fatalf("config %v", cfg)
	}
	return cfg
}

func TestFailures(t *testing.T) {
	rec := &recorder{reload: &servingapis.ReloadConfigResponse{Status: modelconfig.Status(tfprotobuf.Code_INVALID_ARGUMENT, sig("bad base path"))}}
	addr := startRecorder(t, rec)
	hang := &recorder{hangReload: true}
	hangAddr := startRecorder(t, hang)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "models.pbtxt")
	if err := os.WriteFile(cfgPath, []byte("model_config_list {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCfg := filepath.Join(dir, "bad.pbtxt")
	if err := os.WriteFile(badCfg, []byte("model_config_list { nope: 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.pbtxt")
	if err := os.WriteFile(short, []byte("batch_size: 2\nnamed_feature_list { name: \"f\" feature { fid_v2_list { value: 1 } } }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A closed port: nothing listens there.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--nope"}, 2, "unknown flag --nope"},
		{"bad cmd type", []string{"--cmd_type=nope", "--target=" + addr, "--model_name=m"}, 2, "--cmd_type must be one of"},
		{"no conf", []string{"--cmd_type=status"}, 2, "--conf is needed"},
		{"missing conf", []string{"--cmd_type=status", "--conf=" + filepath.Join(dir, "none.conf")}, 2, "none.conf: no such file"},
		{"load without file", []string{"--cmd_type=load", "--target=" + addr, "--model_name=m"}, 2, "load needs --input_file"},
		{"load bad text", []string{"--cmd_type=load", "--target=" + addr, "--model_name=m", "--input_file=" + badCfg}, 2, "bad.pbtxt as tensorflow.serving.ModelServerConfig"},
		{"load refused", []string{"--cmd_type=load", "--target=" + addr, "--model_name=m", "--input_file=" + cfgPath}, 1, "reload refused: INVALID_ARGUMENT: bad base path"},
		{"load hangs", []string{"--cmd_type=load", "--target=" + hangAddr, "--model_name=m", "--input_file=" + cfgPath, "--timeout=200ms"}, 1, "DeadlineExceeded"},
		{"server down", []string{"--cmd_type=status", "--target=" + closed, "--model_name=m", "--timeout=2s"}, 1, "status m at " + closed},
		{"predict random, bad slots", []string{"--target=" + addr, "--model_name=m", "--slots=1,x"}, 2, `--slots "1,x": "x" is not a slot number`},
		{"predict random, slot too big", []string{"--target=" + addr, "--model_name=m", "--slots=70000"}, 2, "slot 70000 is outside [1, 65535)"},
		{"predict random, slot not in the feature list", []string{"--target=" + addr, "--model_name=m", "--slots=1,99", "--feature_list=" + featureListFile(t)}, 2, "slot 99: no feature of the feature list has it"},
		{"predict random, missing feature list", []string{"--target=" + addr, "--model_name=m", "--feature_list=" + filepath.Join(dir, "none.conf")}, 2, "none.conf: no such file"},
		{"empty target entry", []string{"--target=" + addr + ",", "--model_name=m"}, 2, "has an empty address"},
		{"predict short list", []string{"--target=" + addr, "--model_name=m", "--file_type=pbtxt", "--input_file=" + short}, 2, `short.pbtxt: example batch: feature list "f" (INDIVIDUAL) has 1 features, batch_size is 2`},
		{"predict bad framing", []string{"--target=" + addr, "--model_name=m", "--input_file=" + short}, 2, "short.pbtxt"},
		{"negative batch", []string{"--target=" + addr, "--model_name=m", "--batch_size=-1"}, 2, "--batch_size -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runCLI(t, noEnv, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v: a deadline is missing", time.Since(start))
			}
		})
	}
}

func TestTargetFromConf(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := "bzid b\nbase_name m\nbase_path /m\nnum_ps 2\nzk_servers 127.0.0.1:2181\n"
	env := func(kv ...string) agentconf.LookupEnv {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name, conf string
		env        agentconf.LookupEnv
		flags      cmdFlags
		model      string
		addrs      []string
	}{
		{"ps", write("ps.conf", base+"deploy_type ps\n"), env("SHARD_ID", "1", "MY_HOST_IP", "10.0.0.5", "PORT3", "9123"), cmdFlags{}, "ps_1", []string{"10.0.0.5:9123"}},
		{"entry", write("entry.conf", base+"deploy_type entry\n"), env("MY_HOST_IP", "10.0.0.5", "PORT3", "9200"), cmdFlags{}, "entry", []string{"10.0.0.5:9200"}},
		{"dense", write("dense.conf", base+"deploy_type dense\ndense_alone true\n"), env("MY_HOST_IP", "10.0.0.5", "PORT3", "9300"), cmdFlags{}, "dense", []string{"10.0.0.5:9300"}},
		{"flags win", write("ps2.conf", base+"deploy_type ps\n"), env("SHARD_ID", "0", "MY_HOST_IP", "10.0.0.5", "PORT3", "9123"),
			cmdFlags{}, "ps_0", []string{"h:1", "h:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.flags
			c.Conf = tc.conf
			if tc.name == "flags win" {
				c.Target = "h:1,h:2"
			}
			model, addrs, err := target(c, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if model != tc.model || !slices.Equal(addrs, tc.addrs) {
				t.Fatalf("got %s at %v, want %s at %v", model, addrs, tc.model, tc.addrs)
			}
		})
	}
}

// TestPrintOutputs: get --print_outputs prints each output's values, one "<name> <value>" line
// each, outputs in name order, floats decoded from tensor_content as from float_val; a dtype it
// cannot print fails the command.
func TestPrintOutputs(t *testing.T) {
	content := make([]byte, 0, 12)
	for _, f := range []float32{0.25, 1.0 / 3, -2} {
		content = binary.LittleEndian.AppendUint32(content, math.Float32bits(f))
	}
	tests := []struct {
		name     string
		outputs  map[string]*tfframework.TensorProto
		wantCode int
		want     string
	}{
		{"tensor content, int64s and strings", map[string]*tfframework.TensorProto{
			"scores": {Dtype: tfframework.DataType_DT_FLOAT, TensorShape: tensors.FromFloat32s(nil, 3).GetTensorShape(), TensorContent: content},
			"ids":    tensors.FromInt64s([]int64{7, -1}, 2),
			"a_tags": tensors.FromStrings([][]byte{[]byte("x y")}, 1),
		}, 0, "a_tags \"x y\"\nids 7\nids -1\nscores 0.25\nscores 0.33333334\nscores -2\n"},
		{"float_val", map[string]*tfframework.TensorProto{"scores": tensors.FromFloat32s([]float32{0.5, 1e-7}, 2)}, 0, "scores 0.5\nscores 1e-07\n"},
		{"double", map[string]*tfframework.TensorProto{"p": {Dtype: tfframework.DataType_DT_DOUBLE, DoubleVal: []float64{1}}}, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{predict: &servingapis.PredictResponse{Outputs: tc.outputs}}
			addr := startRecorder(t, rec)
			code, out, errOut := runCLI(t, noEnv, "--model_name=entry", "--target="+addr, "--seed=1", "--print_outputs")
			if code != tc.wantCode || out != tc.want {
				t.Errorf("exit %d, stdout %q (stderr %s); want %d, %q", code, out, errOut, tc.wantCode, tc.want)
			}
			if tc.wantCode != 0 && !strings.Contains(errOut, "--print_outputs prints DT_FLOAT, DT_INT64 and DT_STRING tensors, not DT_DOUBLE") {
				t.Errorf("stderr %q", errOut)
			}
		})
	}
}
