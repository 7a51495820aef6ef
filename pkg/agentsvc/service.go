package agentsvc

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/datadef"
)

// pyAppError is how grpcio reports an exception raised by a Python servicer (status UNKNOWN); the
// service answers the reference's deliberate errors the same way, so clients see the same status.
const pyAppError = "Exception calling application: "

// errV3Replicas is the reference's NotImplementedError for GetReplicas in agent v3.
var errV3Replicas = status.Error(codes.Unknown, pyAppError+"not implement for agent v3")

// maxCachedKeys bounds the cached GetReplicas answers per data version: task numbers come from
// clients, and a flood of distinct ones must not grow memory.
const maxCachedKeys = 4096

// Service implements the AgentService RPCs (the reference's AgentServiceImpl) over one data source.
// Create it with NewWatcherService (v1), NewMirrorService (v2) or NewProviderService (v3). It is
// safe for concurrent use; responses it returns are shared and must not be modified.
type Service struct {
	pb.UnimplementedAgentServiceServer
	backend backend
	version func() (uint64, bool)
	log     *slog.Logger

	hb   versionCache[pb.ServerType, *encoded[*pb.HeartBeatResponse]]
	reps versionCache[replicasKey, *encoded[*pb.GetReplicasResponse]]
}

// encoded is a response and, when it was cached, its wire bytes (deterministic: map entries in key
// order), which Server sends as they are instead of marshalling the message on every call.
type encoded[M proto.Message] struct {
	msg   M
	bytes []byte
}

// wire returns what the gRPC handler hands the codec: the bytes when there are some.
func (e *encoded[M]) wire() any {
	if e.bytes != nil {
		return preEncoded(e.bytes)
	}
	return e.msg
}

// backend is one data source's answers. Implementations may panic on a misbehaving source: the
// service recovers and answers UNKNOWN, as grpcio does for a Python exception.
type backend interface {
	replicas(req *pb.GetReplicasRequest) (*pb.GetReplicasResponse, error)
	heartBeat(st pb.ServerType) (*pb.HeartBeatResponse, error)
	resource() (*pb.GetResourceResponse, error)
	// checksType says whether requests with a server type the enum does not define are refused.
	checksType() bool
}

// Option configures a Service.
type Option func(*Service)

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

func newService(b backend, src any, opts []Option) *Service {
	s := &Service{backend: b, log: slog.Default(), version: func() (uint64, bool) { return 0, false }}
	if v, ok := src.(Versioned); ok {
		s.version = func() (uint64, bool) { return v.DataVersion(), true }
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NewWatcherService answers from a ReplicaWatcher (agent v1, or the reference's conf None):
// GetReplicas and HeartBeat at the watcher's location, GetResource empty.
func NewWatcherService(src ReplicaSource, conf WatcherConfig, opts ...Option) *Service {
	return newService(&watcherBackend{src: src, conf: conf}, src, opts)
}

// NewMirrorService answers from a ZKMirror (agent v2); GetResource reports res.
func NewMirrorService(src MirrorSource, res *Resource, opts ...Option) *Service {
	return newService(&mirrorBackend{src: src, res: res}, src, opts)
}

// NewProviderService answers HeartBeat from fn (agent v3, AgentDataProvider); GetReplicas is
// UNKNOWN "not implement for agent v3" as in the reference; GetResource reports res.
func NewProviderService(fn AddrsFunc, res *Resource, opts ...Option) *Service {
	return newService(&providerBackend{fn: fn, res: res}, nil, opts)
}

type replicasKey struct {
	st    pb.ServerType
	task  int32
	model string
}

// GetReplicas returns the addresses of the replicas of one task.
func (s *Service) GetReplicas(ctx context.Context, req *pb.GetReplicasRequest) (*pb.GetReplicasResponse, error) {
	e, err := s.getReplicas(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.msg, nil
}

func (s *Service) getReplicas(ctx context.Context, req *pb.GetReplicasRequest) (e *encoded[*pb.GetReplicasResponse], err error) {
	defer recoverTo(&err, s.log, "GetReplicas")
	if err := s.checkType(req.GetServerType()); err != nil {
		return nil, err
	}
	key := replicasKey{st: req.GetServerType(), task: req.GetTask(), model: req.GetModelName()}
	return cached(s, &s.reps, key, func() (*pb.GetReplicasResponse, error) { return s.backend.replicas(req) })
}

// HeartBeat returns the address table of one server type.
func (s *Service) HeartBeat(ctx context.Context, req *pb.HeartBeatRequest) (*pb.HeartBeatResponse, error) {
	e, err := s.heartBeat(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.msg, nil
}

func (s *Service) heartBeat(ctx context.Context, req *pb.HeartBeatRequest) (e *encoded[*pb.HeartBeatResponse], err error) {
	defer recoverTo(&err, s.log, "HeartBeat")
	st := req.GetServerType()
	if err := s.checkType(st); err != nil {
		return nil, err
	}
	e, err = cached(s, &s.hb, st, func() (*pb.HeartBeatResponse, error) { return s.backend.heartBeat(st) })
	if err == nil && s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.DebugContext(ctx, "heartbeat response", "server_type", st.String(), "groups", len(e.msg.GetAddresses()))
	}
	return e, err
}

// GetResource returns the identity and free memory of the agent's process (empty for v1).
func (s *Service) GetResource(ctx context.Context, _ *pb.GetResourceRequest) (resp *pb.GetResourceResponse, err error) {
	defer recoverTo(&err, s.log, "GetResource")
	return s.backend.resource()
}

func (s *Service) checkType(st pb.ServerType) error {
	if _, ok := pb.ServerType_name[int32(st)]; !ok && s.backend.checksType() {
		return status.Errorf(codes.InvalidArgument, "unknown server_type %d", int32(st))
	}
	return nil
}

// recoverTo turns a panic in a data source into an UNKNOWN status instead of killing the process.
func recoverTo(err *error, log *slog.Logger, rpc string) {
	if r := recover(); r != nil {
		log.Error("agent service: data source panicked", "rpc", rpc, "panic", r)
		*err = status.Errorf(codes.Unknown, "%s%v", pyAppError, r)
	}
}

// versionCache holds the responses built for one data version.
type versionCache[K comparable, V any] struct {
	mu      sync.RWMutex
	version uint64
	m       map[K]V
}

// cached answers from the cache when the source's data version has not changed since the response
// was built; a response is stored, with its wire bytes, only if the version did not move while it
// was being built.
func cached[K comparable, M proto.Message](s *Service, c *versionCache[K, *encoded[M]], key K, build func() (M, error)) (*encoded[M], error) {
	v0, ok := s.version()
	if !ok {
		msg, err := build()
		if err != nil {
			return nil, err
		}
		return &encoded[M]{msg: msg}, nil
	}
	c.mu.RLock()
	if c.m != nil && c.version == v0 {
		if e, hit := c.m[key]; hit {
			c.mu.RUnlock()
			return e, nil
		}
	}
	c.mu.RUnlock()
	msg, err := build()
	if err != nil {
		return nil, err
	}
	e := &encoded[M]{msg: msg}
	if v1, _ := s.version(); v1 != v0 {
		return e, nil
	}
	if e.bytes, err = deterministic.Marshal(msg); err != nil {
		return nil, status.Errorf(codes.Internal, "agent service: encode response: %v", err)
	}
	if e.bytes == nil {
		e.bytes = []byte{} // an empty message is cached too
	}
	c.mu.Lock()
	if c.m == nil || c.version != v0 {
		c.m, c.version = map[K]*encoded[M]{}, v0
	}
	if len(c.m) < maxCachedKeys {
		c.m[key] = e
	}
	c.mu.Unlock()
	return e, nil
}

var deterministic = proto.MarshalOptions{Deterministic: true}

func addressList(addrs []string) *pb.AddressList {
	return &pb.AddressList{Address: append([]string(nil), addrs...)}
}

// watcherBackend is agent v1: ReplicaWatcher.
type watcherBackend struct {
	src  ReplicaSource
	conf WatcherConfig
}

func (b *watcherBackend) checksType() bool { return true }

func (b *watcherBackend) replicas(req *pb.GetReplicasRequest) (*pb.GetReplicasResponse, error) {
	addrs := b.src.GetReplicas(req.GetServerType(), int(req.GetTask()), b.conf.IDC, b.conf.Cluster)
	return &pb.GetReplicasResponse{AddressList: addressList(addrs)}, nil
}

// heartBeat keys the table by task. With dc_aware the watcher's keys carry the location
// ("lf:default/ps:0") and are trimmed to the task; should several locations share a task (the
// location is unknown, so all ship), their addresses are merged in key order where the reference
// kept an arbitrary one.
func (b *watcherBackend) heartBeat(st pb.ServerType) (*pb.HeartBeatResponse, error) {
	all := b.src.GetAllReplicas(st, b.conf.IDC, b.conf.Cluster)
	resp := &pb.HeartBeatResponse{Addresses: make(map[string]*pb.AddressList, len(all))}
	if !b.conf.DCAware {
		for key, addrs := range all {
			resp.Addresses[key] = addressList(addrs)
		}
		return resp, nil
	}
	for _, key := range slices.Sorted(maps.Keys(all)) {
		short := key[strings.LastIndexByte(key, '/')+1:]
		if l, ok := resp.Addresses[short]; ok {
			l.Address = append(l.Address, all[key]...)
			continue
		}
		resp.Addresses[short] = addressList(all[key])
	}
	return resp, nil
}

func (b *watcherBackend) resource() (*pb.GetResourceResponse, error) {
	return &pb.GetResourceResponse{}, nil
}

// mirrorBackend is agent v2: ZKMirror, asked with the server type's path name (the reference
// passed the enum's int, so HeartBeat was always empty and GetReplicas raised).
type mirrorBackend struct {
	src MirrorSource
	res *Resource
}

func (b *mirrorBackend) checksType() bool { return true }

func metaAddrs(rms []datadef.ReplicaMeta) []string {
	out := make([]string, 0, len(rms))
	for _, rm := range rms {
		if rm.Address != nil {
			out = append(out, *rm.Address)
		}
	}
	return out
}

func (b *mirrorBackend) replicas(req *pb.GetReplicasRequest) (*pb.GetReplicasResponse, error) {
	rms := b.src.GetTaskReplicas(req.GetModelName(), ServerTypeName(req.GetServerType()), int(req.GetTask()))
	return &pb.GetReplicasResponse{AddressList: &pb.AddressList{Address: metaAddrs(rms)}}, nil
}

func (b *mirrorBackend) heartBeat(st pb.ServerType) (*pb.HeartBeatResponse, error) {
	all := b.src.GetAllReplicas(ServerTypeName(st))
	resp := &pb.HeartBeatResponse{Addresses: make(map[string]*pb.AddressList, len(all))}
	for key, rms := range all {
		resp.Addresses[key] = &pb.AddressList{Address: metaAddrs(rms)}
	}
	return resp, nil
}

func (b *mirrorBackend) resource() (*pb.GetResourceResponse, error) { return b.res.response() }

// providerBackend is agent v3: AgentDataProvider. HeartBeat answers every saved model whatever the
// server type, as the reference does.
type providerBackend struct {
	fn  AddrsFunc
	res *Resource
}

func (b *providerBackend) checksType() bool { return false }

func (b *providerBackend) replicas(*pb.GetReplicasRequest) (*pb.GetReplicasResponse, error) {
	return nil, errV3Replicas
}

func (b *providerBackend) heartBeat(pb.ServerType) (*pb.HeartBeatResponse, error) {
	resp := &pb.HeartBeatResponse{Addresses: map[string]*pb.AddressList{}}
	if b.fn == nil {
		return resp, nil
	}
	for name, addrs := range b.fn() {
		resp.Addresses[name] = addressList(addrs)
	}
	return resp, nil
}

func (b *providerBackend) resource() (*pb.GetResourceResponse, error) { return b.res.response() }

// errNoResource is returned by GetResource of a v2/v3 service built without a Resource.
var errNoResource = status.Error(codes.FailedPrecondition, "agent service: no resource configured")

func (r *Resource) response() (*pb.GetResourceResponse, error) {
	if r == nil {
		return nil, errNoResource
	}
	for name, id := range map[string]int{"shard_id": r.ShardID, "replica_id": r.ReplicaID} {
		if id < math.MinInt32 || id > math.MaxInt32 {
			// The reference's protobuf raised "Value out of range" here too.
			return nil, status.Errorf(codes.Internal, "agent service: %s %d does not fit the int32 field", name, id)
		}
	}
	mem, err := r.memory()
	if err != nil {
		return nil, status.Error(codes.Internal, fmt.Sprintf("agent service: available memory: %v", err))
	}
	return &pb.GetResourceResponse{
		Address:   r.Address,
		ShardId:   int32(r.ShardID),
		ReplicaId: int32(r.ReplicaID),
		Memory:    mem,
		Cpu:       -1,
		Network:   -1,
		WorkLoad:  -1,
	}, nil
}
