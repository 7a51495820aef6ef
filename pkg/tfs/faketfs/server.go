package faketfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/grpcstop"
	"github.com/monolith-go/monolith/pkg/modelconfig"
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
	lis  net.Listener
	grpc *grpc.Server

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopped  bool
	served   chan struct{} // closed when Serve returned
	serveErr error
	lastConf []byte // the config file's content last applied
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
		data, err := os.ReadFile(opts.ConfigFile)
		if err != nil {
			return nil, errkind.Wrap(errkind.NotFound, fmt.Errorf("fake tfs: model config file: %w", err))
		}
		if cfg, err = ParseConfig(data); err != nil {
			return nil, fmt.Errorf("fake tfs: model config file %s: %w", opts.ConfigFile, err)
		}
		lastConf = data
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake tfs: listen: %w", err)
	}
	s := &Server{
		mgr:      NewModelMgr(cfg.GetModelConfigList().GetConfig(), log),
		opts:     opts,
		log:      log,
		lis:      lis,
		grpc:     grpc.NewServer(),
		served:   make(chan struct{}),
		lastConf: lastConf,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	servingapis.RegisterModelServiceServer(s.grpc, &modelService{mgr: s.mgr})
	servingapis.RegisterPredictionServiceServer(s.grpc, &predictionService{mgr: s.mgr})
	return s, nil
}

// ParseConfig parses a ModelServerConfig in text format (a --model_config_file).
func ParseConfig(data []byte) (*servingconfig.ModelServerConfig, error) {
	cfg := &servingconfig.ModelServerConfig{}
	if err := prototext.Unmarshal(data, cfg); err != nil {
		return nil, errkind.Wrap(errkind.Value, err)
	}
	return cfg, nil
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
func (s *Server) Addr() string { return s.lis.Addr().String() }

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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return errkind.New(errkind.Runtime, "fake tfs: already started or stopped")
	}
	s.started = true
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
	s.every(s.opts.StepInterval, func() { s.mgr.Tick() })
	if s.opts.NewVersionInterval > 0 {
		r := rand.New(rand.NewPCG(s.opts.Seed, 0x6d6f6e6f6c697468))
		s.every(s.opts.NewVersionInterval, func() {
			if name, v, ok := s.mgr.NewRandomVersion(r); ok {
				s.log.Info("simulated a new version", "model", name, "version", v)
			}
		})
	}
	if s.opts.ConfigFile != "" {
		s.every(s.opts.ConfigPollInterval, s.pollConfig)
	}
	s.log.Info("fake tfs serving", "addr", s.Addr())
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

// pollConfig re-reads the config file and applies it as a reload when it changed. A file that
// cannot be read or parsed is logged and the models are left as they are, as TF Serving does; an
// empty file is taken for one being rewritten and skipped.
func (s *Server) pollConfig() {
	data, err := os.ReadFile(s.opts.ConfigFile)
	if err != nil {
		s.log.Error("poll model config file", "file", s.opts.ConfigFile, "err", err)
		return
	}
	s.mu.Lock()
	same := s.lastConf != nil && bytes.Equal(data, s.lastConf)
	s.mu.Unlock()
	if same || len(bytes.TrimSpace(data)) == 0 {
		return // unchanged, or caught between a truncate and a write
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		s.log.Error("poll model config file", "file", s.opts.ConfigFile, "err", err)
		return
	}
	s.mu.Lock()
	s.lastConf = data
	s.mu.Unlock()
	removed, loaded := s.mgr.Reload(cfg.GetModelConfigList().GetConfig())
	s.log.Info("model config file changed", "file", s.opts.ConfigFile, "removed", removed, "loaded", loaded)
}

// Wait blocks until the server stops serving and returns why (nil after Stop).
func (s *Server) Wait() error {
	<-s.served
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serveErr
}

// Stop stops the loops and the gRPC server: gracefully (in-flight RPCs finish) until ctx is done,
// then forcibly. It returns the error Serve failed with, if any. Stopping twice is harmless.
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
		s.log.Warn("fake tfs: graceful stop timed out; closed the connections")
	}
	s.wg.Wait()
	if !started {
		_ = s.lis.Close() // Serve never took it over
		close(s.served)
		return nil
	}
	return s.Wait()
}

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
