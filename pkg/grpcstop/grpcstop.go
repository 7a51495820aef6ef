// Package grpcstop stops a gRPC server gracefully within a deadline: GracefulStop waits for every
// RPC in flight, and a stuck one would hold up an agent's shutdown for ever.
package grpcstop

import (
	"context"

	"google.golang.org/grpc"
)

// Graceful stops srv as GracefulStop does, but when ctx ends first it stops srv at once,
// cancelling the RPCs still running, and returns without waiting for handlers that ignore their
// cancelled context (a stuck provider must not hold up a shutdown): the goroutine running
// GracefulStop ends when the last of them returns. forced reports whether ctx cut the graceful
// stop short.
func Graceful(ctx context.Context, srv *grpc.Server) (forced bool) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return false
	case <-ctx.Done():
		srv.Stop()
		return true
	}
}
