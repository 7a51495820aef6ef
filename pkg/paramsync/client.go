package paramsync

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	paramsyncpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/parameter_sync"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/modelserver/psshard"
)

// Convert is the PredictRequest a PushRequest travels as (parameter_sync_client.cc's Convert): the
// request's model and signature, and for each delta table T the inputs T_id and T_value of the
// serving PS's hashtable_assign signature. It also returns the number of ids. The reference's
// multi hash table form (inputs id, id_split, flat_value) is not served here: a request with
// delta_multi_hash_tables is an error.
func Convert(req *paramsyncpb.PushRequest) (*servingapis.PredictRequest, int, error) {
	if len(req.GetDeltaMultiHashTables()) > 0 {
		return nil, 0, fmt.Errorf("push request: delta_multi_hash_tables are not supported (the serving PS has no multi hash table)")
	}
	deltas := make([]psshard.AssignDelta, 0, len(req.GetDeltaHashTables()))
	total := 0
	for _, d := range req.GetDeltaHashTables() {
		dim := int(d.GetDimSize())
		if dim <= 0 || len(d.GetEmbeddings()) != len(d.GetFids())*dim {
			return nil, 0, fmt.Errorf("push request: table %q: %d embedding floats for %d fids of dimension %d", d.GetUniqueId(), len(d.GetEmbeddings()), len(d.GetFids()), dim)
		}
		deltas = append(deltas, psshard.AssignDelta{Table: d.GetUniqueId(), IDs: d.GetFids(), Embeddings: d.GetEmbeddings(), Dim: dim})
		total += len(d.GetFids())
	}
	return &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: req.GetModelName(), SignatureName: req.GetSignatureName()},
		Inputs:    psshard.AssignInputs(deltas),
	}, total, nil
}

// maxMessageBytes bounds the messages of the sync clients' connections (the reference's 32 MiB).
const maxMessageBytes = 32 << 20

// conns are the gRPC connections to the targets, by address (the reference's SyncClientManager:
// kept while their target is listed, closed when it no longer is).
type conns struct {
	creds credentials.TransportCredentials
	mu    sync.Mutex
	m     map[string]*grpc.ClientConn
}

func newConns(creds credentials.TransportCredentials) *conns {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &conns{creds: creds, m: map[string]*grpc.ClientConn{}}
}

// client returns the PredictionService client of addr, connecting lazily.
func (c *conns) client(addr string) (servingapis.PredictionServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.m[addr]; ok {
		return servingapis.NewPredictionServiceClient(cc), nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxMessageBytes), grpc.MaxCallRecvMsgSize(maxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("sync target %s: %w", addr, err)
	}
	c.m[addr] = cc
	return servingapis.NewPredictionServiceClient(cc), nil
}

// keep closes the connections of addresses not in addrs.
func (c *conns) keep(addrs []string) {
	want := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		want[a] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, cc := range c.m {
		if !want[a] {
			cc.Close()
			delete(c.m, a)
		}
	}
}

func (c *conns) close() { c.keep(nil) }

// drop closes addr's connection (the next push dials anew). After a try timed out or found the
// target unavailable, the old connection may sit in TCP's retransmission backoff long after the
// target is reachable again (a healed partition: seconds), where a new one connects at once.
func (c *conns) drop(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.m[addr]; ok {
		cc.Close()
		delete(c.m, addr)
	}
}

// push sends one request to addr once, bounded by the request's timeout_in_ms (and ctx), and says
// how it went as the reference's PushResponse: the target, the gRPC status and, when it succeeded,
// the ids the target assigned.
// The answer's servable id (psshard.ServableIDHeader; "" when the target does not say) goes in
// *servable.
func (c *conns) push(ctx context.Context, addr string, req *paramsyncpb.PushRequest, pred *servingapis.PredictRequest, servable *string) *paramsyncpb.PushResponse {
	resp := &paramsyncpb.PushResponse{Target: proto.String(addr), UpdateNum: proto.Int32(0)}
	fail := func(err error) *paramsyncpb.PushResponse {
		st := status.Convert(err)
		resp.StatusCode = proto.Int32(int32(st.Code()))
		resp.ErrorMessage = proto.String(st.Message())
		return resp
	}
	client, err := c.client(addr)
	if err != nil {
		return fail(err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Duration(req.GetTimeoutInMs())*time.Millisecond)
	defer cancel()
	var hdr metadata.MD
	out, err := client.Predict(actx, pred, grpc.Header(&hdr))
	if v := hdr.Get(psshard.ServableIDHeader); len(v) > 0 {
		*servable = v[0]
	}
	if err != nil {
		return fail(err)
	}
	deltas := make([]psshard.AssignDelta, 0, len(req.GetDeltaHashTables()))
	for _, d := range req.GetDeltaHashTables() {
		deltas = append(deltas, psshard.AssignDelta{Table: d.GetUniqueId(), IDs: d.GetFids()})
	}
	got, err := psshard.AssignResult(out.GetOutputs(), deltas)
	if err != nil {
		return fail(status.Errorf(codes.Internal, "the target's answer: %v", err))
	}
	resp.StatusCode = proto.Int32(int32(codes.OK))
	resp.ErrorMessage = proto.String("")
	resp.UpdateNum = proto.Int32(int32(got))
	return resp
}
