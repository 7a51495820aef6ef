package inproc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

// scriptedServer is a Server whose start fails or whose serving ends as the test says.
type scriptedServer struct {
	startErr error

	mu       sync.Mutex
	stops    int
	serveErr error
	ended    bool
	served   chan struct{} // closed when serving ended
}

func newScriptedServer(startErr error) *scriptedServer {
	return &scriptedServer{startErr: startErr, served: make(chan struct{})}
}

func (s *scriptedServer) Start() error { return s.startErr }

func (s *scriptedServer) Wait() error {
	<-s.served
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serveErr
}

// end ends serving with err (a crash when not nil); only the first end counts.
func (s *scriptedServer) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended, s.serveErr = true, err
		close(s.served)
	}
}

func (s *scriptedServer) Stop(context.Context) error {
	s.mu.Lock()
	s.stops++
	s.mu.Unlock()
	s.end(nil)
	return nil
}

func (s *scriptedServer) Addr() string { return "127.0.0.1:1" }

func (s *scriptedServer) Status(*servingapis.ModelSpec) []*servingapis.ModelVersionStatus { return nil }

// TestProcessStartStop: a server that cannot be made or started leaves nothing made (the
// server stopped, release called); a started one is released once, after it stopped, however
// often Stop is called; a crash is exit code 1.
func TestProcessStartStop(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		newErr   error
		startErr error
		crash    error // serving ends with it before Stop
		stops    int   // calls of Stop
		// wantErr is in Start's error, after the process's name; "" for none.
		wantErr      string
		wantStops    int
		wantReleases int
		wantCode     int
	}{
		{name: "not made", newErr: errBoom, wantErr: "test process: boom"},
		{name: "not started", startErr: errBoom, wantErr: "test process: boom", wantStops: 1, wantReleases: 1},
		{name: "stopped", stops: 1, wantStops: 1, wantReleases: 1},
		{name: "stopped twice", stops: 2, wantStops: 2, wantReleases: 1},
		{name: "crashed", crash: errBoom, stops: 1, wantStops: 1, wantReleases: 1, wantCode: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			srv := newScriptedServer(tc.startErr)
			releases, releasedRunning := 0, false
			p := NewProcess("test process", t.TempDir()+"/models.config", func() (Server, func(), error) {
				if tc.newErr != nil {
					return nil, nil, tc.newErr
				}
				return srv, func() {
					releases++
					select {
					case <-srv.served:
					default:
						releasedRunning = true
					}
				}, nil
			})
			if got := p.Addr(); got != "" {
				t.Errorf("Addr before Start = %q", got)
			}
			err := p.Start(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Start = %v, want %q", err, tc.wantErr)
				}
				if p.Done() != nil || p.Addr() != "" {
					t.Error("a process that did not start has a server")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := p.Addr(); got != srv.Addr() {
					t.Errorf("Addr = %q, want %q", got, srv.Addr())
				}
				if exited, _ := p.Exited(); exited {
					t.Error("exited while serving")
				}
				if tc.crash != nil {
					srv.end(tc.crash)
					select {
					case <-p.Done():
					case <-time.After(10 * time.Second):
						t.Fatal("Done not closed after the crash")
					}
				}
				for range tc.stops {
					if err := p.Stop(time.Second); err != nil {
						t.Fatal(err)
					}
				}
				if exited, code := p.Exited(); !exited || code != tc.wantCode {
					t.Errorf("Exited = %v, %d; want true, %d", exited, code, tc.wantCode)
				}
			}
			if srv.stops != tc.wantStops || releases != tc.wantReleases {
				t.Errorf("server stopped %d times and released %d; want %d and %d", srv.stops, releases, tc.wantStops, tc.wantReleases)
			}
			if releasedRunning {
				t.Error("released while the server was serving")
			}
			if err := p.Start(context.Background()); err == nil {
				t.Error("Start again")
			}
		})
	}
}
