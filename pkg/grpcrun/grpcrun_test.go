package grpcrun

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// call makes one RPC to addr: the runner's server has no services, so a serving one answers
// Unimplemented.
func call(t *testing.T, addr string) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return conn.Invoke(ctx, "/x.Service/Method", &wrapperspb.StringValue{}, &wrapperspb.StringValue{})
}

func listen(t *testing.T, srv *grpc.Server, log *slog.Logger) *Runner {
	t.Helper()
	r, err := Listen("test server", "", srv, log)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestStartStop(t *testing.T) {
	errRelease := errors.New("release failed")
	errSetUp := errors.New("set up failed")
	tests := []struct {
		name      string
		start     bool
		setUpErr  error
		release   func(context.Context) error
		wantStop  func(error) bool
		wantServe bool
	}{
		{name: "served, no release", start: true, wantServe: true,
			wantStop: func(err error) bool { return err == nil }},
		{name: "served, release error joined", start: true, wantServe: true,
			release:  func(context.Context) error { return errRelease },
			wantStop: func(err error) bool { return errors.Is(err, errRelease) }},
		{name: "never started, release error as it is",
			release:  func(context.Context) error { return errRelease },
			wantStop: func(err error) bool { return err == errRelease }},
		{name: "never started, no release",
			wantStop: func(err error) bool { return err == nil }},
		{name: "set up failed", start: true, setUpErr: errSetUp,
			wantStop: func(err error) bool { return err == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leakcheck.Check(t)
			r := listen(t, grpc.NewServer(), nil)
			addr := r.Addr()
			if tt.start {
				err := r.Start(func(Every) error { return tt.setUpErr })
				if !errors.Is(err, tt.setUpErr) || (tt.setUpErr == nil) != (err == nil) {
					t.Fatalf("Start = %v, want %v", err, tt.setUpErr)
				}
			}
			if tt.wantServe {
				if err := call(t, addr); status.Code(err) != codes.Unimplemented {
					t.Fatalf("RPC = %v, want Unimplemented from a serving server", err)
				}
			}
			if err := r.Stop(context.Background(), tt.release); !tt.wantStop(err) {
				t.Errorf("Stop = %v", err)
			}
			if err := r.Wait(); err != nil {
				t.Errorf("Wait after Stop = %v", err)
			}
			if err := r.Stop(context.Background(), tt.release); err != nil {
				t.Errorf("second Stop = %v, want nil", err)
			}
			if err := r.Start(nil); errkind.Of(err) != errkind.Runtime || !strings.HasPrefix(err.Error(), "test server: ") {
				t.Errorf("Start after Stop = %v, want a Runtime error named after the server", err)
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Errorf("%s still accepts connections after Stop", addr)
			}
		})
	}
}

func TestStartTwice(t *testing.T) {
	leakcheck.Check(t)
	r := listen(t, grpc.NewServer(), nil)
	if err := r.Start(nil); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background(), nil)
	if err := r.Start(nil); errkind.Of(err) != errkind.Runtime {
		t.Errorf("second Start = %v, want an error of kind Runtime", err)
	}
}

// TestEvery: loops with a positive interval run until Stop, the others never; release runs once
// they have all returned.
func TestEvery(t *testing.T) {
	leakcheck.Check(t)
	tests := []struct {
		d       time.Duration
		wantRun bool
	}{
		{time.Millisecond, true},
		{2 * time.Millisecond, true},
		{0, false},
		{-time.Second, false},
	}
	runs := make([]atomic.Int64, len(tests))
	running := atomic.Int64{}
	ran := make(chan int, 64)
	r := listen(t, grpc.NewServer(), nil)
	err := r.Start(func(every Every) error {
		for i, tt := range tests {
			every(tt.d, func() {
				running.Add(1)
				defer running.Add(-1)
				runs[i].Add(1)
				select {
				case ran <- i:
				default:
				}
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		for tt.wantRun && runs[i].Load() < 2 {
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatalf("loop %d (every %v) ran %d times in 10 s, want 2", i, tt.d, runs[i].Load())
			}
		}
	}
	var atRelease []int64
	err = r.Stop(context.Background(), func(context.Context) error {
		if n := running.Load(); n != 0 {
			t.Errorf("release ran while %d loops ran", n)
		}
		for i := range runs {
			atRelease = append(atRelease, runs[i].Load())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	for i, tt := range tests {
		if got := runs[i].Load(); got != atRelease[i] {
			t.Errorf("loop %d ran %d times after Stop", i, got-atRelease[i])
		}
		if !tt.wantRun && atRelease[i] != 0 {
			t.Errorf("loop %d (every %v) ran %d times, want none", i, tt.d, atRelease[i])
		}
	}
}

// TestStopForced: an RPC that outlives Stop's context is cut off, and the runner says so (and
// said where it served).
func TestStopForced(t *testing.T) {
	leakcheck.Check(t)
	entered := make(chan struct{})
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		close(entered)
		<-stream.Context().Done()
		return stream.Context().Err()
	}))
	var logs syncbuf.Buffer
	r := listen(t, srv, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := r.Start(nil); err != nil {
		t.Fatal(err)
	}
	callErr := make(chan error, 1)
	go func() { callErr <- call(t, r.Addr()) }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.Stop(ctx, nil); err != nil {
		t.Errorf("Stop = %v", err)
	}
	if err := <-callErr; err == nil {
		t.Error("the RPC in flight succeeded; want it cut off")
	}
	for _, want := range []string{`msg="test server serving" addr=` + r.Addr(), "test server: graceful stop timed out"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log = %q, want %q", logs.String(), want)
		}
	}
}

func TestListenError(t *testing.T) {
	r := listen(t, grpc.NewServer(), nil)
	defer r.Stop(context.Background(), nil)
	_, err := Listen("test server", r.Addr(), grpc.NewServer(), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "test server: listen: ") {
		t.Errorf("Listen on a port in use = %v, want a listen error named after the server", err)
	}
}
