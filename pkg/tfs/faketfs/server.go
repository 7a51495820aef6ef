package faketfs

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/grpcrun"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs/configpoll"
)

// DefaultNewVersionInterval is how often the reference adds a version to a random model.
const DefaultNewVersionInterval = 30 * time.Second

// Options configure a Server. The zero value listens on a free loopback port and moves nothing by
// itself: tests step the model manager (Server.Step / Tick / Drain).
type Options struct {
	// Addr is the address to listen on; empty means "127.0.0.1:0".
	Addr string
	// StepInterval, when positive, runs ModelMgr.Tick that often, so versions move one state per
	// interval.
	StepInterval time.Duration
	// NewVersionInterval, when positive, adds a version to a random model that often
	// (DefaultNewVersionInterval is the reference's period).
	NewVersionInterval time.Duration
	// ConfigFile is a ModelServerConfig in text format. It is loaded at New when New gets no
	// config, and re-read every ConfigPollInterval when that is positive (TF Serving's
	// --model_config_file_poll_wait_seconds): a changed file is applied as a reload.
	ConfigFile         string
	ConfigPollInterval time.Duration
	// Seed seeds the choice of the model that gets a new version.
	Seed uint64
	// Logger receives the state changes; nil discards them.
	Logger *slog.Logger
}

// Server is the fake TF Serving (the reference's FakeTFServing): a gRPC server with ModelService
// and PredictionService over a ModelMgr.
type Server struct {
	mgr  *ModelMgr
	opts Options
	log  *slog.Logger
	run  *grpcrun.Runner
	conf *configpoll.Poller // polls Options.ConfigFile (when set); remembers the content last applied
}

// New listens on opts.Addr and returns a server whose models are cfg's model_config_list (or,
// when cfg is nil, opts.ConfigFile's; nothing when neither is given). It serves once Start is
// called.
func New(cfg *servingconfig.ModelServerConfig, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lastConf []byte
	if cfg == nil && opts.ConfigFile != "" {
		var err error
		if cfg, lastConf, err = configpoll.Read(opts.ConfigFile); err != nil {
			return nil, fmt.Errorf("fake tfs: %w", err)
		}
	}
	gs := grpc.NewServer()
	run, err := grpcrun.Listen("fake tfs", opts.Addr, gs, log)
	if err != nil {
		return nil, err
	}
	s := &Server{
		mgr:  NewModelMgr(cfg.GetModelConfigList().GetConfig(), log),
		opts: opts,
		log:  log,
		run:  run,
	}
	s.conf = configpoll.New(opts.ConfigFile, lastConf, s.applyConfig, log)
	servingapis.RegisterModelServiceServer(gs, &modelService{mgr: s.mgr})
	servingapis.RegisterPredictionServiceServer(gs, &predictionService{mgr: s.mgr})
	return s, nil
}

// ParseConfig parses a ModelServerConfig in text format (a --model_config_file); a bad one is an
// error of kind Value.
func ParseConfig(data []byte) (*servingconfig.ModelServerConfig, error) {
	return configpoll.Parse(data)
}

// SingleModelConfig is the config the reference's FakeTFServing(model_name, base_path,
// num_versions) serves: one model under the latest-num_versions policy.
func SingleModelConfig(name, basePath string, numVersions int64) *servingconfig.ModelServerConfig {
	mc, _ := modelconfig.ModelConfig(name, basePath, modelconfig.PolicyLatest, modelconfig.VersionData{N: numVersions}, nil)
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: []*servingconfig.ModelConfig{mc}}}}
}

// Mgr returns the model manager.
func (s *Server) Mgr() *ModelMgr { return s.mgr }

// Addr returns the address the server listens on (host:port).
func (s *Server) Addr() string { return s.run.Addr() }

// Port returns the port the server listens on.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr())
	n, _ := strconv.Atoi(p)
	return n
}

// Step, Tick and Drain step the model manager (see ModelMgr).
func (s *Server) Step() (Event, bool) { return s.mgr.Step() }

// Tick handles the events queued before the call (see ModelMgr.Tick).
func (s *Server) Tick() int { return s.mgr.Tick() }

// Drain handles events until none is left (see ModelMgr.Drain).
func (s *Server) Drain() int { return s.mgr.Drain() }

// Start serves gRPC and starts the loops Options asks for; it returns at once. A server starts
// once; starting a stopped server is an error of kind Runtime.
func (s *Server) Start() error {
	return s.run.Start(func(every grpcrun.Every) error {
		every(s.opts.StepInterval, func() { s.mgr.Tick() })
		if s.opts.NewVersionInterval > 0 {
			r := rand.New(rand.NewPCG(s.opts.Seed, 0x6d6f6e6f6c697468))
			every(s.opts.NewVersionInterval, func() {
				if name, v, ok := s.mgr.NewRandomVersion(r); ok {
					s.log.Info("simulated a new version", "model", name, "version", v)
				}
			})
		}
		if s.opts.ConfigFile != "" {
			// A changed file is applied as a reload. One that cannot be read or parsed is logged and
			// the models are left as they are, as TF Serving does; an empty file is taken for one
			// being rewritten and skipped.
			every(s.opts.ConfigPollInterval, s.conf.Poll)
		}
		return nil
	})
}

// applyConfig reloads the model manager with the config file's new config (a reload cannot fail).
func (s *Server) applyConfig(cfg *servingconfig.ModelServerConfig) error {
	removed, loaded := s.mgr.Reload(cfg.GetModelConfigList().GetConfig())
	s.log.Info("model config file changed", "file", s.opts.ConfigFile, "removed", removed, "loaded", loaded)
	return nil
}

// Wait blocks until the server stops serving and returns why (nil after Stop).
func (s *Server) Wait() error { return s.run.Wait() }

// Stop stops the loops and the gRPC server: gracefully (in-flight RPCs finish) until ctx is done,
// then forcibly. It returns the error Serve failed with, if any. Stopping twice is harmless.
func (s *Server) Stop(ctx context.Context) error { return s.run.Stop(ctx, nil) }

type modelService struct {
	servingapis.UnimplementedModelServiceServer
	mgr *ModelMgr
}

func (m *modelService) GetModelStatus(_ context.Context, req *servingapis.GetModelStatusRequest) (*servingapis.GetModelStatusResponse, error) {
	return &servingapis.GetModelStatusResponse{ModelVersionStatus: m.mgr.Status(req.GetModelSpec())}, nil
}

func (m *modelService) HandleReloadConfigRequest(_ context.Context, req *servingapis.ReloadConfigRequest) (*servingapis.ReloadConfigResponse, error) {
	m.mgr.Reload(req.GetConfig().GetModelConfigList().GetConfig())
	return &servingapis.ReloadConfigResponse{Status: modelconfig.Status(tfprotobuf.Code_OK, nil)}, nil
}

type predictionService struct {
	servingapis.UnimplementedPredictionServiceServer
	mgr *ModelMgr
}

func specOf(spec *servingapis.ModelSpec) *servingapis.ModelSpec {
	if spec == nil {
		return &servingapis.ModelSpec{}
	}
	return proto.Clone(spec).(*servingapis.ModelSpec)
}

// Predict runs nothing: an empty response echoing the model spec.
func (p *predictionService) Predict(_ context.Context, req *servingapis.PredictRequest) (*servingapis.PredictResponse, error) {
	return &servingapis.PredictResponse{ModelSpec: specOf(req.GetModelSpec())}, nil
}

// GetModelMetadata answers the requested fields (ModelMgr.Metadata), each as an Any whose value is
// the Python repr of the field (no type URL), as the reference does.
func (p *predictionService) GetModelMetadata(_ context.Context, req *servingapis.GetModelMetadataRequest) (*servingapis.GetModelMetadataResponse, error) {
	md, err := p.mgr.Metadata(req.GetModelSpec(), req.GetMetadataField())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "model %s is not found", err)
	}
	resp := &servingapis.GetModelMetadataResponse{ModelSpec: specOf(req.GetModelSpec())}
	if len(md) > 0 {
		resp.Metadata = make(map[string]*anypb.Any, len(md))
		for k, v := range md {
			resp.Metadata[k] = &anypb.Any{Value: []byte(PyRepr(v))}
		}
	}
	return resp, nil
}
