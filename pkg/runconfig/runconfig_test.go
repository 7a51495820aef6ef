package runconfig

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

var quiet = slog.New(slog.DiscardHandler)

// parse parses args into the generated RunnerFlags with kong, as the training command does.
func parse(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var f RunnerFlags
	p, err := kong.New(&f, kong.Name("train"), kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(args); err != nil {
		t.Fatal(err)
	}
	return FlagValues(&f)
}

func TestFlags(t *testing.T) {
	fl := parse(t)
	if fl["num_ps"] != 0 || fl["discovery_type"] != "consul" || fl["sort_id"] != true || fl["monolith_grpc_worker_service_handler_multiplier"] != 1.0 {
		t.Fatalf("defaults: %v", fl)
	}
	if _, given := fl["restore_ckpt"]; given {
		t.Fatal("an optional flag not given is in the values")
	}
	fl = parse(t, "--restore_ckpt=model.ckpt-3", "--partial_recovery", "--sort_id=false", "--deep_insight_sample_ratio=0.25", "--start_hour=7")
	if fl["restore_ckpt"] != "model.ckpt-3" || fl["partial_recovery"] != true || fl["sort_id"] != false || fl["deep_insight_sample_ratio"] != 0.25 || fl["start_hour"] != 7 {
		t.Fatalf("given: %v", fl)
	}
	if n := len(FlagNames()); n != 121 {
		t.Fatalf("%d flags, want the reference's 121 (every documented field but device_fn and reload_alias_map)", n)
	}
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name         string
		values       map[string]any
		args         []string
		env          map[string]string
		check        func(c *RunnerConfig) bool
		wantExplicit []string
		kind         errkind.Kind
		msg          string // the error's exact message, when set
	}{
		{name: "defaults", check: func(c *RunnerConfig) bool {
			return c.NumPS == 0 && c.DiscoveryType == "consul" && c.MaxRetryTimes == 0 && c.RetryWaitInSecs == 30 && c.RestoreDir == nil
		}},
		{name: "flag over a default", args: []string{"--num_ps=4", "--model_dir=/flag"},
			check: func(c *RunnerConfig) bool { return c.NumPS == 4 && c.ModelDir == "/flag" }, wantExplicit: []string{"num_ps", "model_dir"}},
		{name: "value over a flag", values: map[string]any{"num_ps": 2}, args: []string{"--num_ps=4"},
			check: func(c *RunnerConfig) bool { return c.NumPS == 2 }, wantExplicit: []string{"num_ps"}},
		{name: "value at its default loses to a flag", values: map[string]any{"num_ps": 0}, args: []string{"--num_ps=4"},
			check: func(c *RunnerConfig) bool { return c.NumPS == 4 }, wantExplicit: []string{"num_ps"}},
		{name: "flag at its default changes nothing", values: map[string]any{"num_workers": 5}, args: []string{"--num_workers=1"},
			check: func(c *RunnerConfig) bool { return c.NumWorkers == 5 }, wantExplicit: []string{"num_workers"}},
		{name: "optional flag", args: []string{"--restore_dir=/r", "--ps_replica_num=3"},
			check: func(c *RunnerConfig) bool { return *c.RestoreDir == "/r" && *c.PSReplicaNum == 3 }, wantExplicit: []string{"ps_replica_num", "restore_dir"}},
		{name: "json numbers", values: map[string]any{"num_ps": json.Number("3"), "monolith_grpc_worker_service_handler_multiplier": json.Number("2")},
			check:        func(c *RunnerConfig) bool { return c.NumPS == 3 && c.MonolithGRPCWorkerServiceHandlerMultiplier == 2 },
			wantExplicit: []string{"num_ps", "monolith_grpc_worker_service_handler_multiplier"}},
		{name: "kafka topics split", values: map[string]any{"kafka_topics": "a,b"},
			check: func(c *RunnerConfig) bool { return reflect.DeepEqual(c.KafkaTopics, []string{"a", "b"}) }, wantExplicit: []string{"kafka_topics"}},
		{name: "partial sync gpu worker index from the MPI rank", values: map[string]any{"enable_gpu_training": true, "enable_partial_sync_training": true},
			env: map[string]string{"OMPI_COMM_WORLD_RANK": "5"}, check: func(c *RunnerConfig) bool { return c.Index == 5 },
			wantExplicit: []string{"enable_partial_sync_training", "enable_gpu_training"}},
		{name: "linked dataset flag", args: nil, check: func(c *RunnerConfig) bool { return c.UseDataservice == nil }},
		{name: "unknown field", values: map[string]any{"nope": 1}, kind: errkind.Type},
		{name: "wrong type", values: map[string]any{"num_ps": "3"}, kind: errkind.Type},
		{name: "none for a required field", values: map[string]any{"num_ps": nil}, kind: errkind.Type},
		{name: "bad address family", values: map[string]any{"zk_watch_address_family": "ipv5"}, kind: errkind.Precondition},
		{name: "bad discovery type", values: map[string]any{"discovery_type": "dns"}, kind: errkind.Value},
		{name: "bad MPI rank", values: map[string]any{"enable_gpu_training": true, "enable_partial_sync_training": true},
			env: map[string]string{"OMPI_COMM_WORLD_RANK": "x1"}, kind: errkind.Value, msg: "invalid literal for int() with base 10: 'x1'"},
		{name: "MPI rank as Python's int reads it", values: map[string]any{"enable_gpu_training": true, "enable_partial_sync_training": true},
			env: map[string]string{"OMPI_COMM_WORLD_RANK": " +1_0 "}, check: func(c *RunnerConfig) bool { return c.Index == 10 },
			wantExplicit: []string{"enable_partial_sync_training", "enable_gpu_training"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Sources{Values: tc.values, Flags: parse(t, tc.args...), Env: func(k string) (string, bool) {
				v, ok := tc.env[k]
				return v, ok
			}})
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("New = %v, want kind %v", err, tc.kind)
				}
				if tc.msg != "" && err.Error() != tc.msg {
					t.Fatalf("New = %q, want the message %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("unexpected config %+v", c.RunnerConfig)
			}
			if got := c.Explicit(); !sameSet(got, tc.wantExplicit) {
				t.Fatalf("Explicit() = %v, want %v", got, tc.wantExplicit)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

func TestLinkedFlag(t *testing.T) {
	c, err := New(Sources{Flags: map[string]any{"dataset_use_dataservice": true}})
	if err != nil || c.UseDataservice == nil || !*c.UseDataservice || !reflect.DeepEqual(c.Explicit(), []string{"use_dataservice"}) {
		t.Fatalf("New = %+v, %v", c, err)
	}
	c, _ = New(Sources{Values: map[string]any{"use_dataservice": false}, Flags: map[string]any{"dataset_use_dataservice": true}})
	if *c.UseDataservice {
		t.Fatal("the linked flag overrode a value the user set")
	}
}

func TestEnvExports(t *testing.T) {
	c, err := New(Sources{Values: map[string]any{"tf_grpc_worker_cache_threads": 32, "monolith_grpc_worker_service_handler_multiplier": 1e-05}})
	if err != nil {
		t.Fatal(err)
	}
	want := []EnvVar{{"TF_GRPC_WORKER_CACHE_THREADS", "32"}, {"MONOLITH_GRPC_WORKER_SERVICE_HANDLER_MULTIPLIER", "1e-05"}}
	if got := c.EnvExports(); !reflect.DeepEqual(got, want) {
		t.Fatalf("EnvExports = %v, want %v", got, want)
	}
	env := map[string]string{}
	if err := c.ExportEnv(func(k, v string) error { env[k] = v; return nil }); err != nil || env["TF_GRPC_WORKER_CACHE_THREADS"] != "32" {
		t.Fatalf("ExportEnv = %v, %v", env, err)
	}
	boom := errors.New("read-only environment")
	if err := c.ExportEnv(func(string, string) error { return boom }); !errors.Is(err, boom) || !strings.Contains(err.Error(), "TF_GRPC_WORKER_CACHE_THREADS") {
		t.Fatalf("ExportEnv with a failing setter = %v", err)
	}
	if _, set := os.LookupEnv("TF_GRPC_WORKER_CACHE_THREADS"); set {
		t.Fatal("the process environment was changed")
	}
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		values map[string]any
		want   string
		kind   errkind.Kind
	}{
		{values: map[string]any{"is_local": true}, want: ""},
		{values: map[string]any{}, want: DiscoveryConsul},
		{values: map[string]any{"discovery_type": "mlp"}, want: DiscoveryMLP},
		{values: map[string]any{"discovery_type": "zk"}, want: DiscoveryZK},
		{values: map[string]any{"discovery_type": "primus", "tf_config": "{}"}, want: DiscoveryPrimus},
		{values: map[string]any{"discovery_type": "primus"}, kind: errkind.Precondition},
	}
	for _, tc := range tests {
		c, err := New(Sources{Values: tc.values})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Discovery()
		if errkind.Of(err) != tc.kind || got != tc.want {
			t.Errorf("%v: Discovery() = %q, %v", tc.values, got, err)
		}
	}
}

func TestRunConfig(t *testing.T) {
	tests := []struct {
		name       string
		values     map[string]any
		args       []string
		userParams []string
		check      func(c *RunnerConfig) bool
	}{
		{name: "defaults", check: func(c *RunnerConfig) bool {
			// consul becomes zk; CPU training gets embedding prefetch and post-push; RunConfig's
			// max_retry_times default (6) does not override DistributedCpuTrainingConfig's (0).
			return c.DiscoveryType == DiscoveryZK && c.EmbeddingPrefetchCapacity == 1 && c.EnableEmbeddingPostpush && c.MaxRetryTimes == 0
		}},
		{name: "values", values: map[string]any{"num_ps": 2, "model_dir": "/m", "max_retry_times": 3}, userParams: []string{"num_ps", "max_retry_times", "model_dir"},
			check: func(c *RunnerConfig) bool { return c.NumPS == 2 && c.ModelDir == "/m" && c.MaxRetryTimes == 3 }},
		{name: "flag beats a RunConfig default", args: []string{"--num_ps=5"}, check: func(c *RunnerConfig) bool { return c.NumPS == 5 }},
		{name: "RunConfig value beats a flag", values: map[string]any{"num_ps": 3}, args: []string{"--num_ps=5"}, userParams: []string{"num_ps"},
			check: func(c *RunnerConfig) bool { return c.NumPS == 3 }},
		{name: "gpu keeps its prefetch", args: []string{"--enable_gpu_training"}, check: func(c *RunnerConfig) bool {
			return c.EmbeddingPrefetchCapacity == 0 && !c.EnableEmbeddingPostpush
		}},
		{name: "parameter sync", values: map[string]any{"enable_parameter_sync": true}, userParams: []string{"enable_parameter_sync"},
			check: func(c *RunnerConfig) bool { return c.EnableRealtimeTraining }},
		{name: "kafka topics stay a list", values: map[string]any{"kafka_topics": "t1,t2"}, userParams: []string{"kafka_topics"},
			check: func(c *RunnerConfig) bool { return reflect.DeepEqual(c.KafkaTopics, []string{"t1", "t2"}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := NewRunConfig(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if got := rc.UserParams(); !reflect.DeepEqual(got, tc.userParams) {
				t.Fatalf("UserParams() = %v, want %v", got, tc.userParams)
			}
			c, err := rc.ToRunnerConfig(parse(t, tc.args...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Fatalf("unexpected config %+v", c.RunnerConfig)
			}
		})
	}
	if _, err := NewRunConfig(map[string]any{"no_such": 1}); errkind.Of(err) != errkind.Type {
		t.Fatalf("unknown RunConfig field: %v", err)
	}
}

// TestPrepareRestore: the chief copies restore_dir's state into model_dir; another worker waits for
// it, and fails with an error naming the file when the chief never writes it.
func TestPrepareRestore(t *testing.T) {
	leakcheck.Check(t)
	root := t.TempDir()
	restoreDir, modelDir := filepath.Join(root, "restore"), filepath.Join(root, "model")
	if err := os.MkdirAll(restoreDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteDense(filepath.Join(restoreDir, "model.ckpt-8"), []checkpoint.Tensor{{Name: "global_step", Int64: []int64{8}}}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteState(restoreDir, filepath.Join(restoreDir, "model.ckpt-8"), nil, checkpoint.WriteStateOptions{}); err != nil {
		t.Fatal(err)
	}
	newConf := func(index int) *RunnerConfig {
		c, err := New(Sources{Values: map[string]any{"restore_dir": restoreDir, "model_dir": modelDir, "index": index}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	opts := RestoreOptions{Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond, Log: quiet}

	err := newConf(1).PrepareRestore(ctx, opts)
	want := filepath.Join(modelDir, checkpoint.MonolithStateFile)
	if !errors.Is(err, checkpoint.ErrWaitTimeout) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), restoreDir) {
		t.Fatalf("worker without a chief: %v; want a timeout naming %s and restore_dir", err, want)
	}

	done := make(chan error, 1)
	go func() {
		done <- newConf(2).PrepareRestore(ctx, RestoreOptions{Timeout: 10 * time.Second, Poll: 5 * time.Millisecond, Log: quiet})
	}()
	if err := newConf(0).PrepareRestore(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("worker after the chief: %v", err)
	}
	prefix, step, _, err := checkpoint.RestoreDense(modelDir, "", quiet)
	if err != nil || step != 8 || prefix != filepath.Join(restoreDir, "model.ckpt-8") {
		t.Fatalf("model_dir restores %s (%d), %v", prefix, step, err)
	}
	if c := newConf(0); c.PrepareRestore(ctx, opts) != nil {
		t.Fatal("a second chief start failed")
	}
	// Without restore_dir there is nothing to do.
	c, _ := New(Sources{})
	if err := c.PrepareRestore(ctx, opts); err != nil {
		t.Fatal(err)
	}
}

func TestGetCheckpointState(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []string{"1", "2"} {
		if err := checkpoint.WriteDense(filepath.Join(dir, "model.ckpt-"+step), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkpoint.WriteState(dir, filepath.Join(dir, "model.ckpt-2"), []string{filepath.Join(dir, "model.ckpt-1")}, checkpoint.WriteStateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := New(Sources{Flags: parse(t, "--restore_ckpt=model.ckpt-1", "--mode=eval")})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.GetCheckpointState(dir, "", quiet)
	if err != nil || st.ModelCheckpointPath != filepath.Join(dir, "model.ckpt-1") {
		t.Fatalf("GetCheckpointState = %v, %v", st, err)
	}
	if !IsAbs("hdfs://ns/x") || IsAbs("x") {
		t.Fatal("IsAbs")
	}
}
