package agentsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/pkg/grpcstop"
)

// Server is the reference's AgentService: a gRPC server bound to [::]:port serving one Service.
type Server struct {
	svc *Service
	gs  *grpc.Server
	lis net.Listener

	mu      sync.Mutex
	started bool
	stopped bool
	done    chan struct{} // closed when the server has stopped
	err     error         // Serve's error, nil after Stop
}

// Listen binds [::]:port (every address, IPv4 and IPv6; port 0 picks a free port, as the reference's
// `port or 0`) and registers svc. The server answers once Start is called. opts are added to the
// server's; a unary interceptor among them sees a cached answer as an opaque pre-encoded value.
func Listen(svc *Service, port int, opts ...grpc.ServerOption) (*Server, error) {
	return ListenOn(svc, "", port, opts...)
}

// ListenOn is Listen on host ("": every address, as Listen; "127.0.0.1": loopback only).
func ListenOn(svc *Service, host string, port int, opts ...grpc.ServerOption) (*Server, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("agent service: port %d out of range", port)
	}
	if host == "" {
		host = "::"
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("agent service: listen: %w", err)
	}
	// The codec sends cached answers as they are.
	base := []grpc.ServerOption{grpc.ForceServerCodecV2(newCodec())}
	gs := grpc.NewServer(append(base, opts...)...)
	gs.RegisterService(serviceDesc(), svc)
	return &Server{svc: svc, gs: gs, lis: lis, done: make(chan struct{})}, nil
}

// Addr is the address the server is bound to.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Port is the port the server is bound to.
func (s *Server) Port() int {
	if a, ok := s.lis.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Start serves in the background; it does nothing after the first call or after Stop.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return
	}
	s.started = true
	go func() {
		err := s.gs.Serve(s.lis)
		s.mu.Lock()
		if !errors.Is(err, grpc.ErrServerStopped) {
			s.err = err
		}
		s.mu.Unlock()
		close(s.done)
	}()
}

// Wait is the reference's wait_for_termination: it returns once the server has stopped, with the
// error that stopped it (nil after Stop).
func (s *Server) Wait() error {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stop is the reference's stop(grace): it stops accepting connections, lets the RPCs in flight
// finish for up to grace, then cancels the rest, and returns once the server has stopped and,
// after a grace period, its handlers have returned (ours all end with their context). grace <= 0
// stops at once (the reference's grace=None). It is safe to call more than once.
func (s *Server) Stop(grace time.Duration) {
	s.mu.Lock()
	first := !s.stopped
	s.stopped = true
	started := s.started
	s.mu.Unlock()
	if !first {
		<-s.done
		return
	}
	if !started {
		s.gs.Stop()
		s.lis.Close()
		close(s.done)
		return
	}
	if grace > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		grpcstop.Graceful(ctx, s.gs)
		cancel()
	} else {
		s.gs.Stop()
	}
	<-s.done
}
