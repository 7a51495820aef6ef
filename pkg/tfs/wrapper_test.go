package tfs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
)

const twoModels = `model_config_list {
  config {
    name: "m:entry"
    base_path: "/models/m/entry"
    model_platform: "tensorflow"
    model_version_policy {
      latest {
        num_versions: 1
      }
    }
  }
  config {
    name: "m:ps_0"
    base_path: "/models/m/ps_0"
    model_platform: "tensorflow"
  }
}
`

func TestWrapperCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tensorflow_model_server")
	os.WriteFile(bin, []byte("\x7fELF...PredictionServiceGrpc..."), 0o755)
	tfs := utilsspec.DefaultTfServingConfig()
	tfs.EnableBatching = true
	tfs.PerProcessGPUMemoryFraction = 0.5
	w, err := NewWrapper(WrapperConfig{Binary: bin, ArchonPort: 1, GRPCPort: 2, HTTPPort: 3, ModelConfigFile: "/m.cfg",
		TFS: tfs, FetchPSTimeoutMs: 200, PSM: "p", Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if !w.GRPCRemoteOp() {
		t.Fatal("binary containing PredictionServiceGrpc not detected as gRPC remote op")
	}
	want := bin + " --model_config_file=/m.cfg --port=2 --rest_api_port=3 --model_config_file_poll_wait_seconds=60 --archon_port=1" +
		" --archon_rpc_psm=p --archon_rpc_cluster=c --metrics_namespace_prefix=p --conf_file=conf/service.conf --log_conf=conf/log4j.properties" +
		" --enable_batching=true --platform_config_file=conf/platform_config_file.cfg --per_process_gpu_memory_fraction=0.5"
	if got := strings.Join(w.Command(), " "); got != want {
		t.Fatalf("command:\n%s\nwant:\n%s", got, want)
	}
	if _, err := NewWrapper(WrapperConfig{Binary: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Fatal("a missing binary must be an error")
	}
}

// TestWrapperRunsProcess runs the fake TF Serving binary through the wrapper: it loads the model
// config file, the models turn AVAILABLE, and Stop ends the process.
func TestWrapperRunsProcess(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "model.cfg")
	if err := os.WriteFile(cfg, []byte(twoModels), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewWrapper(WrapperConfig{Binary: faketfsbin.Path(t), GRPCPort: freePort(t), HTTPPort: 0, ArchonPort: 0,
		ModelConfigFile: cfg, TFS: utilsspec.DefaultTfServingConfig(), LogFile: filepath.Join(dir, "tfs.log"), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(5 * time.Second)
	names, err := w.ListSavedModels()
	if err != nil || strings.Join(names, ",") != "m:entry,m:ps_0" {
		t.Fatalf("saved models %v %v", names, err)
	}
	for {
		st, err := w.ListSavedModelsStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st["m:entry"].GetState() == servingapis.ModelVersionStatus_AVAILABLE && st["m:ps_0"].GetState() == servingapis.ModelVersionStatus_AVAILABLE {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("models never AVAILABLE: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if exited, _ := w.Exited(); exited {
		t.Fatal("process exited early")
	}
	if err := w.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if exited, _ := w.Exited(); !exited {
		t.Fatal("process still running after Stop")
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "tfs.log")); len(log) == 0 {
		t.Error("process output not in the log file")
	}
}

// TestWrapperWorkingDirectory: TF Serving runs in Dir whatever the agent's working directory, with
// a binary and a model config file given relative to the agent's directory (both are made
// absolute: exec reads a relative binary from Dir); a missing Dir is an error saying what it is.
func TestWrapperWorkingDirectory(t *testing.T) {
	bin := faketfsbin.Path(t) // before Chdir: it may build the binary in this module
	agentDir, tfsDir := t.TempDir(), t.TempDir()
	t.Chdir(agentDir)
	if err := os.Symlink(bin, "fake_tfs"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("model.cfg", []byte(twoModels), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	missing := filepath.Join(tfsDir, "missing")
	w, err := NewWrapper(WrapperConfig{Binary: "./fake_tfs", ModelConfigFile: "model.cfg", GRPCPort: freePort(t),
		TFS: utilsspec.DefaultTfServingConfig(), LogFile: filepath.Join(tfsDir, "tfs.log"), Dir: missing})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil || !strings.Contains(err.Error(), "working directory "+missing) {
		w.Stop(time.Second)
		t.Fatalf("Start in a missing directory: %v, want an error naming it", err)
	}

	w, err = NewWrapper(WrapperConfig{Binary: "./fake_tfs", ModelConfigFile: "model.cfg", GRPCPort: freePort(t),
		TFS: utilsspec.DefaultTfServingConfig(), LogFile: filepath.Join(tfsDir, "tfs.log"), Dir: tfsDir})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Command(); got[0] != filepath.Join(agentDir, "fake_tfs") || got[1] != "--model_config_file="+filepath.Join(agentDir, "model.cfg") {
		t.Errorf("command %v: want the binary and the config file absolute", got[:2])
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(5 * time.Second)
	for {
		st, err := w.ListSavedModelsStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st["m:entry"].GetState() == servingapis.ModelVersionStatus_AVAILABLE {
			break
		}
		if exited, code := w.Exited(); exited || ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(tfsDir, "tfs.log"))
			t.Fatalf("m:entry never AVAILABLE (exited %v, code %d): %v\n%s", exited, code, st, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFakeWrapper(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "model.cfg")
	os.WriteFile(cfg, []byte(twoModels), 0o644)
	f := &FakeWrapper{ModelConfigFile: cfg}
	st, err := f.ListSavedModelsStatus(context.Background())
	if err != nil || len(st) != 2 || st["m:ps_0"].GetState() != servingapis.ModelVersionStatus_AVAILABLE {
		t.Fatalf("fake status %v %v", st, err)
	}
	os.WriteFile(cfg, []byte("model_config_list { bogus: 1 }"), 0o644)
	if _, err := f.ListSavedModels(); err == nil {
		t.Fatal("a malformed model config file must be an error")
	}
}
