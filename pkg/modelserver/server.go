package modelserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/grpcstop"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

// MaxMessageBytes bounds the gRPC messages the server takes and sends (TF Serving sets no bound; a
// Predict of a large batch exceeds gRPC's default 4 MiB).
const MaxMessageBytes = 1 << 30

// Options configure a Server.
type Options struct {
	// Addr is the address to listen on; empty means "127.0.0.1:0".
	Addr string
	// Manager configures the model manager (loaders, load threads and retries).
	Manager ManagerOptions
	// ConfigFile is a ModelServerConfig in text format, loaded by New when it gets no config and
	// re-read every ConfigPollInterval when that is positive (a changed file is applied as a
	// reload).
	ConfigFile         string
	ConfigPollInterval time.Duration
	// FileSystemPollInterval is how often the base paths are listed for new versions; 0 lists
	// them only when the config changes.
	FileSystemPollInterval time.Duration
	// Metrics, when set, count requests and loads and report version states.
	Metrics *Metrics
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
}

// Server is the model server: ModelService and PredictionService over a Manager, with the loops
// that poll the file system and the config file.
type Server struct {
	mgr  *Manager
	opts Options
	cfg  *servingconfig.ModelServerConfig
	log  *slog.Logger
	lis  net.Listener
	grpc *grpc.Server

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopped  bool
	served   chan struct{}
	serveErr error
	lastConf []byte
}

// ReadConfig reads a ModelServerConfig in text format (a --model_config_file); a missing file is an
// error of kind NotFound, a bad one of kind Value, each naming the file.
func ReadConfig(file string) (*servingconfig.ModelServerConfig, []byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, errkind.Wrap(errkind.NotFound, fmt.Errorf("model config file: %w", err))
	}
	cfg := &servingconfig.ModelServerConfig{}
	if err := prototext.Unmarshal(data, cfg); err != nil {
		return nil, nil, errkind.Wrap(errkind.Value, fmt.Errorf("model config file %s: %w", file, err))
	}
	if err := CheckConfig(cfg.GetModelConfigList().GetConfig()); err != nil {
		return nil, nil, errkind.Wrap(errkind.Value, fmt.Errorf("model config file %s: %w", file, err))
	}
	return cfg, data, nil
}

// SingleModelConfig is the config of --model_name and --model_base_path: one model under TF
// Serving's default policy (the newest version).
func SingleModelConfig(name, basePath string) *servingconfig.ModelServerConfig {
	mc, _ := modelconfig.ModelConfig(name, basePath, modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: []*servingconfig.ModelConfig{mc}}}}
}

// New listens on opts.Addr and returns a server that will serve cfg's models (or, when cfg is nil,
// opts.ConfigFile's; none when neither is given) once started.
func New(cfg *servingconfig.ModelServerConfig, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lastConf []byte
	if cfg == nil && opts.ConfigFile != "" {
		var err error
		if cfg, lastConf, err = ReadConfig(opts.ConfigFile); err != nil {
			return nil, err
		}
	}
	if cfg != nil && cfg.GetModelConfigList() == nil && cfg.GetConfig() != nil {
		return nil, errkind.New(errkind.Value, "model server config: only a model_config_list is served")
	}
	if err := CheckConfig(cfg.GetModelConfigList().GetConfig()); err != nil {
		return nil, errkind.Wrap(errkind.Value, fmt.Errorf("model server config: %w", err))
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("model server: listen: %w", err)
	}
	mopts := opts.Manager
	if mopts.Logger == nil {
		mopts.Logger = log
	}
	if mopts.Metrics == nil {
		mopts.Metrics = opts.Metrics
	}
	s := &Server{
		mgr:      NewManager(mopts),
		opts:     opts,
		cfg:      cfg,
		log:      log,
		lis:      lis,
		grpc:     grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)),
		served:   make(chan struct{}),
		lastConf: lastConf,
	}
	opts.Metrics.Watch(s.mgr)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	servingapis.RegisterModelServiceServer(s.grpc, &modelService{mgr: s.mgr, metrics: opts.Metrics})
	servingapis.RegisterPredictionServiceServer(s.grpc, &predictionService{mgr: s.mgr, metrics: opts.Metrics})
	return s, nil
}

// Manager returns the model manager.
func (s *Server) Manager() *Manager { return s.mgr }

// Addr returns the address the server listens on (host:port).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Start applies the initial config (its versions start loading in the background), serves gRPC
// and starts the polling loops; it returns at once. A server starts once.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errkind.New(errkind.Runtime, "model server: already started or stopped")
	}
	s.started = true
	if err := s.mgr.Reload(s.cfg.GetModelConfigList().GetConfig()); err != nil {
		return err // checked in New: cannot happen
	}
	go func() {
		err := s.grpc.Serve(s.lis)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		s.mu.Lock()
		s.serveErr = err
		s.mu.Unlock()
		close(s.served)
	}()
	s.every(s.opts.FileSystemPollInterval, s.mgr.Sync)
	if s.opts.ConfigFile != "" {
		s.every(s.opts.ConfigPollInterval, s.pollConfig)
	}
	s.log.Info("model server serving", "addr", s.Addr())
	return nil
}

// every runs fn every d (when d is positive) until the server stops.
func (s *Server) every(d time.Duration, fn func()) {
	if d <= 0 {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// pollConfig re-reads the config file and applies it when it changed. A file that cannot be read
// or parsed, or an empty one (caught between a truncate and a write), changes nothing.
func (s *Server) pollConfig() {
	data, err := os.ReadFile(s.opts.ConfigFile)
	if err != nil {
		s.log.Error("poll model config file", "file", s.opts.ConfigFile, "err", err)
		return
	}
	s.mu.Lock()
	same := bytes.Equal(data, s.lastConf)
	s.mu.Unlock()
	if same || len(bytes.TrimSpace(data)) == 0 {
		return
	}
	cfg := &servingconfig.ModelServerConfig{}
	if err := prototext.Unmarshal(data, cfg); err != nil {
		s.log.Error("poll model config file", "file", s.opts.ConfigFile, "err", err)
		return
	}
	if err := s.mgr.Reload(cfg.GetModelConfigList().GetConfig()); err != nil {
		s.log.Error("poll model config file", "file", s.opts.ConfigFile, "err", err)
		return
	}
	s.mu.Lock()
	s.lastConf = data
	s.mu.Unlock()
	s.log.Info("model config file changed; applied", "file", s.opts.ConfigFile)
}

// Wait blocks until the server stops serving and returns why (nil after Stop).
func (s *Server) Wait() error {
	<-s.served
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serveErr
}

// Stop stops the polling loops and gRPC (requests in flight finish until ctx ends, then
// connections close), then unloads every version and waits for the loads and unloads to end
// (until ctx ends). Stopping twice is harmless.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		if s.started {
			return s.Wait()
		}
		return nil
	}
	s.stopped = true
	started := s.started
	s.mu.Unlock()

	s.cancel()
	if grpcstop.Graceful(ctx, s.grpc) {
		s.log.Warn("model server: graceful stop timed out; closed the connections")
	}
	s.wg.Wait()
	closeErr := s.mgr.Close(ctx)
	if !started {
		_ = s.lis.Close() // Serve never took it over
		close(s.served)
		return closeErr
	}
	return errors.Join(s.Wait(), closeErr)
}
