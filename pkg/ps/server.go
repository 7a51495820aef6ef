// Package ps is the parameter server of the training side: a gRPC service (ParameterServer, in
// proto/monolith/native_training/ps/ps_service.proto) holding embedding tables (pkg/embedding),
// several per server, one per feature slot config; and its client, a Router that spreads a batch
// over the servers of a job by the reference's rule (floormod(id, num_ps), distributed_ps.py),
// de-duplicating the ids per server and calling all servers in parallel.
//
// A server also holds the job's barriers (the Barrier RPC: a rendezvous of count workers, and the
// chief's barrier of barrier_ops, which pkg/hooks/barrier's Remote uses), and answers Health with
// its machine health as ps_check_hooks reads it (pkg/hooks/pscheck's RemoteProbe). It also holds
// the allreduce rounds of synchronous training (AllReduce: the workers' dense gradients averaged).
// RouterStore is the Router as a worker model's embedding store.
//
// # Bounds
//
// Every size in a request or a table config has an upper bound; past it the call is
// INVALID_ARGUMENT naming the field and the bound (the ids of one Lookup or ApplyGradients are
// RESOURCE_EXHAUSTED, as the service's proto says), never a panic or an allocation of the size
// asked for:
//
//   - a table's dimension, the sum of its segments' dim_size: MaxDim (65536);
//   - a table's name: MaxTableNameBytes (255 bytes, NAME_MAX: it names a directory of the dump);
//   - the tables of a server, and the table configs of one CreateTables: MaxTables (1024);
//   - initial_capacity: embedding.MaxInitialCapacity (1<<40 entries);
//   - a sliding filter's split_num: embedding.MaxFilterSplitNum (64), and its capacity:
//     embedding.MaxFilterCapacity(split_num), split_num-1 splits of
//     embedding.MaxFilterSplitCapacity (3579139360) ids, a split's cells being addressed by the
//     32-bit offsets of its dump (21474836160 ids with the default 7 splits);
//   - the memory the tables allocate when they are created (initial_capacity's slots and rows,
//     the sliding filters' cells, 2.8 bytes an id: 840 MB for the default filter), all tables
//     together: Config.ReserveLimit, by default the machine's memory;
//   - feature_evict_every_n_hours: embedding.MaxEvictEveryHours (876000, the default expire
//     time of 36500 days);
//   - the ids of one Lookup or ApplyGradients: Config.MaxIDsPerRequest
//     (DefaultMaxIDsPerRequest, 1<<20; cmd/ps --max_ids_per_request), and a message's bytes:
//     Config.MaxMessageBytes (DefaultMaxMessageBytes, 256 MiB; at most MaxMessageBytes, 4 GiB
//     less the framing, a gRPC message's length being 32 bits);
//   - SaveRequest.shards_per_table: MaxShardsPerTable (1024);
//   - BarrierRequest.count and AllReduceRequest.count: MaxWorkers (65536).
//
// A gradient or learning rate that is not finite (NaN, +-Inf) makes ApplyGradients
// INVALID_ARGUMENT naming the table and the first bad id, with nothing of the request applied;
// monolith_ps_rejected_gradients_total{ps,table} counts those calls.
//
// # Long calls
//
// Save and Restore honour their caller's deadline and cancellation, looking at it between files
// and every few hundred records; a Save cut short leaves no new files (each table's files are
// written under temporary names and renamed into place once all are written). When the server
// stops (Running.Stop), the long calls in flight (Save, Restore, the waits of Barrier and
// AllReduce) end at once with UNAVAILABLE, instead of holding the stop for its grace period.
package ps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/internal/buildinfo"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/eventtime"
	"github.com/monolith-go/monolith/pkg/grpcstop"
	"github.com/monolith-go/monolith/pkg/hooks/pscheck"
)

// Default limits of a server.
const (
	// DefaultMaxIDsPerRequest is how many ids one Lookup or ApplyGradients may carry.
	DefaultMaxIDsPerRequest = 1 << 20
	// DefaultMaxMessageBytes bounds every request and response (gRPC's own limit is set to it).
	DefaultMaxMessageBytes = 256 << 20
	// MaxMessageBytes is the largest Config.MaxMessageBytes: gRPC frames a message with a 32-bit
	// length, which must hold the payload and the message's other fields (messageSlack).
	MaxMessageBytes = 1<<32 - 1 - messageSlack
)

// Config configures a Server.
type Config struct {
	// Index is this server's index among NumPS (ids with floormod(id, NumPS) == Index are its).
	Index, NumPS int
	// Tables are created at start; more can be created with CreateTables.
	Tables []*pspb.TableConfig
	// MaxIDsPerRequest and MaxMessageBytes bound requests (0: the defaults).
	MaxIDsPerRequest, MaxMessageBytes int
	// MemLimit is the resident memory at which Health reports the machine out of memory (0:
	// pscheck.DefaultMemLimit, the reference's monolith_default_machine_info_mem_limit).
	MemLimit int64
	// MemoryUsage reads the process's resident memory (nil: pscheck.ProcessMemoryUsage).
	MemoryUsage func() (int64, error)
	// ReserveLimit bounds the memory the server's tables allocate at their creation, all of them
	// together: their initial_capacity's slots and rows and their sliding filters' cells (0: the
	// machine's memory, MemTotal of /proc/meminfo, or 1 TiB where that cannot be read). A table
	// config past it is refused (INVALID_ARGUMENT) rather than allocated: an allocation the
	// machine cannot back would kill the process.
	ReserveLimit int64
	// EvictEvery, when positive, is the eviction period of the tables that evict expired entries
	// (enable_feature_eviction), instead of their feature_evict_every_n_hours. Close stops the
	// eviction loops.
	EvictEvery time.Duration
	// Workers is how many goroutines a table uses per batch (0: all cores).
	Workers int
	// InitGenerator returns the random source of a table's random uniform initializers (nil:
	// initializer.Shared for every table, the process's, as the reference's per-thread
	// generator). A generator per table (and per server, for servers in one process) makes the
	// initial values independent of the order in which concurrent batches arrive: a run repeats.
	InitGenerator func(table string) *initializer.Generator
	// TrackTouched makes the tables mark the entries updated since parameter sync last took them
	// (sync.go), from the start; SetTrackTouched changes it later.
	TrackTouched bool
	// Metrics, when set, counts the server's RPCs and reports its tables.
	Metrics *Metrics
	// Logger (nil: slog.Default()).
	Logger *slog.Logger
}

// Server is the ParameterServer service. Its methods are safe for concurrent use.
type Server struct {
	pspb.UnimplementedParameterServerServer

	cfg  Config
	log  *slog.Logger
	bars *barriers
	reds *reductions

	mu     sync.RWMutex
	tables map[string]*table
	// track is whether the tables track touched entries (under mu, which table creation holds).
	track bool
	// newest is the newest event time of the gradients applied (parameter sync pushes it).
	newest eventtime.Newest
	// reserved is the memory the tables allocated at their creation (under mu), bounded by
	// cfg.ReserveLimit, which reserveWhat names.
	reserved    int64
	reserveWhat string

	// evict runs the tables' eviction loops until Close.
	evictCtx    context.Context
	evictCancel context.CancelFunc
	evictWG     sync.WaitGroup

	// stopping ends when the server stops (Running.Stop, Kill, Close): the long calls (Save,
	// Restore, the waits of Barrier and AllReduce) end then, rather than hold up the stop for its
	// grace period.
	stopping context.Context
	stop     context.CancelCauseFunc
}

// errStopping is the cause of the calls that the server's stop ended.
var errStopping = errors.New("the parameter server is stopping")

// untilStop is ctx, also ending when the server stops; call done when the call returns.
func (s *Server) untilStop(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(s.stopping, func() { cancel(errStopping) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

// ctxStatus is the status of a call whose context (from untilStop) ended: UNAVAILABLE when the
// server is stopping, else the context's own code; what names the call.
func (s *Server) ctxStatus(ctx context.Context, what string) error {
	if errors.Is(context.Cause(ctx), errStopping) {
		return status.Errorf(codes.Unavailable, "ps %d: %s: %v", s.cfg.Index, what, errStopping)
	}
	return status.Errorf(status.FromContextError(ctx.Err()).Code(), "ps %d: %s: %v", s.cfg.Index, what, ctx.Err())
}

// NewServer returns a server with cfg's tables. Close stops its background work.
func NewServer(cfg Config) (*Server, error) {
	switch {
	case cfg.NumPS < 1:
		return nil, errkind.New(errkind.Value, "ps: num_ps %d, want at least 1", cfg.NumPS)
	case cfg.Index < 0 || cfg.Index >= cfg.NumPS:
		return nil, errkind.New(errkind.Value, "ps: index %d, want 0..%d (num_ps %d)", cfg.Index, cfg.NumPS-1, cfg.NumPS)
	case cfg.MaxIDsPerRequest < 0 || cfg.MaxMessageBytes < 0 || cfg.MemLimit < 0 || cfg.ReserveLimit < 0:
		return nil, errkind.New(errkind.Value, "ps: negative limit (max_ids_per_request %d, max_message_bytes %d, mem_limit %d, reserve_limit %d)",
			cfg.MaxIDsPerRequest, cfg.MaxMessageBytes, cfg.MemLimit, cfg.ReserveLimit)
	case cfg.MaxMessageBytes > MaxMessageBytes:
		return nil, errkind.New(errkind.Value, "ps: max_message_bytes %d, want at most %d (MaxMessageBytes: a gRPC message's length is 32 bits)", cfg.MaxMessageBytes, MaxMessageBytes)
	}
	if cfg.MaxIDsPerRequest == 0 {
		cfg.MaxIDsPerRequest = DefaultMaxIDsPerRequest
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MemLimit == 0 {
		cfg.MemLimit = pscheck.DefaultMemLimit
	}
	reserveWhat := "reserve_limit"
	if cfg.ReserveLimit == 0 {
		cfg.ReserveLimit, reserveWhat = fallbackReserveLimit, "ps.fallbackReserveLimit"
		if m := machineMemory(); m > 0 {
			cfg.ReserveLimit, reserveWhat = m, "the machine's memory"
		}
	}
	if cfg.MemoryUsage == nil {
		cfg.MemoryUsage = pscheck.ProcessMemoryUsage
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, bars: newBarriers(), reds: newReductions(), tables: map[string]*table{}, track: cfg.TrackTouched,
		reserveWhat: reserveWhat}
	s.evictCtx, s.evictCancel = context.WithCancel(context.Background())
	s.stopping, s.stop = context.WithCancelCause(context.Background())
	if _, err := s.createTables(cfg.Tables); err != nil {
		s.Close()
		return nil, err
	}
	cfg.Metrics.watch(s)
	return s, nil
}

// Close stops the eviction loops and ends the long calls in flight (Save, Restore, the waits),
// which answer UNAVAILABLE. The gRPC server serving s is the caller's to stop.
func (s *Server) Close() {
	s.stop(errStopping)
	s.evictCancel()
	s.evictWG.Wait()
}

// Index and NumPS are the server's place in its job.
func (s *Server) Index() int { return s.cfg.Index }
func (s *Server) NumPS() int { return s.cfg.NumPS }

// Register registers the service on r.
func (s *Server) Register(r grpc.ServiceRegistrar) { pspb.RegisterParameterServerServer(r, s) }

// GRPCOptions are the gRPC server options s needs: the package's codec (protobuf on the wire,
// bulk payloads without copies), its message size limit (with room for the framing), the
// transport settings, and the metrics interceptor when it has metrics.
func (s *Server) GRPCOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.MaxRecvMsgSize(s.cfg.MaxMessageBytes + messageSlack),
		grpc.MaxSendMsgSize(s.cfg.MaxMessageBytes + messageSlack),
	}
	opts = append(opts, TransportServerOptions()...)
	if s.cfg.Metrics != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.cfg.Metrics.UnaryServerInterceptor()))
	}
	return opts
}

// NewGRPCServer returns a gRPC server with s registered and GRPCOptions, plus extra options.
func (s *Server) NewGRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append(s.GRPCOptions(), extra...)...)
	s.Register(g)
	return g
}

// messageSlack is room for a message's fields besides its ids and floats.
const messageSlack = 64 << 10

// createTables adds the tables of cfgs that do not exist; an existing one with another config is
// an error. It returns the names of the tables it created.
func (s *Server) createTables(cfgs []*pspb.TableConfig) ([]string, error) {
	if len(cfgs) > MaxTables {
		return nil, errkind.New(errkind.Value, "%d table configs, a server holds at most %d tables (MaxTables)", len(cfgs), MaxTables)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := map[string]*pspb.TableConfig{}
	var todo []*pspb.TableConfig
	for _, c := range cfgs {
		if err := CheckTableConfig(c); err != nil {
			return nil, err
		}
		if old, ok := s.tables[c.GetName()]; ok {
			if !proto.Equal(old.cfg, c) {
				return nil, errkind.New(errkind.Precondition, "table %q exists with another config", c.GetName())
			}
			continue
		}
		if old, ok := batch[c.GetName()]; ok {
			if !proto.Equal(old, c) {
				return nil, errkind.New(errkind.Value, "table %q is configured twice, differently", c.GetName())
			}
			continue
		}
		batch[c.GetName()] = c
		todo = append(todo, c)
	}
	if n := len(s.tables) + len(todo); n > MaxTables {
		return nil, errkind.New(errkind.Value, "%d new tables and the %d there are: %d, a server holds at most %d tables (MaxTables)", len(todo), len(s.tables), n, MaxTables)
	}
	built := make([]*table, 0, len(todo))
	budget := reserveBudget{limit: s.cfg.ReserveLimit, used: s.reserved, what: s.reserveWhat}
	for _, c := range todo {
		tb, err := newTable(c, s.cfg.Workers, s.initGenerator(c.GetName()), budget)
		if err != nil {
			return nil, err
		}
		budget.used += tb.reserved
		built = append(built, tb)
	}
	s.reserved = budget.used
	created := make([]string, 0, len(built))
	for _, tb := range built {
		tb.t.TrackTouched(s.track)
		s.tables[tb.name] = tb
		created = append(created, tb.name)
		s.log.Info("table created", "table", tb.name, "dim", tb.t.Dim(), "ps", s.cfg.Index)
		if every := tb.evictEvery; every > 0 {
			if s.cfg.EvictEvery > 0 {
				every = s.cfg.EvictEvery
			}
			s.evictWG.Add(1)
			go func() {
				defer s.evictWG.Done()
				tb.t.RunEviction(s.evictCtx, every, s.log.With("table", tb.name))
			}()
		}
	}
	return created, nil
}

// table returns the table name, checking the caller's dimension.
// initGenerator is Config.InitGenerator's generator for table, or the process's shared one.
func (s *Server) initGenerator(table string) *initializer.Generator {
	if s.cfg.InitGenerator != nil {
		return s.cfg.InitGenerator(table)
	}
	return initializer.Shared
}

func (s *Server) table(name string, dim int32) (*table, error) {
	s.mu.RLock()
	tb, ok := s.tables[name]
	s.mu.RUnlock()
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: unknown table %q (tables: %s)", s.cfg.Index, name, s.tableList())
	}
	if int(dim) != tb.t.Dim() {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q has dimension %d, the request says %d", s.cfg.Index, name, tb.t.Dim(), dim)
	}
	return tb, nil
}

func (s *Server) tableList() string {
	names := s.tableNames()
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprintf("%q", names)
}

func (s *Server) tableNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.tables))
}

// selected returns the tables names lists, all of them when names is empty.
func (s *Server) selected(names []string) ([]*table, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(s.tables))
	}
	out := make([]*table, 0, len(names))
	for _, n := range names {
		tb, ok := s.tables[n]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "ps %d: unknown table %q", s.cfg.Index, n)
		}
		out = append(out, tb)
	}
	return out, nil
}

// rpcError is err as a gRPC status: a context's error as its code, an errkind kind as the
// matching code, else Internal; the message names this server.
func (s *Server) rpcError(what string, err error) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	msg := fmt.Sprintf("ps %d: %s: %v", s.cfg.Index, what, err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, msg)
	}
	switch errkind.Of(err) {
	case errkind.Value, errkind.Type:
		return status.Error(codes.InvalidArgument, msg)
	case errkind.NotFound:
		return status.Error(codes.NotFound, msg)
	case errkind.Precondition:
		return status.Error(codes.FailedPrecondition, msg)
	}
	s.log.Error("ps: "+what+" failed", "err", err)
	return status.Error(codes.Internal, msg)
}

// ctxError is the status of a call whose context ended before the work started.
func ctxError(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

// CreateTables creates the tables that do not exist.
func (s *Server) CreateTables(ctx context.Context, req *pspb.CreateTablesRequest) (*pspb.CreateTablesResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	created, err := s.createTables(req.GetTables())
	if err != nil {
		return nil, s.rpcError("create tables", err)
	}
	return &pspb.CreateTablesResponse{Created: created}, nil
}

// checkIDs checks a request's ids against the limits; rowBytes is the bytes per id of the
// request's or response's floats.
func (s *Server) checkIDs(what, table string, n, rowBytes int) error {
	if n > s.cfg.MaxIDsPerRequest {
		return status.Errorf(codes.ResourceExhausted, "ps %d: %s of %d ids in table %q is over the limit of %d ids per request (max_ids_per_request)",
			s.cfg.Index, what, n, table, s.cfg.MaxIDsPerRequest)
	}
	if b := n * rowBytes; b > s.cfg.MaxMessageBytes {
		return status.Errorf(codes.ResourceExhausted, "ps %d: %s of %d ids in table %q is %d bytes, over the limit of %d bytes per message (max_message_bytes)",
			s.cfg.Index, what, n, table, b, s.cfg.MaxMessageBytes)
	}
	return nil
}

// Lookup returns the embeddings of the request's ids.
func (s *Server) Lookup(ctx context.Context, req *pspb.LookupRequest) (*pspb.LookupResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	tb, err := s.table(req.GetTable(), req.GetDim())
	if err != nil {
		return nil, err
	}
	ids, err := decodeInt64s("lookup ids", req.GetIds())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: %v", s.cfg.Index, tb.name, err)
	}
	dim := tb.t.Dim()
	if err := s.checkIDs("lookup", tb.name, len(ids), 8+4*dim); err != nil {
		return nil, err
	}
	// The answer is written into a pooled buffer, which the codec sends as it is and then
	// returns to the pool.
	buf := floatPool.Get(4 * len(ids) * dim)
	out, err := decodeFloat32s("lookup buffer", *buf)
	if err != nil {
		return nil, s.rpcError("lookup in table "+tb.name, err)
	}
	found, err := tb.t.Lookup(ids, out)
	if err != nil {
		return nil, s.rpcError("lookup in table "+tb.name, err)
	}
	tb.lookups.Add(1)
	tb.lookupIDs.Add(int64(len(ids)))
	if len(*buf) > 0 {
		responseBuffers.put(buf)
	}
	return &pspb.LookupResponse{Embeddings: *buf, Found: int64(found)}, nil
}

// ApplyGradients updates the entries of the request's ids.
func (s *Server) ApplyGradients(ctx context.Context, req *pspb.ApplyGradientsRequest) (*pspb.ApplyGradientsResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	tb, err := s.table(req.GetTable(), req.GetDim())
	if err != nil {
		return nil, err
	}
	ids, err := decodeInt64s("apply ids", req.GetIds())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: %v", s.cfg.Index, tb.name, err)
	}
	grads, err := decodeFloat32s("apply gradients", req.GetGrads())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: %v", s.cfg.Index, tb.name, err)
	}
	dim := tb.t.Dim()
	if err := s.checkIDs("apply", tb.name, len(ids), 8+4*dim); err != nil {
		return nil, err
	}
	if len(grads) != len(ids)*dim {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: %d gradient floats for %d ids of dimension %d, want %d",
			s.cfg.Index, tb.name, len(grads), len(ids), dim, len(ids)*dim)
	}
	lrs := req.GetLearningRates()
	if len(lrs) == 0 {
		lrs = tb.lr
	} else if len(lrs) != len(tb.lr) {
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: %d learning rates, the table takes %d (one per segment)",
			s.cfg.Index, tb.name, len(lrs), len(tb.lr))
	}
	// A NaN or an infinity would spread through the optimizer into the entries (and every
	// lookup of them after): the request is refused whole.
	if i := firstNonFinite(grads); i >= 0 {
		tb.rejected.Add(1)
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: gradient of id %d (the request's id %d of %d) is %v: a gradient must be finite; nothing of the request was applied",
			s.cfg.Index, tb.name, ids[i/dim], i/dim, len(ids), grads[i])
	}
	if i := firstNonFinite(lrs); i >= 0 {
		tb.rejected.Add(1)
		return nil, status.Errorf(codes.InvalidArgument, "ps %d: table %q: learning rate %d (of segment %d) is %v: a learning rate must be finite; nothing of the request was applied",
			s.cfg.Index, tb.name, i, i, lrs[i])
	}
	if err := tb.t.Apply(ids, grads, lrs, req.GetGlobalStep(), req.GetUpdateTimeSec()); err != nil {
		return nil, s.rpcError("apply to table "+tb.name, err)
	}
	tb.applies.Add(1)
	tb.applyIDs.Add(int64(len(ids)))
	s.newest.Observe(req.GetNewestEventTimeMs())
	return &pspb.ApplyGradientsResponse{}, nil
}

// firstNonFinite is the index of the first NaN or infinity of v, -1 when there is none.
func firstNonFinite(v []float32) int {
	const exp = 0x7f800000 // a float32 with every exponent bit set is an infinity or a NaN
	for i, f := range v {
		if math.Float32bits(f)&exp == exp {
			return i
		}
	}
	return -1
}

// Stats reports the tables.
func (s *Server) Stats(ctx context.Context, _ *pspb.StatsRequest) (*pspb.StatsResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	tables, _ := s.selected(nil)
	resp := &pspb.StatsResponse{Index: int32(s.cfg.Index), NumPs: int32(s.cfg.NumPS)}
	for _, tb := range tables {
		resp.Tables = append(resp.Tables, tb.stats())
	}
	return resp, nil
}

func (tb *table) stats() *pspb.TableStats {
	return &pspb.TableStats{
		Name: tb.name, Dim: int32(tb.t.Dim()), Entries: int64(tb.t.Size()), MemoryBytes: tb.t.MemoryBytes(),
		LookupIds: tb.lookupIDs.Load(), Lookups: tb.lookups.Load(), ApplyIds: tb.applyIDs.Load(), Applies: tb.applies.Load(),
		MaxUpdateTsSec: tb.t.MaxUpdateTsSec(),
	}
}

// Health reports the server and its machine health.
func (s *Server) Health(ctx context.Context, _ *pspb.HealthRequest) (*pspb.HealthResponse, error) {
	if err := ctxError(ctx); err != nil {
		return nil, err
	}
	mem, err := s.cfg.MemoryUsage()
	if err != nil {
		return nil, s.rpcError("memory usage", err)
	}
	health, err := pscheck.CheckMachineHealth(&pscheck.MachineInfo{MemLimit: s.cfg.MemLimit}, mem)
	if err != nil {
		return nil, s.rpcError("machine health", err)
	}
	return &pspb.HealthResponse{
		Index: int32(s.cfg.Index), NumPs: int32(s.cfg.NumPS), MachineHealth: health,
		MemoryBytes: mem, MemLimit: s.cfg.MemLimit, Tables: s.tableNames(),
		MaxIdsPerRequest: int64(s.cfg.MaxIDsPerRequest), MaxMessageBytes: int64(s.cfg.MaxMessageBytes),
		Version: buildinfo.Version(),
	}, nil
}

// Running is a server serving on a listener.
type Running struct {
	Server   *Server
	GRPC     *grpc.Server
	addr     string
	done     chan struct{} // closed when Serve returned, with its error in serveErr
	serveErr error
}

// Start serves a new server of cfg on lis (extra gRPC options added) until Stop.
func Start(lis net.Listener, cfg Config, extra ...grpc.ServerOption) (*Running, error) {
	s, err := NewServer(cfg)
	if err != nil {
		return nil, err
	}
	return s.Serve(lis, extra...), nil
}

// Serve serves s on lis (extra gRPC options added) until Stop, which also closes s.
func (s *Server) Serve(lis net.Listener, extra ...grpc.ServerOption) *Running {
	r := &Running{Server: s, GRPC: s.NewGRPCServer(extra...), addr: lis.Addr().String(), done: make(chan struct{})}
	go func() {
		r.serveErr = r.GRPC.Serve(lis)
		close(r.done)
	}()
	return r
}

// Addr is the address the server listens on.
func (r *Running) Addr() string { return r.addr }

// Stop stops serving: the RPCs in flight may finish until ctx ends, then the rest are cancelled.
// It returns once the server has stopped.
//
// The long calls (Save, Restore, and the waits of Barrier and AllReduce) are ended at once,
// answering UNAVAILABLE: a Save cut short leaves no new files, and a wait's caller asks again
// elsewhere or gives up; the grace period is for the short calls.
func (r *Running) Stop(ctx context.Context) error {
	r.Server.stop(errStopping)
	forced := grpcstop.Graceful(ctx, r.GRPC)
	<-r.done
	r.Server.Close()
	err := r.serveErr
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	if forced {
		r.Server.log.Warn("ps: RPCs still running at the stop were cancelled", "ps", r.Server.cfg.Index)
	}
	return err
}

// Kill stops serving at once, closing every connection (a crashed server, for tests).
func (r *Running) Kill() {
	r.Server.stop(errStopping)
	r.GRPC.Stop()
	<-r.done
	r.Server.Close()
}
