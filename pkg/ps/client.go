package ps

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/eventtime"
)

// DefaultCallTimeout bounds each RPC a Client or Router sends when its context has no earlier
// deadline.
const DefaultCallTimeout = 30 * time.Second

// TransportServerOptions are the gRPC transport settings of a server for bulk traffic: larger
// flow-control windows and buffers than gRPC's defaults, so that a multi-megabyte batch is not
// held up by window updates. The benchmark's echo baseline uses the same settings.
func TransportServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		grpc.ReadBufferSize(bufferSize),
		grpc.WriteBufferSize(bufferSize),
	}
}

// TransportDialOptions are TransportServerOptions' client side.
func TransportDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithReadBufferSize(bufferSize),
		grpc.WithWriteBufferSize(bufferSize),
	}
}

const (
	windowSize = 16 << 20
	bufferSize = 256 << 10
)

// Client is a connection to one parameter server.
type Client struct {
	addr        string
	conn        *grpc.ClientConn
	rpc         pspb.ParameterServerClient
	callTimeout time.Duration
}

// ClientConfig configures Dial.
type ClientConfig struct {
	// CallTimeout bounds each RPC (0: DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxMessageBytes is the largest message sent or received (0: DefaultMaxMessageBytes).
	MaxMessageBytes int
	// DialOptions are added to the client's (credentials, message limits, transport settings).
	DialOptions []grpc.DialOption
}

// Dial returns a client of the server at addr ("host:port"). It connects on first use.
func Dial(addr string, cfg ClientConfig) (*Client, error) {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec), grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes+messageSlack), grpc.MaxCallSendMsgSize(cfg.MaxMessageBytes+messageSlack)),
	}, TransportDialOptions()...)
	conn, err := grpc.NewClient(addr, append(opts, cfg.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("ps client %s: %w", addr, err)
	}
	return &Client{addr: addr, conn: conn, rpc: pspb.NewParameterServerClient(conn), callTimeout: cfg.CallTimeout}, nil
}

// Addr is the server's address.
func (c *Client) Addr() string { return c.addr }

// RPC is the generated client, for calls this type does not wrap (and for pkg/hooks' Remote
// barrier and health probe).
func (c *Client) RPC() pspb.ParameterServerClient { return c.rpc }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// callCtx bounds one RPC by the call timeout.
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.callTimeout)
}

// Lookup writes the embeddings of ids to out (len(ids)*dim floats) and returns how many ids have
// an entry.
func (c *Client) Lookup(ctx context.Context, table string, dim int, ids []int64, out []float32) (int, error) {
	if dim <= 0 || len(out) != len(ids)*dim {
		return 0, fmt.Errorf("ps %s: lookup in table %q: %d output floats for %d ids of dimension %d", c.addr, table, len(out), len(ids), dim)
	}
	rows := make([]int32, len(ids))
	for i := range rows {
		rows[i] = int32(i)
	}
	n, err := c.lookupRows(ctx, table, dim, ids, rows, out)
	if err != nil {
		return 0, fmt.Errorf("ps %s: lookup in table %q: %w", c.addr, table, err)
	}
	return n, nil
}

// lookupRows looks ids up, writing the embedding of ids[u] to row rows[u] of out.
func (c *Client) lookupRows(ctx context.Context, table string, dim int, ids []int64, rows []int32, out []float32) (int, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	reply := &rowsReply{out: out, rows: rows, dim: dim}
	req := &pspb.LookupRequest{Table: table, Dim: int32(dim), Ids: int64Bytes(ids)}
	if err := c.conn.Invoke(ctx, pspb.ParameterServer_Lookup_FullMethodName, req, reply); err != nil {
		return 0, err
	}
	return int(reply.found), nil
}

// Update is how gradients are applied: the global step, the learning rates (empty: the table's
// configured rate) and the entries' update time.
type Update struct {
	GlobalStep    int64
	LearningRates []float32
	UpdateTimeSec int64
}

// ApplyGradients applies grads (dim per id) to the entries of ids. The newest event time ctx
// carries (pkg/eventtime) goes with them.
func (c *Client) ApplyGradients(ctx context.Context, table string, dim int, ids []int64, grads []float32, u Update) error {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	_, err := c.rpc.ApplyGradients(ctx, &pspb.ApplyGradientsRequest{
		Table: table, Dim: int32(dim), Ids: int64Bytes(ids), Grads: float32Bytes(grads),
		GlobalStep: u.GlobalStep, LearningRates: u.LearningRates, UpdateTimeSec: u.UpdateTimeSec,
		NewestEventTimeMs: eventtime.From(ctx),
	})
	if err != nil {
		return fmt.Errorf("ps %s: apply gradients to table %q: %w", c.addr, table, err)
	}
	return nil
}

// Health asks the server for its health.
func (c *Client) Health(ctx context.Context) (*pspb.HealthResponse, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.rpc.Health(ctx, &pspb.HealthRequest{})
	if err != nil {
		return nil, fmt.Errorf("ps %s: health: %w", c.addr, err)
	}
	return resp, nil
}

// minArriveTime is the least time left for which Arrive sends a call: the server answers a
// quarter of it (up to 100 ms) before the deadline, time enough for the answer to arrive.
const minArriveTime = 100 * time.Millisecond

// arrivePoll is how long the server holds one ARRIVE call before the worker asks again.
const arrivePoll = 5 * time.Second

// Arrive waits at the rendezvous name until all count workers (0..count-1) have arrived, and
// returns the round released. It ends with ctx; a worker that stops waiting is withdrawn.
func (c *Client) Arrive(ctx context.Context, name string, worker, count int) (int64, error) {
	for {
		// A call with too little time left could still be counted at the server after this
		// worker gave up (its answer late): give up before sending it.
		if d, ok := ctx.Deadline(); ok && time.Until(d) < minArriveTime {
			return 0, fmt.Errorf("ps %s: barrier %q: worker %d of %d: %w", c.addr, name, worker, count,
				status.Error(codes.DeadlineExceeded, "too little time left to wait at the barrier"))
		}
		cctx, cancel := context.WithTimeout(ctx, c.callTimeout+arrivePoll)
		resp, err := c.rpc.Barrier(cctx, &pspb.BarrierRequest{
			Op: pspb.BarrierRequest_ARRIVE, Name: name, Worker: int32(worker), Count: int32(count), WaitMs: arrivePoll.Milliseconds(),
		})
		cancel()
		if err != nil {
			return 0, fmt.Errorf("ps %s: barrier %q: worker %d of %d: %w", c.addr, name, worker, count, err)
		}
		if resp.GetReleased() {
			return resp.GetRound(), nil
		}
		// The server withdrew the arrival before answering; give up only now, so that a worker
		// that stopped waiting is never counted.
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("ps %s: barrier %q: worker %d of %d: %w", c.addr, name, worker, count, status.FromContextError(err).Err())
		}
	}
}
