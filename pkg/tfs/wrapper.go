package tfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

// Process is a TF Serving process the agent runs: the real one (Wrapper) or a stand-in for tests
// (FakeWrapper), as the reference's TFSWrapper and FakeTFSWrapper.
type Process interface {
	Start(ctx context.Context) error
	// Stop ends the process: SIGTERM, then SIGKILL after grace.
	Stop(grace time.Duration) error
	// Exited reports whether the process has ended, and its exit code.
	Exited() (bool, int)
	ModelConfigText() (string, error)
	ListSavedModels() ([]string, error)
	ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error)
}

// WrapperConfig describes a TF Serving process.
type WrapperConfig struct {
	Binary                         string
	ArchonPort, GRPCPort, HTTPPort int
	ModelConfigFile                string
	TFS                            utilsspec.TfServingConfig
	FetchPSTimeoutMs               int
	LogFile                        string
	// Dir is the process's working directory (the reference chdirs the whole agent there).
	Dir string
	// Env is the process's environment (default: the agent's).
	Env []string
	// PSM and Cluster fill the archon flags (the reference reads TCE_PSM and TCE_CLUSTER).
	PSM, Cluster string
}

// Wrapper runs tensorflow_model_server (tfs_wrapper.py's TFSWrapper).
type Wrapper struct {
	cfg          WrapperConfig
	grpcRemoteOp bool

	mu    sync.Mutex
	cmd   *exec.Cmd
	conn  *grpc.ClientConn
	model servingapis.ModelServiceClient
	done  chan struct{}
	code  int
}

// NewWrapper checks the binary and tells whether it is a gRPC remote-op build (it contains
// "PredictionServiceGrpc"; the reference runs `strings | grep` for that). The binary and the
// model config file are made absolute: the process runs in Dir, not in the agent's directory.
func NewWrapper(cfg WrapperConfig) (*Wrapper, error) {
	for _, p := range []*string{&cfg.Binary, &cfg.ModelConfigFile} {
		if *p == "" || (p == &cfg.Binary && !strings.Contains(*p, "/")) {
			continue // a bare binary name is looked up in PATH
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("tfs wrapper: %w", err)
		}
		*p = abs
	}
	data, err := os.ReadFile(cfg.Binary)
	if err != nil {
		return nil, errkind.Wrap(errkind.NotFound, fmt.Errorf("tfs wrapper: read binary: %w", err))
	}
	return &Wrapper{cfg: cfg, grpcRemoteOp: bytes.Contains(data, []byte("PredictionServiceGrpc"))}, nil
}

// GRPCRemoteOp reports whether the binary is a gRPC remote-op build.
func (w *Wrapper) GRPCRemoteOp() bool { return w.grpcRemoteOp }

// Command is the command line, flags in the reference's order.
func (w *Wrapper) Command() []string {
	c := w.cfg
	args := []string{c.Binary,
		"--model_config_file=" + c.ModelConfigFile,
		fmt.Sprintf("--port=%d", c.GRPCPort),
		fmt.Sprintf("--rest_api_port=%d", c.HTTPPort),
		"--model_config_file_poll_wait_seconds=60",
		fmt.Sprintf("--archon_port=%d", c.ArchonPort),
		"--archon_rpc_psm=" + c.PSM,
		"--archon_rpc_cluster=" + c.Cluster,
		"--metrics_namespace_prefix=" + c.PSM,
	}
	if !w.grpcRemoteOp {
		args = append(args, fmt.Sprintf("--archon_entry_to_ps_rpc_timeout=%d", c.FetchPSTimeoutMs))
	}
	args = append(args, "--conf_file=conf/service.conf", "--log_conf=conf/log4j.properties")
	for _, o := range agentconf.TFSOptions(&c.TFS) {
		switch {
		case o.Name == "platform_config_file" && o.Value == nil:
			args = append(args, "--platform_config_file=conf/platform_config_file.cfg")
		case o.Name == "platform_config_file" || !o.Default:
			args = append(args, o.Flag())
		}
	}
	return args
}

// Start runs the process with its output in LogFile and opens a channel to its gRPC port.
func (w *Wrapper) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil {
		return errkind.New(errkind.Runtime, "tfs wrapper: already started")
	}
	if d := w.cfg.Dir; d != "" {
		// Checked here so the error says what the directory is for (exec says "chdir ...").
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			if err == nil {
				err = errors.New("not a directory")
			}
			return errkind.Wrap(errkind.NotFound, fmt.Errorf("tfs wrapper: working directory %s (TF Serving reads its conf/ files from it): %w", d, err))
		}
	}
	log, err := os.Create(w.cfg.LogFile)
	if err != nil {
		return fmt.Errorf("tfs wrapper: log file: %w", err)
	}
	argv := w.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = w.cfg.Dir, log, log
	if w.cfg.Env != nil {
		cmd.Env = w.cfg.Env
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("tfs wrapper: start %s: %w", argv[0], err)
	}
	conn, err := grpc.NewClient(fmt.Sprintf("localhost:%d", w.cfg.GRPCPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
		return fmt.Errorf("tfs wrapper: channel: %w", err)
	}
	w.cmd, w.conn, w.model, w.done = cmd, conn, servingapis.NewModelServiceClient(conn), make(chan struct{})
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		w.mu.Lock()
		w.code = code
		w.mu.Unlock()
		log.Close()
		close(w.done)
	}()
	return nil
}

// Stop implements Process.
func (w *Wrapper) Stop(grace time.Duration) error {
	w.mu.Lock()
	cmd, done, conn := w.cmd, w.done, w.conn
	w.mu.Unlock()
	if cmd == nil {
		return nil
	}
	conn.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
	return nil
}

// Exited implements Process.
func (w *Wrapper) Exited() (bool, int) {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done == nil {
		return false, 0
	}
	select {
	case <-done:
		w.mu.Lock()
		defer w.mu.Unlock()
		return true, w.code
	default:
		return false, 0
	}
}

// Done is closed when the process has ended (nil before Start).
func (w *Wrapper) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// ModelConfigText implements Process.
func (w *Wrapper) ModelConfigText() (string, error) { return readConfigText(w.cfg.ModelConfigFile) }

// ListSavedModels implements Process.
func (w *Wrapper) ListSavedModels() ([]string, error) { return listSavedModels(w.cfg.ModelConfigFile) }

// ListSavedModelsStatus asks TF Serving for each configured model: the newest AVAILABLE version,
// else the newest; UNKNOWN when it reports none or the call fails (with the gRPC code).
func (w *Wrapper) ListSavedModelsStatus(ctx context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	names, err := w.ListSavedModels()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	client := w.model
	w.mu.Unlock()
	if client == nil {
		return nil, errkind.New(errkind.Runtime, "tfs wrapper: not started")
	}
	out := map[string]*servingapis.ModelVersionStatus{}
	for _, name := range names {
		cctx, cancel := context.WithTimeout(ctx, DefaultStatusTimeout)
		resp, err := client.GetModelStatus(cctx, &servingapis.GetModelStatusRequest{ModelSpec: modelconfig.ModelSpec(name, modelconfig.Version{}, nil)})
		cancel()
		out[name] = newestAvailable(resp, err)
	}
	return out, nil
}

func newestAvailable(resp *servingapis.GetModelStatusResponse, err error) *servingapis.ModelVersionStatus {
	if err != nil {
		return unknownStatus(err)
	}
	return NewestAvailable(resp.GetModelVersionStatus())
}

// NewestAvailable is the status of the highest AVAILABLE version (the last listed among equal
// versions), else of the highest version, else UNKNOWN for an empty list.
func NewestAvailable(statuses []*servingapis.ModelVersionStatus) *servingapis.ModelVersionStatus {
	list := append([]*servingapis.ModelVersionStatus(nil), statuses...)
	if len(list) == 0 {
		return &servingapis.ModelVersionStatus{State: servingapis.ModelVersionStatus_UNKNOWN}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].GetVersion() < list[j].GetVersion() })
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].GetState() == servingapis.ModelVersionStatus_AVAILABLE {
			return list[i]
		}
	}
	return list[len(list)-1]
}

func readConfigText(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("model config file: %w", err)
	}
	return string(b), nil
}

// listSavedModels names the models of a model config file, in file order.
func listSavedModels(file string) ([]string, error) {
	text, err := readConfigText(file)
	if err != nil {
		return nil, err
	}
	var cfg servingconfig.ModelServerConfig
	if err := prototext.Unmarshal([]byte(text), &cfg); err != nil {
		return nil, errkind.New(errkind.Value, "model config file %s: %v", file, err)
	}
	names := []string{}
	for _, mc := range cfg.GetModelConfigList().GetConfig() {
		names = append(names, mc.GetName())
	}
	return names, nil
}

// FakeWrapper stands in for TF Serving in tests (FakeTFSWrapper): nothing runs, the models are
// those of the model config file, all AVAILABLE.
type FakeWrapper struct {
	ModelConfigFile string
}

// Start implements Process.
func (f *FakeWrapper) Start(context.Context) error { return nil }

// Stop implements Process.
func (f *FakeWrapper) Stop(time.Duration) error { return nil }

// Exited implements Process: a fake never exits.
func (f *FakeWrapper) Exited() (bool, int) { return false, 0 }

// ModelConfigText implements Process.
func (f *FakeWrapper) ModelConfigText() (string, error) { return readConfigText(f.ModelConfigFile) }

// ListSavedModels implements Process.
func (f *FakeWrapper) ListSavedModels() ([]string, error) { return listSavedModels(f.ModelConfigFile) }

// ListSavedModelsStatus implements Process.
func (f *FakeWrapper) ListSavedModelsStatus(context.Context) (map[string]*servingapis.ModelVersionStatus, error) {
	names, err := f.ListSavedModels()
	if err != nil {
		return nil, err
	}
	out := map[string]*servingapis.ModelVersionStatus{}
	for _, n := range names {
		out[n] = &servingapis.ModelVersionStatus{State: servingapis.ModelVersionStatus_AVAILABLE}
	}
	return out, nil
}

var (
	_ Process = (*Wrapper)(nil)
	_ Process = (*FakeWrapper)(nil)
)
