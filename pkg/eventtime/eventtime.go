// Package eventtime carries the newest event time of the examples being trained on along the path
// of their parameters, for freshness (event -> served): in a context from the training step to the
// parameter server client (which sends it with ApplyGradients), and as gRPC metadata on parameter
// sync's pushes to the serving replicas. A time is Unix milliseconds; 0 means unknown.
package eventtime

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
)

// MetadataKey is the gRPC metadata key of a parameter sync push's newest event time (decimal
// Unix milliseconds).
const MetadataKey = "monolith-newest-event-time-ms"

type ctxKey struct{}

// With returns ctx carrying t (the zero time: ctx as it is).
func With(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, t.UnixMilli())
}

// From is the event time ctx carries (With), 0 when none.
func From(ctx context.Context) int64 {
	ms, _ := ctx.Value(ctxKey{}).(int64)
	return ms
}

// Outgoing returns ctx with ms as outgoing gRPC metadata (ms <= 0: ctx as it is).
func Outgoing(ctx context.Context, ms int64) context.Context {
	if ms <= 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, MetadataKey, strconv.FormatInt(ms, 10))
}

// Incoming is the event time of an incoming call's metadata (Outgoing's), 0 when it has none or
// it is not a positive decimal (a sender that is not ours: freshness is then unknown, the call
// goes on).
func Incoming(ctx context.Context) int64 {
	vals := metadata.ValueFromIncomingContext(ctx, MetadataKey)
	if len(vals) == 0 {
		return 0
	}
	ms, err := strconv.ParseInt(vals[len(vals)-1], 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return ms
}

// Newest is a watermark: the newest event time observed, safe for concurrent use.
type Newest struct{ ms atomicMax }

// Observe records ms (<= 0 is ignored).
func (n *Newest) Observe(ms int64) {
	if ms > 0 {
		n.ms.max(ms)
	}
}

// Load is the newest time observed, 0 when none.
func (n *Newest) Load() int64 { return n.ms.load() }
