package agentstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// DefaultStatusTimeout bounds the work of one /status request (the agent asks TF Serving for its
// models' status).
const DefaultStatusTimeout = 5 * time.Second

// NewHandler serves /healthz, /status and /metrics for src and m (either may be nil: /status and
// /healthz then answer 503, /metrics 404), and an index at /.
func NewHandler(src Source, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var err error = errNoAgent
		if src != nil {
			err = src.Healthy()
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		if src == nil {
			http.Error(w, errNoAgent.Error(), http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), DefaultStatusTimeout)
		defer cancel()
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		enc.SetEscapeHTML(false) // filters hold '<' and '>': keep them readable
		enc.SetIndent("", "  ")
		if err := enc.Encode(src.Status(ctx)); err != nil {
			http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body.Bytes())
	})
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "monolith agent\n  /healthz  liveness\n  /status   state as JSON\n  /metrics  Prometheus metrics\n")
	})
	return mux
}

var errNoAgent = errors.New("no agent")

// Server is the status endpoint's HTTP server.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
	once sync.Once
	done chan struct{}
}

// Listen binds addr ("host:port"; port 0 picks a free one) for h. Serving starts with Start.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errkind.Wrap(errkind.Runtime, fmt.Errorf("status endpoint: listen %s: %w", addr, err))
	}
	return &Server{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		ln: ln, log: log, done: make(chan struct{}),
	}, nil
}

// Addr is the address the server is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://{Addr}".
func (s *Server) URL() string { return "http://" + s.Addr() }

// Start serves in the background until Stop.
func (s *Server) Start() {
	s.once.Do(func() {
		go func() {
			defer close(s.done)
			if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("status endpoint stopped", "err", err)
			}
		}()
	})
}

// Stop lets the requests in flight finish until ctx ends, closes the rest and returns once the
// server has stopped. It may be called without Start and more than once.
func (s *Server) Stop(ctx context.Context) error {
	started := true
	s.once.Do(func() { started = false; close(s.done) })
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	if !started {
		s.ln.Close()
	}
	<-s.done
	return err
}
