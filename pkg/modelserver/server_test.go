package modelserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// waitRPCAvailable polls GetModelStatus over gRPC until the model's newest version is AVAILABLE.
func waitRPCAvailable(t *testing.T, client servingapis.ModelServiceClient, name string, version int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := client.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: name}})
		cancel()
		if err == nil {
			last = pytext.Format(resp)
			if l := resp.GetModelVersionStatus(); len(l) > 0 && l[0].GetVersion() == version && l[0].GetState() == StateAvailable {
				return
			}
		} else {
			last = err.Error()
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s version %d never AVAILABLE; last: %s", name, version, last)
}

func TestServeOverGRPC(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 3)
	l := newTestLoader()
	metrics := NewMetrics()
	_, conn := startServer(t, configOf(modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)),
		Options{Manager: ManagerOptions{Loaders: l.loaders()}, Metrics: metrics})
	ms, ps := servingapis.NewModelServiceClient(conn), servingapis.NewPredictionServiceClient(conn)
	waitRPCAvailable(t, ms, "m:entry", 3)
	ctx := rpcCtx(t)

	resp, err := ps.Predict(ctx, &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:entry"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := tensors.Int64s(resp.GetOutputs()["version"]); len(v) != 1 || v[0] != 3 {
		t.Errorf("version output %v", v)
	}
	if s := resp.GetModelSpec(); s.GetName() != "m:entry" || s.GetVersion().GetValue() != 3 || s.GetSignatureName() != DefaultSignature {
		t.Errorf("response model spec %v", s)
	}
	resp, err = ps.Predict(ctx, &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:entry"}, OutputFilter: []string{"version"}})
	if err != nil || len(resp.GetOutputs()) != 1 || resp.GetOutputs()["version"] == nil {
		t.Errorf("output filter: %v, %v", resp.GetOutputs(), err)
	}

	bad := []struct {
		name string
		req  *servingapis.PredictRequest
		code codes.Code
		msg  string
	}{
		{"unknown signature", &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:entry", SignatureName: "update"}}, codes.FailedPrecondition, `"update" not found`},
		{"unknown output", &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:entry"}, OutputFilter: []string{"scores"}}, codes.InvalidArgument, "scores"},
		{"unknown model", &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "nope"}}, codes.NotFound, "nope"},
	}
	for _, tc := range bad {
		if _, err := ps.Predict(ctx, tc.req); status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.code, tc.msg)
		}
	}

	md, err := ps.GetModelMetadata(ctx, &servingapis.GetModelMetadataRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:entry"},
		MetadataField: []string{SignatureDefField, "base_path", "version", "signature_name", "num_versions"}})
	if err != nil {
		t.Fatal(err)
	}
	var sigs servingapis.SignatureDefMap
	if err := md.GetMetadata()[SignatureDefField].UnmarshalTo(&sigs); err != nil {
		t.Fatalf("signature_def: %v", err)
	}
	if sigs.GetSignatureDef()[DefaultSignature].GetMethodName() != PredictMethod {
		t.Errorf("signature_def %v", &sigs)
	}
	for field, want := range map[string]string{"base_path": "'" + base + "'", "version": "3", "signature_name": "('serving_default',)", "num_versions": "1"} {
		if got := string(md.GetMetadata()[field].GetValue()); got != want {
			t.Errorf("metadata %s = %q, want %q", field, got, want)
		}
	}
	if md.GetModelSpec().GetVersion().GetValue() != 3 {
		t.Errorf("metadata model spec %v", md.GetModelSpec())
	}
	for _, fields := range [][]string{nil, {"bogus"}} {
		if _, err := ps.GetModelMetadata(ctx, &servingapis.GetModelMetadataRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:entry"}, MetadataField: fields}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("metadata fields %v: %v, want INVALID_ARGUMENT", fields, err)
		}
	}

	// Metrics: requests by model, signature, method and code; versions by state; loads.
	rec := httptest.NewRecorder()
	StatusHandler(metrics).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`monolith_model_server_requests_total{code="OK",method="Predict",model="m:entry",signature="serving_default"} 2`,
		`monolith_model_server_requests_total{code="FailedPrecondition",method="Predict",model="m:entry",signature="(unknown)"} 1`,
		`monolith_model_server_requests_total{code="NotFound",method="Predict",model="(unknown)",signature="(unknown)"} 1`,
		`monolith_model_server_requests_total{code="InvalidArgument",method="Predict",model="m:entry",signature="serving_default"} 1`,
		`monolith_model_server_model_versions{model="m:entry",state="AVAILABLE"} 1`,
		`monolith_model_server_model_versions{model="m:entry",state="LOADING"} 0`,
		`monolith_model_server_loads_total{model="m:entry",result="ok"} 1`,
		`monolith_model_server_request_duration_seconds_count{method="Predict",model="m:entry",signature="serving_default"} 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestReloadOverGRPC(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	_, conn := startServer(t, nil, Options{Manager: ManagerOptions{Loaders: newTestLoader().loaders()}})
	ms := servingapis.NewModelServiceClient(conn)
	ctx := rpcCtx(t)
	if _, err := ms.GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: "m:ps_0"}}); status.Code(err) != codes.NotFound {
		t.Errorf("status before the reload: %v", err)
	}
	resp, err := ms.HandleReloadConfigRequest(ctx, &servingapis.ReloadConfigRequest{Config: configOf(modelConfig(t, "m:ps_0", base, modelconfig.PolicyLatest, 1), modelconfig.Default())})
	if err != nil || resp.GetStatus().GetErrorCode() != tfprotobuf.Code_OK {
		t.Fatalf("reload: %v %v", resp, err)
	}
	waitRPCAvailable(t, ms, "m:ps_0", 1)
	for name, cfg := range map[string]*servingconfig.ModelServerConfig{
		"no model_config_list": {},
		"twice":                configOf(modelConfig(t, "a", base, modelconfig.PolicyLatest, 1), modelConfig(t, "a", base, modelconfig.PolicyLatest, 1)),
	} {
		if _, err := ms.HandleReloadConfigRequest(ctx, &servingapis.ReloadConfigRequest{Config: cfg}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	waitRPCAvailable(t, ms, "m:ps_0", 1) // a refused reload changes nothing
}

// TestFileSystemPoll: a new version appearing under the base path is served without a reload.
func TestFileSystemPoll(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	_, conn := startServer(t, configOf(modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)),
		Options{Manager: ManagerOptions{Loaders: newTestLoader().loaders()}, FileSystemPollInterval: 5 * time.Millisecond})
	ms := servingapis.NewModelServiceClient(conn)
	waitRPCAvailable(t, ms, "m:entry", 1)
	// As an exporter writes it: a temporary name, renamed once complete.
	tmp := filepath.Join(base, "temp-2")
	os.Mkdir(tmp, 0o755)
	time.Sleep(20 * time.Millisecond)
	if err := os.Rename(tmp, filepath.Join(base, "2")); err != nil {
		t.Fatal(err)
	}
	waitRPCAvailable(t, ms, "m:entry", 2)
}

// TestConfigFile: the server starts on the config file and applies its changes.
func TestConfigFile(t *testing.T) {
	leakcheck.Check(t)
	a, b := t.TempDir(), t.TempDir()
	mkVersions(t, a, 1)
	mkVersions(t, b, 2)
	file := filepath.Join(t.TempDir(), "models.config")
	write := func(cfg *servingconfig.ModelServerConfig) {
		if err := os.WriteFile(file, []byte(pytext.Format(cfg)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(configOf(modelConfig(t, "a:entry", a, modelconfig.PolicyLatest, 1)))
	_, conn := startServer(t, nil, Options{Manager: ManagerOptions{Loaders: newTestLoader().loaders()}, ConfigFile: file, ConfigPollInterval: 5 * time.Millisecond})
	ms := servingapis.NewModelServiceClient(conn)
	waitRPCAvailable(t, ms, "a:entry", 1)
	write(configOf(modelConfig(t, "a:entry", a, modelconfig.PolicyLatest, 1), modelConfig(t, "b:ps_0", b, modelconfig.PolicyLatest, 1)))
	waitRPCAvailable(t, ms, "b:ps_0", 2)

	for name, content := range map[string]string{"missing": "", "garbage": "model_config_list {", "twice": `model_config_list { config { name: "a" base_path: "/x" } config { name: "a" base_path: "/y" } }`} {
		f := filepath.Join(t.TempDir(), "c")
		if content != "" {
			os.WriteFile(f, []byte(content), 0o644)
		}
		if _, err := New(nil, Options{ConfigFile: f}); err == nil {
			t.Errorf("%s config file: no error", name)
		} else if k := errkind.Of(err); (name == "missing") != (k == errkind.NotFound) {
			t.Errorf("%s config file: kind %v (%v)", name, k, err)
		}
	}
}

// TestStopUnloads: stopping the server closes every servable and ends the loads in progress.
func TestStopUnloads(t *testing.T) {
	leakcheck.Check(t)
	a, b := t.TempDir(), t.TempDir()
	mkVersions(t, a, 1)
	mkVersions(t, b, 1)
	l := newTestLoader()
	gate := l.gate(filepath.Join(b, "1"))
	defer close(gate)
	s, err := New(configOf(modelConfig(t, "a:entry", a, modelconfig.PolicyLatest, 1), modelConfig(t, "b:ps_0", b, modelconfig.PolicyLatest, 1)),
		Options{Manager: ManagerOptions{Loaders: l.loaders()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitStates(t, s.Manager(), "a:entry", "1:AVAILABLE")
	waitStates(t, s.Manager(), "b:ps_0", "1:LOADING")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !l.servable(filepath.Join(a, "1")).closed.Load() {
		t.Error("servable not closed at stop")
	}
	if err := s.Stop(ctx); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if err := s.Manager().Reload(nil); status.Code(err) != codes.Unavailable {
		t.Errorf("reload after stop: %v", err)
	}
}

func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want codes.Code
	}{
		{status.Error(codes.Unavailable, "x"), codes.Unavailable},
		{fmt.Errorf("wrapped: %w", status.Error(codes.NotFound, "x")), codes.NotFound},
		{fmt.Errorf("w: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errkind.New(errkind.Value, "bad"), codes.InvalidArgument},
		{errkind.New(errkind.NotFound, "gone"), codes.NotFound},
		{errkind.New(errkind.Precondition, "no"), codes.FailedPrecondition},
		{errors.New("boom"), codes.Internal},
	}
	for _, tc := range tests {
		s := StatusOf(tc.err)
		if s.Code() != tc.want || s.Message() != tc.err.Error() {
			t.Errorf("StatusOf(%v) = %v %q, want %v", tc.err, s.Code(), s.Message(), tc.want)
		}
	}
}
