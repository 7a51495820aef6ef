package faketfs

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// TestMockedTFS ports mocked_tfserving_test.py: one fake serving test_model_test (latest 2), then
// GetModelMetadata, GetModelStatus and HandleReloadConfigRequest against it. The reference sleeps
// 5 s for the versions to load; here the queue is drained.
func TestMockedTFS(t *testing.T) {
	const modelName, basePath = "test_model_test", "/tmp/test_model/monolith"
	f := start(t, SingleModelConfig(modelName, basePath, 2), Options{})
	f.srv.Drain()
	predict := "predict"

	t.Run("get_model_metadata", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		v := int64(2)
		req := &servingapis.GetModelMetadataRequest{
			ModelSpec:     modelconfig.ModelSpec(modelName, modelconfig.Version{Number: &v}, &predict),
			MetadataField: []string{"base_path", "num_versions", "signature_name"},
		}
		resp, err := f.ps.GetModelMetadata(ctx, req)
		if err != nil {
			t.Fatalf("GetModelMetadata: %v", err)
		}
		got := map[string]string{}
		for k, a := range resp.GetMetadata() {
			got[k] = string(a.GetValue())
		}
		want := map[string]string{"base_path": "'/tmp/test_model/monolith'", "signature_name": "('update', 'predict')"}
		if !maps.Equal(got, want) {
			t.Errorf("metadata = %v, want %v", got, want)
		}
		if pytext.Format(resp.GetModelSpec()) != pytext.Format(req.GetModelSpec()) {
			t.Errorf("model_spec = %v, want the request's %v", resp.GetModelSpec(), req.GetModelSpec())
		}
	})

	t.Run("get_model_status", func(t *testing.T) {
		v := int64(1)
		got := f.status(t, modelconfig.ModelSpec(modelName, modelconfig.Version{Number: &v}, &predict))
		if len(got) != 1 || pytext.Format(got[0]) != "version: 1\nstate: AVAILABLE\nstatus {\n}\n" {
			t.Errorf("status = %v", got)
		}
	})

	t.Run("handle_reload_config_request", func(t *testing.T) {
		resp := f.reload(t,
			mustConfig(t, "test_model", "/tmp/test_model/ctr/saved_model", modelconfig.PolicyLatest, modelconfig.VersionData{N: 2}, nil),
			mustConfig(t, "test_model", "/tmp/test_model/cvr/saved_model", modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil))
		if got := pytext.Format(resp); got != "status {\n}\n" {
			t.Errorf("response = %q, want an OK status", got)
		}
		f.srv.Drain()
		// The second config of the same name wins; the model no longer configured is gone.
		if got, want := f.states(t, "test_model"), []string{"1:AVAILABLE"}; !slices.Equal(got, want) {
			t.Errorf("test_model = %v, want %v", got, want)
		}
		if got, want := f.states(t, modelName), []string{"NOT_FOUND: test_model_test is not found"}; !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", modelName, got, want)
		}
	})
}

// action is one step of a scenario, checked by the states of one model afterwards.
type action struct {
	name  string
	do    func(t *testing.T, f *fixture)
	model string
	want  []string
}

func doTick(_ *testing.T, f *fixture)  { f.srv.Tick() }
func doDrain(_ *testing.T, f *fixture) { f.srv.Drain() }

func doNewVersion(model string, want int64) func(t *testing.T, f *fixture) {
	return func(t *testing.T, f *fixture) {
		v, ok := f.srv.Mgr().NewVersion(model)
		if want == 0 && ok {
			t.Errorf("NewVersion(%s) = %d, want none", model, v)
		}
		if want != 0 && (!ok || v != want) {
			t.Errorf("NewVersion(%s) = %d, %v, want %d", model, v, ok, want)
		}
	}
}

// TestStateMachine steps scenarios over gRPC: version simulation per policy, one state per tick,
// latest-N eviction through UNLOADING -> END, new versions.
func TestStateMachine(t *testing.T) {
	type cfgs = []*servingconfig.ModelConfig
	scenarios := []struct {
		name    string
		configs func(t *testing.T) cfgs
		steps   []action
	}{
		{
			name:    "latest 2 moves one state per tick",
			configs: func(t *testing.T) cfgs { return cfgs{latest(t, "m", 2)} },
			steps: []action{
				{"loaded", nil, "m", []string{"1:UNKNOWN", "2:UNKNOWN"}},
				{"tick 1", doTick, "m", []string{"1:START", "2:START"}},
				{"tick 2", doTick, "m", []string{"1:LOADING", "2:LOADING"}},
				{"tick 3", doTick, "m", []string{"1:AVAILABLE", "2:AVAILABLE"}},
				{"tick 4 (idle)", doTick, "m", []string{"1:AVAILABLE", "2:AVAILABLE"}},
			},
		},
		{
			name:    "latest 1 evicts the oldest when a new version is available",
			configs: func(t *testing.T) cfgs { return cfgs{latest(t, "m", 1)} },
			steps: []action{
				{"drain", doDrain, "m", []string{"1:AVAILABLE"}},
				{"new version", doNewVersion("m", 2), "m", []string{"1:AVAILABLE", "2:UNKNOWN"}},
				{"tick 1", doTick, "m", []string{"1:AVAILABLE", "2:START"}},
				{"tick 2", doTick, "m", []string{"1:AVAILABLE", "2:LOADING"}},
				{"tick 3", doTick, "m", []string{"1:AVAILABLE", "2:AVAILABLE"}},
				{"tick 4", doTick, "m", []string{"1:UNLOADING", "2:AVAILABLE"}},
				{"tick 5", doTick, "m", []string{"2:AVAILABLE"}},
				{"new version again", doNewVersion("m", 3), "m", []string{"2:AVAILABLE", "3:UNKNOWN"}},
				{"drain", doDrain, "m", []string{"3:AVAILABLE"}},
			},
		},
		{
			name: "specific versions are sorted and never grow",
			configs: func(t *testing.T) cfgs {
				return cfgs{mustConfig(t, "s", "/b/s", modelconfig.PolicySpecific, modelconfig.VersionData{List: []int64{30, 10, 20}, IsList: true}, nil)}
			},
			steps: []action{
				{"loaded", nil, "s", []string{"10:UNKNOWN", "20:UNKNOWN", "30:UNKNOWN"}},
				{"drain", doDrain, "s", []string{"10:AVAILABLE", "20:AVAILABLE", "30:AVAILABLE"}},
				{"no new version", doNewVersion("s", 0), "s", []string{"10:AVAILABLE", "20:AVAILABLE", "30:AVAILABLE"}},
			},
		},
		{
			name: "all serves version 1 and keeps every new version",
			configs: func(t *testing.T) cfgs {
				return cfgs{mustConfig(t, "a", "/b/a", modelconfig.PolicyAll, modelconfig.VersionData{N: 1}, nil)}
			},
			steps: []action{
				{"drain", doDrain, "a", []string{"1:AVAILABLE"}},
				{"new version", doNewVersion("a", 2), "a", []string{"1:AVAILABLE", "2:UNKNOWN"}},
				{"new version", doNewVersion("a", 3), "a", []string{"1:AVAILABLE", "2:UNKNOWN", "3:UNKNOWN"}},
				{"drain", doDrain, "a", []string{"1:AVAILABLE", "2:AVAILABLE", "3:AVAILABLE"}},
			},
		},
		{
			name: "no version policy is TF Serving's latest 1",
			configs: func(t *testing.T) cfgs {
				return cfgs{{Name: "d", BasePath: "/b/d", ModelPlatform: "tensorflow"}}
			},
			steps: []action{
				{"drain", doDrain, "d", []string{"1:AVAILABLE"}},
			},
		},
		{
			name:    "latest 0 holds the reference's placeholder version 0",
			configs: func(t *testing.T) cfgs { return cfgs{latest(t, "z", 0)} },
			steps: []action{
				{"drain", doDrain, "z", []string{"0:UNKNOWN"}},
			},
		},
		{
			name: "remove unloads every version, then the model",
			configs: func(t *testing.T) cfgs {
				return cfgs{latest(t, "m", 2), latest(t, "keep", 1)}
			},
			steps: []action{
				{"drain", doDrain, "m", []string{"1:AVAILABLE", "2:AVAILABLE"}},
				{"reload without m", func(t *testing.T, f *fixture) { f.reload(t, latest(t, "keep", 1)) }, "m", []string{"1:AVAILABLE", "2:AVAILABLE"}},
				{"tick 1", doTick, "m", []string{"1:UNLOADING", "2:UNLOADING"}},
				{"tick 2", doTick, "m", []string{"NOT_FOUND: m is not found"}},
				{"other model kept", nil, "keep", []string{"1:AVAILABLE"}},
			},
		},
		{
			name:    "a model re-added while its removal is queued is loaded afresh",
			configs: func(t *testing.T) cfgs { return cfgs{latest(t, "m", 1)} },
			steps: []action{
				{"drain", doDrain, "m", []string{"1:AVAILABLE"}},
				{"reload without m", func(t *testing.T, f *fixture) { f.reload(t) }, "m", []string{"1:AVAILABLE"}},
				{"reload with m", func(t *testing.T, f *fixture) { f.reload(t, latest(t, "m", 1)) }, "m", []string{"1:UNKNOWN"}},
				{"drain", doDrain, "m", []string{"1:AVAILABLE"}},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			f := start(t, serverConfig(sc.configs(t)...), Options{})
			for _, st := range sc.steps {
				if st.do != nil {
					st.do(t, f)
				}
				if got := f.states(t, st.model); !slices.Equal(got, st.want) {
					t.Fatalf("after %s: %s = %v, want %v", st.name, st.model, got, st.want)
				}
			}
		})
	}
}

// TestGetModelStatus covers the version choices: all versions, a version number, a label, an
// unknown model, and the NOT_FOUND status text.
func TestGetModelStatus(t *testing.T) {
	f := start(t, serverConfig(
		latest(t, "m", 2),
		mustConfig(t, "l", "/b/l", modelconfig.PolicySpecific, modelconfig.VersionData{N: 5}, map[string]int64{"stable": 5}),
	), Options{})
	f.srv.Drain()
	notFound := func(name string) string {
		return "version: -1\nstatus {\n  error_code: NOT_FOUND\n  error_message: \"" + name + " is not found\"\n}\n"
	}
	tests := []struct {
		name string
		spec *servingapis.ModelSpec
		want []string
	}{
		{"all versions", spec("m"), []string{"version: 1\nstate: AVAILABLE\nstatus {\n}\n", "version: 2\nstate: AVAILABLE\nstatus {\n}\n"}},
		{"version 2", specVersion("m", 2), []string{"version: 2\nstate: AVAILABLE\nstatus {\n}\n"}},
		{"unknown version", specVersion("m", 10), []string{notFound("m")}},
		{"labels are never assigned", specLabel("l", "stable"), []string{notFound("l")}},
		{"empty label", specLabel("l", ""), []string{notFound("l")}},
		{"unknown model", spec("missing"), []string{notFound("missing")}},
		{"no model spec", nil, []string{notFound("")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range f.status(t, tc.spec) {
				got = append(got, pytext.Format(s))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("GetModelStatus = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReload checks the set difference: names gone are removed, new names loaded, names kept are
// left alone even when their config changed.
func TestReload(t *testing.T) {
	f := start(t, serverConfig(latest(t, "a", 1), latest(t, "b", 1)), Options{})
	f.srv.Drain()
	resp := f.reload(t,
		latest(t, "b", 3), // same name, other config: kept as is
		mustConfig(t, "c", "/b/c", modelconfig.PolicySpecific, modelconfig.VersionData{N: 7}, nil))
	if got := pytext.Format(resp); got != "status {\n}\n" {
		t.Errorf("response = %q, want an OK status", got)
	}
	if got, want := f.srv.Mgr().AliveModelNames(), []string{"b", "c"}; !slices.Equal(got, want) {
		t.Errorf("alive = %v, want %v", got, want)
	}
	for model, want := range map[string][]string{"a": {"1:AVAILABLE"}, "b": {"1:AVAILABLE"}, "c": {"7:UNKNOWN"}} {
		if got := f.states(t, model); !slices.Equal(got, want) {
			t.Errorf("before drain: %s = %v, want %v", model, got, want)
		}
	}
	f.srv.Drain()
	for model, want := range map[string][]string{"a": {"NOT_FOUND: a is not found"}, "b": {"1:AVAILABLE"}, "c": {"7:AVAILABLE"}} {
		if got := f.states(t, model); !slices.Equal(got, want) {
			t.Errorf("after drain: %s = %v, want %v", model, got, want)
		}
	}
	if n := f.srv.Mgr().Snapshot()["b"].Conf.NumVersions; n == nil || *n != 1 {
		t.Errorf("b kept its first config: num_versions = %v, want 1", n)
	}
	// An empty config removes everything.
	f.reload(t)
	f.srv.Drain()
	if got := f.srv.Mgr().Snapshot(); len(got) != 0 {
		t.Errorf("after an empty reload: %v", got)
	}
}

func TestGetModelMetadata(t *testing.T) {
	f := start(t, serverConfig(
		latest(t, "m", 2),
		mustConfig(t, "s", "/b/s", modelconfig.PolicySpecific, modelconfig.VersionData{List: []int64{30, 10, 20}, IsList: true}, nil),
		mustConfig(t, "a", "/b/a", modelconfig.PolicyAll, modelconfig.VersionData{N: 1}, nil),
	), Options{})
	f.srv.Drain()
	tests := []struct {
		name   string
		spec   *servingapis.ModelSpec
		fields []string
		want   map[string]string
		code   codes.Code
	}{
		{
			name:   "conf fields",
			spec:   spec("m"),
			fields: []string{"model_name", "base_path", "version_policy", "version_data", "model_platform", "signature_name", "num_versions"},
			want: map[string]string{"model_name": "'m'", "base_path": "'/tmp/m'", "version_policy": "'latest'", "version_data": "2",
				"model_platform": "'tensorflow'", "signature_name": "('update', 'predict')"},
		},
		{
			name:   "version fields need a version",
			spec:   spec("m"),
			fields: []string{"version", "state", "version_label"},
			want:   map[string]string{},
		},
		{
			name:   "version fields",
			spec:   specVersion("m", 2),
			fields: []string{"version", "state", "version_label", "version", "base_path"},
			want:   map[string]string{"version": "2", "state": "30", "version_label": "None", "base_path": "'/tmp/m'"},
		},
		{
			name:   "unknown version: conf fields only",
			spec:   specVersion("m", 9),
			fields: []string{"version", "version_policy"},
			want:   map[string]string{"version_policy": "'latest'"},
		},
		{
			name:   "specific version_data",
			spec:   specVersion("s", 20),
			fields: []string{"version_policy", "version_data", "state"},
			want:   map[string]string{"version_policy": "'specific'", "version_data": "[10, 20, 30]", "state": "30"},
		},
		{
			name:   "all version_data",
			spec:   spec("a"),
			fields: []string{"version_policy", "version_data"},
			want:   map[string]string{"version_policy": "'latest'", "version_data": "None"},
		},
		{name: "no fields, unknown model", spec: spec("nope"), want: map[string]string{}},
		{name: "unknown model", spec: spec("nope"), fields: []string{"base_path"}, code: codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
			defer cancel()
			resp, err := f.ps.GetModelMetadata(ctx, &servingapis.GetModelMetadataRequest{ModelSpec: tc.spec, MetadataField: tc.fields})
			if tc.code != codes.OK {
				if status.Code(err) != tc.code {
					t.Fatalf("GetModelMetadata error = %v, want code %v", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetModelMetadata: %v", err)
			}
			got := map[string]string{}
			for k, a := range resp.GetMetadata() {
				if a.GetTypeUrl() != "" {
					t.Errorf("metadata %s has type_url %q, want none", k, a.GetTypeUrl())
				}
				got[k] = string(a.GetValue())
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("metadata = %v, want %v", got, tc.want)
			}
			if pytext.Format(resp.GetModelSpec()) != pytext.Format(tc.spec) {
				t.Errorf("model_spec = %v, want %v", resp.GetModelSpec(), tc.spec)
			}
		})
	}
}

func TestPredict(t *testing.T) {
	f := start(t, SingleModelConfig("m", "/b/m", 1), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := f.ps.Predict(ctx, &servingapis.PredictRequest{ModelSpec: specVersion("m", 1)})
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	if got, want := pytext.Format(resp), "model_spec {\n  name: \"m\"\n  version {\n    value: 1\n  }\n}\n"; got != want {
		t.Errorf("Predict = %q, want %q", got, want)
	}
}

// waitStates polls the model over gRPC until it shows want (real-time loops).
func waitStates(t *testing.T, f *fixture, model string, want func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := f.states(t, model)
		if want(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached the expected state; last %v", model, got)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func equalTo(want ...string) func([]string) bool {
	return func(got []string) bool { return slices.Equal(got, want) }
}

// TestRealTimeLoops runs the loops the binary uses: a ticker stepping the queue, new versions.
func TestRealTimeLoops(t *testing.T) {
	f := start(t, serverConfig(latest(t, "m", 1), latest(t, "n", 2)), Options{StepInterval: time.Millisecond})
	waitStates(t, f, "m", equalTo("1:AVAILABLE"))
	waitStates(t, f, "n", equalTo("1:AVAILABLE", "2:AVAILABLE"))

	g := start(t, serverConfig(latest(t, "m", 1)), Options{StepInterval: time.Millisecond, NewVersionInterval: 5 * time.Millisecond, Seed: 1})
	waitStates(t, g, "m", func(got []string) bool {
		// A later version took over from version 1.
		for _, s := range got {
			if strings.HasPrefix(s, "1:") || strings.HasPrefix(s, "NOT_FOUND") {
				return false
			}
		}
		return slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, ":AVAILABLE") })
	})
}

// TestConfigFilePolling: the config file is loaded at New and re-read like TF Serving's
// --model_config_file_poll_wait_seconds; a broken file leaves the models alone.
func TestConfigFilePolling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.config")
	writeText := func(text string) {
		t.Helper()
		// Atomically, so that no poll reads half a file.
		if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write := func(configs ...*servingconfig.ModelConfig) {
		t.Helper()
		writeText(pytext.Format(serverConfig(configs...)))
	}
	write(latest(t, "a", 1))
	f := start(t, nil, Options{ConfigFile: path, ConfigPollInterval: 2 * time.Millisecond, StepInterval: time.Millisecond})
	waitStates(t, f, "a", equalTo("1:AVAILABLE"))
	write(latest(t, "b", 1))
	waitStates(t, f, "b", equalTo("1:AVAILABLE"))
	waitStates(t, f, "a", equalTo("NOT_FOUND: a is not found"))
	writeText("model_config_list { config { nme: 1 } }")
	time.Sleep(20 * time.Millisecond) // several polls
	if got := f.states(t, "b"); !slices.Equal(got, []string{"1:AVAILABLE"}) {
		t.Errorf("after a broken file: b = %v", got)
	}
	writeText("")
	time.Sleep(20 * time.Millisecond)
	if got := f.states(t, "b"); !slices.Equal(got, []string{"1:AVAILABLE"}) {
		t.Errorf("after an empty file: b = %v", got)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.config")
	if err := os.WriteFile(bad, []byte("model_config_list { nope: 1 }"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		kind errkind.Kind
	}{
		{"missing config file", Options{ConfigFile: filepath.Join(dir, "missing")}, errkind.NotFound},
		{"malformed config file", Options{ConfigFile: bad}, errkind.Value},
		{"bad address", Options{Addr: "256.0.0.1:-1"}, errkind.Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(nil, tc.opts)
			if err == nil {
				_ = s.Stop(context.Background())
				t.Fatal("New succeeded")
			}
			if errkind.Of(err) != tc.kind {
				t.Errorf("New error %v: kind %v, want %v", err, errkind.Of(err), tc.kind)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	leaks := checkLeaks(t)
	s, err := New(nil, Options{StepInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Start(); errkind.Of(err) != errkind.Runtime {
		t.Errorf("Start after Stop = %v, want a Runtime error", err)
	}

	s, err = New(SingleModelConfig("m", "/b", 1), Options{StepInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); errkind.Of(err) != errkind.Runtime {
		t.Errorf("second Start = %v, want a Runtime error", err)
	}
	// An expired deadline forces the stop.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ctx); err != nil {
		t.Errorf("forced Stop: %v", err)
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	leaks()
}
