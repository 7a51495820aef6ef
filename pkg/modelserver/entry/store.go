package entry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// conns are the connections to PS replicas, one per address, shared by the entry's versions.
// Connections unused for connIdle are closed (replicas come and go with deployments).
type conns struct {
	creds     credentials.TransportCredentials
	mu        sync.Mutex
	m         map[string]*pooledConn
	lastPrune time.Time
	closed    bool
}

type pooledConn struct {
	conn     *grpc.ClientConn
	client   servingapis.PredictionServiceClient
	lastUsed time.Time
}

// connIdle is how long a connection may stay unused before it is closed.
const connIdle = 2 * time.Minute

func newConns(creds credentials.TransportCredentials) *conns {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &conns{creds: creds, m: map[string]*pooledConn{}, lastPrune: time.Now()}
}

func (c *conns) get(addr string) (servingapis.PredictionServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, status.Error(codes.Unavailable, "entry: stopping")
	}
	now := time.Now()
	if now.Sub(c.lastPrune) > connIdle/2 {
		c.lastPrune = now
		for a, pc := range c.m {
			if now.Sub(pc.lastUsed) > connIdle {
				pc.conn.Close()
				delete(c.m, a)
			}
		}
	}
	pc, ok := c.m[addr]
	if !ok {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(modelserver.MaxMessageBytes), grpc.MaxCallSendMsgSize(modelserver.MaxMessageBytes)))
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "PS replica %s: %v", addr, err)
		}
		pc = &pooledConn{conn: conn, client: servingapis.NewPredictionServiceClient(conn)}
		c.m[addr] = pc
	}
	pc.lastUsed = now
	return pc.client, nil
}

func (c *conns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for a, pc := range c.m {
		pc.conn.Close()
		delete(c.m, a)
	}
}

// psStore is the entry's embedding store: the ids of a lookup go, split by floormod(id, num_ps),
// to a replica of each PS sub-graph over gRPC (the lookup signature), the shards in parallel. A
// failed call is retried on the shard's next replica (every attempt bounded by timeout), so a
// replica going away costs a retry, and no lookup outlives (retries+1) * timeout.
type psStore struct {
	model    string // the PS sub-graphs are "<model>:ps_<i>"
	numPS    int
	replicas Replicas
	conns    *conns
	timeout  time.Duration
	retries  int
	metrics  *Metrics
}

// Lookup implements dnn.EmbeddingStore.
func (s *psStore) Lookup(ctx context.Context, table string, ids []int64, out []float32) error {
	if len(ids) == 0 {
		return nil
	}
	if len(out)%len(ids) != 0 {
		return errkind.New(errkind.Value, "entry: lookup in table %q: %d floats for %d ids", table, len(out), len(ids))
	}
	dim := len(out) / len(ids)
	if s.numPS == 1 {
		return s.lookupShard(ctx, 0, table, ids, out)
	}
	pos := make([][]int, s.numPS)
	for i, id := range ids {
		sh := embedding.Shard(id, s.numPS)
		pos[sh] = append(pos[sh], i)
	}
	g, gctx := errgroup.WithContext(ctx)
	for sh, p := range pos {
		if len(p) == 0 {
			continue
		}
		g.Go(func() error {
			shardIDs := make([]int64, len(p))
			for k, i := range p {
				shardIDs[k] = ids[i]
			}
			emb := make([]float32, len(p)*dim)
			if err := s.lookupShard(gctx, sh, table, shardIDs, emb); err != nil {
				return err
			}
			for k, i := range p {
				copy(out[i*dim:(i+1)*dim], emb[k*dim:(k+1)*dim])
			}
			return nil
		})
	}
	return g.Wait()
}

// lookupShard looks ids up on a replica of PS sub-graph shard, trying the next replica after a
// failure, retries times at most. The error is a gRPC status: DEADLINE_EXCEEDED or CANCELLED when
// ctx ended, else UNAVAILABLE naming the sub-graph, the replica and its answer.
func (s *psStore) lookupShard(ctx context.Context, shard int, table string, ids []int64, out []float32) error {
	name := s.model + ":ps_" + strconv.Itoa(shard)
	var last error
	for attempt := 0; attempt <= s.retries; attempt++ {
		if attempt > 0 {
			s.metrics.retry(name)
		}
		addrs, err := s.replicas.Addrs(ctx, s.model, shard)
		if err != nil {
			last = err
			if ended(ctx) != nil {
				break
			}
			continue
		}
		addr := addrs[attempt%len(addrs)] // Replicas orders them (AgentReplicas spreads the load)
		err = s.call(ctx, name, addr, table, ids, out)
		if err == nil {
			return nil
		}
		last = fmt.Errorf("%s at %s: %w", name, addr, err)
		s.replicas.Failed(addr)
		if ended(ctx) != nil {
			break
		}
	}
	if err := ended(ctx); err != nil {
		code := codes.Canceled
		if errors.Is(err, context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
		return &lookupError{code, fmt.Sprintf("entry: lookup in table %q: %v (last attempt: %v)", table, err, last)}
	}
	return &lookupError{codes.Unavailable, fmt.Sprintf("entry: lookup in table %q: %d attempts failed; last: %v", table, s.retries+1, last)}
}

// ended is ctx's error, or DeadlineExceeded once its deadline passed: a replica may answer
// DEADLINE_EXCEEDED (the deadline travels with the call) before ctx's own timer fires.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// lookupError is a failed lookup: its message plain (the model wraps it), its gRPC code for the
// client.
type lookupError struct {
	code codes.Code
	msg  string
}

func (e *lookupError) Error() string              { return e.msg }
func (e *lookupError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

func (s *psStore) call(ctx context.Context, name, addr, table string, ids []int64, out []float32) error {
	client, err := s.conns.get(addr)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	begin := time.Now()
	resp, err := client.Predict(actx, &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: name, SignatureName: psshard.Signature},
		Inputs:    psshard.Request(table, ids),
	})
	s.metrics.psCall(name, status.Code(err), time.Since(begin))
	if err != nil {
		return err
	}
	return psshard.LookupResult(resp.GetOutputs(), len(ids), out)
}

// Apply implements dnn.EmbeddingStore: serving does not train.
func (s *psStore) Apply(context.Context, string, []int64, []float32, int64, []float32) error {
	return errkind.New(errkind.Precondition, "entry: the served model does not train")
}
