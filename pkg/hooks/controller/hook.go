package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/grpcstop"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// DefaultStopGrace is how long End lets in-flight RPCs finish (the reference's server.stop(20)).
const DefaultStopGrace = 20 * time.Second

// resolveTimeout bounds the host name lookup of the local address.
const resolveTimeout = 10 * time.Second

// Config configures the controller's run hook (the reference's ServerHook arguments).
type Config struct {
	// ModelDir receives ServerAddrFilename; it is created when missing.
	ModelDir string
	// Barrier, Saver and GlobalStep back the service (see NewService); all are required.
	Barrier    Barrier
	Saver      Saver
	GlobalStep GlobalStep
	// ListenAddr is where the server listens; "" means every interface on an ephemeral port (the
	// reference's "[::]:0").
	ListenAddr string
	// Host is the host written into the address file; "" means the first address the host name
	// resolves to (the reference's net_utils.get_local_server_addr).
	Host string
	// StopGrace bounds how long End waits for in-flight RPCs; 0 means DefaultStopGrace.
	StopGrace time.Duration
}

// Hook serves the Controller service while training runs (the reference's ServerHook): it starts
// the server in AfterCreateSession, writes the address file, and stops the server in End.
type Hook struct {
	runhook.Base
	cfg Config
	svc *Service

	mu     sync.Mutex
	srv    *grpc.Server
	addr   string
	served chan error // Serve's result
}

var _ runhook.Hook = (*Hook)(nil)

// NewHook checks cfg and returns the hook; nothing listens before AfterCreateSession.
func NewHook(cfg Config) (*Hook, error) {
	if cfg.ModelDir == "" {
		return nil, errkind.New(errkind.Value, "controller: model dir is required")
	}
	svc, err := NewService(cfg.Barrier, cfg.Saver, cfg.GlobalStep)
	if err != nil {
		return nil, err
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = ":0"
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	return &Hook{cfg: cfg, svc: svc}, nil
}

// AfterCreateSession starts the server and writes its address to <ModelDir>/ServerAddrFilename.
func (h *Hook) AfterCreateSession(ctx context.Context, _ *runhook.Session) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv != nil {
		return errkind.New(errkind.Precondition, "controller: server already started at %s", h.addr)
	}
	lis, err := net.Listen("tcp", h.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("controller: listen on %s: %w", h.cfg.ListenAddr, err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	host := h.cfg.Host
	if host == "" {
		if host, err = localIP(ctx); err != nil {
			lis.Close()
			return err
		}
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	srv := grpc.NewServer()
	pb.RegisterControllerServer(srv, h.svc)
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(lis)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil // stopped before Serve began: End (or a failed start) got there first
		}
		if err != nil {
			slog.Error("controller: server failed", "addr", addr, "err", err)
		}
		served <- err
	}()
	if err := writeAddr(h.cfg.ModelDir, addr); err != nil {
		srv.Stop()
		<-served
		return err
	}
	h.srv, h.addr, h.served = srv, addr, served
	slog.Info("controller: serving", "addr", addr, "model_dir", h.cfg.ModelDir)
	return nil
}

// Addr is the address written to the address file ("" before AfterCreateSession).
func (h *Hook) Addr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}

// End stops the server: in-flight RPCs get StopGrace (or until ctx is done) to finish, then they
// are cancelled. It returns once the server has stopped. The address file is left in place, as in
// the reference.
func (h *Hook) End(ctx context.Context, _ *runhook.Session, _ error) error {
	h.mu.Lock()
	srv, served := h.srv, h.served
	h.srv = nil
	h.mu.Unlock()
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.StopGrace)
	defer cancel()
	grpcstop.Graceful(ctx, srv)
	if err := <-served; err != nil {
		return fmt.Errorf("controller: serve: %w", err)
	}
	return nil
}

// writeAddr writes addr to <dir>/ServerAddrFilename through a temporary file and a rename, so a
// reader never sees a partial address.
func writeAddr(dir, addr string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("controller: create model dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ServerAddrFilename+".tmp*")
	if err != nil {
		return fmt.Errorf("controller: write address file: %w", err)
	}
	tmp := f.Name()
	_, werr := f.WriteString(addr)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(dir, ServerAddrFilename))
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("controller: write address file: %w", werr)
	}
	return nil
}

// localIP is the first address the host name resolves to (the reference's net_utils.get_local_ip,
// socket.getaddrinfo(socket.gethostname(), None)[0][4][0]).
func localIP(ctx context.Context) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("controller: host name: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", errkind.Wrap(errkind.NotFound, fmt.Errorf("controller: resolve host name %q: %w", host, err))
	}
	if len(addrs) == 0 {
		return "", errkind.New(errkind.NotFound, "controller: host name %q has no address", host)
	}
	return addrs[0].String(), nil
}
