package modelserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/grpcrun"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs/configpoll"
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
	// ServerOptions are added to the gRPC server's (TLS credentials: pkg/tlsconfig).
	ServerOptions []grpc.ServerOption
}

// Server is the model server: ModelService and PredictionService over a Manager, with the loops
// that poll the file system and the config file.
type Server struct {
	mgr  *Manager
	opts Options
	cfg  *servingconfig.ModelServerConfig
	log  *slog.Logger
	run  *grpcrun.Runner
	conf *configpoll.Poller // polls Options.ConfigFile (when set); remembers the content last applied
}

// ReadConfig reads a ModelServerConfig in text format (a --model_config_file); a missing file is an
// error of kind NotFound, a bad one of kind Value, each naming the file.
func ReadConfig(file string) (*servingconfig.ModelServerConfig, []byte, error) {
	cfg, data, err := configpoll.Read(file)
	if err != nil {
		return nil, nil, err
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
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}, opts.ServerOptions...)...)
	run, err := grpcrun.Listen("model server", opts.Addr, gs, log)
	if err != nil {
		return nil, err
	}
	mopts := opts.Manager
	if mopts.Logger == nil {
		mopts.Logger = log
	}
	if mopts.Metrics == nil {
		mopts.Metrics = opts.Metrics
	}
	s := &Server{
		mgr:  NewManager(mopts),
		opts: opts,
		cfg:  cfg,
		log:  log,
		run:  run,
	}
	s.conf = configpoll.New(opts.ConfigFile, lastConf, s.applyConfig, log)
	opts.Metrics.Watch(s.mgr)
	servingapis.RegisterModelServiceServer(gs, &modelService{mgr: s.mgr, metrics: opts.Metrics})
	servingapis.RegisterPredictionServiceServer(gs, &predictionService{mgr: s.mgr, metrics: opts.Metrics})
	return s, nil
}

// Manager returns the model manager.
func (s *Server) Manager() *Manager { return s.mgr }

// Addr returns the address the server listens on (host:port).
func (s *Server) Addr() string { return s.run.Addr() }

// Start applies the initial config (its versions start loading in the background), serves gRPC
// and starts the polling loops; it returns at once. A server starts once.
func (s *Server) Start() error {
	return s.run.Start(func(every grpcrun.Every) error {
		if err := s.mgr.Reload(s.cfg.GetModelConfigList().GetConfig()); err != nil {
			return err // checked in New: cannot happen
		}
		every(s.opts.FileSystemPollInterval, s.mgr.Sync)
		if s.opts.ConfigFile != "" {
			// A changed file is applied; one that cannot be read or parsed, or an empty one (caught
			// between a truncate and a write), changes nothing.
			every(s.opts.ConfigPollInterval, s.conf.Poll)
		}
		return nil
	})
}

// applyConfig reloads the manager with the config file's new config.
func (s *Server) applyConfig(cfg *servingconfig.ModelServerConfig) error {
	if err := s.mgr.Reload(cfg.GetModelConfigList().GetConfig()); err != nil {
		return err
	}
	s.log.Info("model config file changed; applied", "file", s.opts.ConfigFile)
	return nil
}

// Wait blocks until the server stops serving and returns why (nil after Stop).
func (s *Server) Wait() error { return s.run.Wait() }

// Stop stops the polling loops and gRPC (requests in flight finish until ctx ends, then
// connections close), then unloads every version and waits for the loads and unloads to end
// (until ctx ends). Stopping twice is harmless.
func (s *Server) Stop(ctx context.Context) error { return s.run.Stop(ctx, s.mgr.Close) }
