package agentstatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/monolith-go/monolith/internal/buildinfo"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/promstatus"
)

// DefaultStatusTimeout bounds the work of one /status or / request (the agent asks TF Serving for
// its models' status).
const DefaultStatusTimeout = 5 * time.Second

// DefaultReadyTimeout bounds one /readyz request: a TF Serving that does not answer within it is
// not ready (probes time out after a second or so anyway).
const DefaultReadyTimeout = 2 * time.Second

// HandlerOption configures NewHandler.
type HandlerOption func(*handlerOptions)

type handlerOptions struct {
	errors *ErrorRing
}

// WithRecentErrors adds ring's records to /status (RecentErrors) and the page.
func WithRecentErrors(ring *ErrorRing) HandlerOption {
	return func(o *handlerOptions) { o.errors = ring }
}

// NewHandler serves the status page at /, /healthz, /readyz, /status and /metrics for src and m
// (either may be nil: /status, /healthz and /readyz then answer 503, /metrics 404), and Go's
// /debug/pprof/ and /debug/vars.
func NewHandler(src Source, m *Metrics, opts ...HandlerOption) http.Handler {
	var o handlerOptions
	for _, opt := range opts {
		opt(&o)
	}
	h := &handler{src: src, errors: o.errors}
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
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), DefaultReadyTimeout)
		defer cancel()
		rd := CheckReady(ctx, src)
		code := http.StatusOK
		if !rd.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, rd)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		if src == nil {
			http.Error(w, errNoAgent.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, http.StatusOK, h.report(r.Context()))
	})
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /{$}", h.page)
	// Go's debug pages on this mux (net/http/pprof also registers them on DefaultServeMux, which
	// nothing here serves).
	promstatus.HandlePprof(mux)
	mux.Handle("GET /debug/vars", expvar.Handler())
	publishBuildOnce.Do(func() { expvar.Publish("monolith_build", expvar.Func(func() any { return buildinfo.Read() })) })
	return mux
}

var publishBuildOnce sync.Once

type handler struct {
	src    Source
	errors *ErrorRing
}

// report is src's Report with the readiness, the recent errors and, when src left it out, the
// build (the handler runs in the agent's binary); src must not be nil.
func (h *handler) report(ctx context.Context) Report {
	ctx, cancel := context.WithTimeout(ctx, DefaultStatusTimeout)
	defer cancel()
	rep := h.src.Status(ctx)
	if rep.Agent.BuildVersion == "" {
		rep.Agent.BuildVersion = buildinfo.Version()
	}
	rd := CheckReady(ctx, h.src)
	rep.Readiness = &rd
	if h.errors != nil && rep.RecentErrors == nil {
		rep.RecentErrors, rep.RecentErrorsTotal = h.errors.Records(), h.errors.Total()
	}
	return rep
}

// writeJSON writes v as indented JSON with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // filters hold '<' and '>': keep them readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(body.Bytes())
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
