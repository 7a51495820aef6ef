package grpcstop

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/monolith-go/monolith/internal/leakcheck"
)

// serve starts a server whose every method blocks until release is closed or, unless
// ignoreCancel, its RPC is cancelled; and a client connection to it.
func serve(t *testing.T, release <-chan struct{}, ignoreCancel bool) (*grpc.Server, *grpc.ClientConn, chan struct{}) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		started <- struct{}{}
		cancelled := stream.Context().Done()
		if ignoreCancel {
			cancelled = nil
		}
		select {
		case <-cancelled:
		case <-release:
		}
		return nil
	}))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		// ErrServerStopped: the stop came before Serve began.
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, conn, started
}

// call starts one streaming RPC and returns a channel that receives its end.
func call(t *testing.T, conn *grpc.ClientConn, started <-chan struct{}) <-chan error {
	t.Helper()
	ended := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Blocking/Wait")
		if err == nil {
			err = stream.CloseSend()
		}
		if err == nil {
			err = stream.RecvMsg(new(struct{}))
		}
		ended <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the RPC never reached the handler")
	}
	return ended
}

func TestGraceful(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inFlight   bool // an RPC is running when the stop begins
		release    bool // the RPC finishes by itself during the stop
		ignore     bool // the handler ignores its cancelled context (released after the stop)
		wantForced bool
	}{
		{"idle server", false, false, false, false},
		{"RPC that finishes", true, true, false, false},
		{"stuck RPC", true, false, false, true},
		{"handler that ignores cancellation", true, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			release := make(chan struct{})
			srv, conn, started := serve(t, release, tc.ignore)
			var ended <-chan error
			if tc.inFlight {
				ended = call(t, conn, started)
			}
			if tc.release {
				time.AfterFunc(50*time.Millisecond, func() { close(release) })
			}
			// A stuck RPC holds GracefulStop until the deadline; the others finish well before it.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			if forced := Graceful(ctx, srv); forced != tc.wantForced {
				t.Errorf("forced = %v, want %v", forced, tc.wantForced)
			}
			// Even a handler that ignores cancellation does not hold up the return.
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Graceful took %v", took)
			}
			if tc.ignore {
				close(release)
			}
			if ended != nil {
				select {
				case <-ended:
				case <-time.After(10 * time.Second):
					t.Fatal("the client's RPC did not end after the stop")
				}
			}
		})
	}
}
