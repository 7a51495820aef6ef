package ps

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// RouterConfig configures a Router.
type RouterConfig struct {
	// Addrs are the servers' addresses, server i at Addrs[i].
	Addrs []string
	// CallTimeout bounds each RPC (0: DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxIDsPerCall and MaxMessageBytes are the servers' limits (0: the defaults); a batch is
	// split into calls that stay within them.
	MaxIDsPerCall, MaxMessageBytes int
	// DialOptions are added to each client's.
	DialOptions []grpc.DialOption
}

// Router spreads batches over the servers of a job: ids go to server floormod(id, n)
// (embedding.Shard, the reference's DistributedHashTable rule), each distinct id once, to all
// servers in parallel; the answers are scattered back in the batch's order. It is safe for
// concurrent use.
type Router struct {
	clients       []*Client
	maxIDsPerCall int
	maxMsg        int
}

// NewRouter returns a router over the servers cfg names. It connects on first use.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errkind.New(errkind.Value, "ps router: no servers")
	}
	if cfg.MaxIDsPerCall <= 0 {
		cfg.MaxIDsPerCall = DefaultMaxIDsPerRequest
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	r := &Router{maxIDsPerCall: cfg.MaxIDsPerCall, maxMsg: cfg.MaxMessageBytes}
	for i, a := range cfg.Addrs {
		c, err := Dial(a, ClientConfig{CallTimeout: cfg.CallTimeout, MaxMessageBytes: cfg.MaxMessageBytes, DialOptions: cfg.DialOptions})
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("ps router: server %d: %w", i, err)
		}
		r.clients = append(r.clients, c)
	}
	return r, nil
}

// NumPS is the number of servers.
func (r *Router) NumPS() int { return len(r.clients) }

// Client is server i's client.
func (r *Router) Client(i int) *Client { return r.clients[i] }

// Close closes the connections.
func (r *Router) Close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// chunk is how many ids of dimension dim one call carries.
func (r *Router) chunk(dim int) int {
	return max(1, min(r.maxIDsPerCall, r.maxMsg/(8+4*dim)))
}

// split is a batch's positions grouped by server (a counting sort, batch order kept); each
// server's share is then de-duplicated on its own goroutine (shard), so that grouping, calls and
// scattering of the servers run in parallel.
type split struct {
	server []uint16 // each batch position's server
	pos    []int32  // batch positions, server after server
	starts []int    // server s's positions are pos[starts[s]:starts[s+1]]
	shards []shard
}

// shard is one server's share of a batch.
type shard struct {
	ids  []int64 // distinct ids, in order of first appearance
	rows []int32 // the batch position of each distinct id's first appearance
	idx  []int32 // for each of the server's batch positions, its id's index in ids
	// repeats are the indices (into the server's positions) of the positions whose id appeared
	// earlier in the batch, in batch order: in a batch of random ids from many, a few percent.
	repeats []int32
	cells   []int32
}

var splitPool = sync.Pool{New: func() any { return new(split) }}

// splitBatch groups the positions of ids by server.
func (r *Router) splitBatch(ids []int64) *split {
	n := len(r.clients)
	sp := splitPool.Get().(*split)
	sp.pos = grow(sp.pos, len(ids))
	sp.starts = grow(sp.starts, n+1)
	clear(sp.starts)
	if cap(sp.shards) < n {
		sp.shards = make([]shard, n)
	}
	sp.shards = sp.shards[:n]
	if n == 1 {
		for i := range ids {
			sp.pos[i] = int32(i)
		}
		sp.starts[1] = len(ids)
		return sp
	}
	// Each id's server, counted per server (in starts[s+1]); the counts become offsets, then the
	// positions are placed.
	sp.server = grow(sp.server, len(ids))
	if n&(n-1) == 0 {
		// floormod by a power of two is the low bits, negative ids included.
		mask := int64(n - 1)
		for i, id := range ids {
			s := uint16(id & mask)
			sp.server[i] = s
			sp.starts[s+1]++
		}
	} else {
		for i, id := range ids {
			s := uint16(embedding.Shard(id, n))
			sp.server[i] = s
			sp.starts[s+1]++
		}
	}
	for s := 1; s <= n; s++ {
		sp.starts[s] += sp.starts[s-1]
	}
	next := append([]int(nil), sp.starts[:n]...)
	for i, s := range sp.server[:len(ids)] {
		sp.pos[next[s]] = int32(i)
		next[s]++
	}
	return sp
}

func (sp *split) release() { splitPool.Put(sp) }

// positions are server s's batch positions.
func (sp *split) positions(s int) []int32 { return sp.pos[sp.starts[s]:sp.starts[s+1]] }

// dedup fills sh with the distinct ids at positions of ids, with an open-addressing table.
func (sh *shard) dedup(ids []int64, positions []int32) {
	sh.ids = sh.ids[:0]
	sh.rows = sh.rows[:0]
	sh.repeats = sh.repeats[:0]
	sh.idx = grow(sh.idx, len(positions))
	bits := 4
	for 1<<bits < 2*len(positions) {
		bits++
	}
	size := 1 << bits
	sh.cells = grow(sh.cells, size)
	clear(sh.cells)
	mask := uint64(size - 1)
	for k, p := range positions {
		id := ids[p]
		// Fibonacci hashing: the product's top bits spread sequential and strided ids.
		h := (uint64(id) * 0x9E3779B97F4A7C15) >> (64 - bits)
		for {
			c := sh.cells[h]
			if c == 0 {
				sh.cells[h] = int32(len(sh.ids) + 1)
				sh.idx[k] = int32(len(sh.ids))
				sh.ids = append(sh.ids, id)
				sh.rows = append(sh.rows, p)
				break
			}
			if sh.ids[c-1] == id {
				sh.idx[k] = c - 1
				sh.repeats = append(sh.repeats, int32(k))
				break
			}
			h = (h + 1) & mask
		}
	}
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// Lookup writes the embeddings of ids (dim floats each) to out (len(ids)*dim), looking each
// distinct id up once on its server, all servers in parallel. An id without an entry reads as
// zeros. It returns how many distinct ids have an entry.
func (r *Router) Lookup(ctx context.Context, table string, dim int, ids []int64, out []float32) (int, error) {
	if dim <= 0 || len(out) != len(ids)*dim {
		return 0, errkind.New(errkind.Value, "ps router: lookup in table %q: %d output floats for %d ids of dimension %d", table, len(out), len(ids), dim)
	}
	sp := r.splitBatch(ids)
	defer sp.release()
	found := make([]int, len(r.clients))
	chunk := r.chunk(dim)
	g, gctx := errgroup.WithContext(ctx)
	for s := range r.clients {
		positions := sp.positions(s)
		if len(positions) == 0 {
			continue
		}
		g.Go(func() error {
			sh := &sp.shards[s]
			sh.dedup(ids, positions)
			var err error
			// The answers land in the rows of the ids' first appearances...
			if found[s], err = r.lookupShard(gctx, s, table, dim, sh.ids, sh.rows, out, chunk); err != nil {
				return err
			}
			// ... and the repeated ids copy theirs.
			fillRepeats(out, dim, positions, sh)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	total := 0
	for _, f := range found {
		total += f
	}
	return total, nil
}

// fillRepeats copies, for each position of sh that repeats an id, the row of the id's first
// appearance.
func fillRepeats(out []float32, dim int, positions []int32, sh *shard) {
	if len(sh.repeats) == 0 {
		return
	}
	switch dim {
	// Rows of a common size are copied as arrays: moves the compiler inlines, where copy calls
	// memmove for each row.
	case 8:
		fillRows[[8]float32](out, positions, sh)
	case 16:
		fillRows[[16]float32](out, positions, sh)
	case 32:
		fillRows[[32]float32](out, positions, sh)
	case 64:
		fillRows[[64]float32](out, positions, sh)
	default:
		for _, k := range sh.repeats {
			p, q := int(positions[k]), int(sh.rows[sh.idx[k]])
			copy(out[p*dim:p*dim+dim], out[q*dim:q*dim+dim])
		}
	}
}

func fillRows[R [8]float32 | [16]float32 | [32]float32 | [64]float32](out []float32, positions []int32, sh *shard) {
	var row R
	rows := unsafe.Slice((*R)(unsafe.Pointer(unsafe.SliceData(out))), len(out)*4/int(unsafe.Sizeof(row)))
	for _, k := range sh.repeats {
		rows[positions[k]] = rows[sh.rows[sh.idx[k]]]
	}
}

// lookupShard looks ids up on server s, in calls of at most chunk ids, writing the embedding of
// ids[u] to row rows[u] of out; it returns how many were found.
func (r *Router) lookupShard(ctx context.Context, s int, table string, dim int, ids []int64, rows []int32, out []float32, chunk int) (int, error) {
	if len(ids) <= chunk {
		return r.lookupCall(ctx, s, table, dim, ids, rows, out)
	}
	found := make([]int, (len(ids)+chunk-1)/chunk)
	g, gctx := errgroup.WithContext(ctx)
	for c := range found {
		lo, hi := c*chunk, min((c+1)*chunk, len(ids))
		g.Go(func() error {
			var err error
			found[c], err = r.lookupCall(gctx, s, table, dim, ids[lo:hi], rows[lo:hi], out)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	total := 0
	for _, f := range found {
		total += f
	}
	return total, nil
}

// lookupCall looks ids up on server s, writing the embedding of ids[u] to row rows[u] of out.
func (r *Router) lookupCall(ctx context.Context, s int, table string, dim int, ids []int64, rows []int32, out []float32) (int, error) {
	c := r.clients[s]
	n, err := c.lookupRows(ctx, table, dim, ids, rows, out)
	if err != nil {
		return 0, fmt.Errorf("ps %d (%s): lookup of %d ids in table %q: %w", s, c.addr, len(ids), table, err)
	}
	return n, nil
}

// ApplyGradients applies grads (dim per id) to the entries of ids: the gradients of a repeated id
// are summed first, in batch order (the reference's map_id_to_embedding_gradient_back_prop), and
// each distinct id is sent once to its server, all servers in parallel.
func (r *Router) ApplyGradients(ctx context.Context, table string, dim int, ids []int64, grads []float32, u Update) error {
	if dim <= 0 || len(grads) != len(ids)*dim {
		return errkind.New(errkind.Value, "ps router: apply to table %q: %d gradient floats for %d ids of dimension %d", table, len(grads), len(ids), dim)
	}
	sp := r.splitBatch(ids)
	defer sp.release()
	chunk := r.chunk(dim)
	g, gctx := errgroup.WithContext(ctx)
	for s := range r.clients {
		positions := sp.positions(s)
		if len(positions) == 0 {
			continue
		}
		g.Go(func() error {
			sh := &sp.shards[s]
			sh.dedup(ids, positions)
			// Each distinct id's first gradient, then the repeats' added in batch order.
			sums := make([]float32, len(sh.ids)*dim)
			for u, p := range sh.rows {
				copy(sums[u*dim:u*dim+dim], grads[int(p)*dim:int(p)*dim+dim])
			}
			for _, k := range sh.repeats {
				u, p := int(sh.idx[k]), int(positions[k])
				dst := sums[u*dim : u*dim+dim]
				for j, v := range grads[p*dim : p*dim+dim] {
					dst[j] += v
				}
			}
			cg, cctx := errgroup.WithContext(gctx)
			for lo := 0; lo < len(sh.ids); lo += chunk {
				hi := min(lo+chunk, len(sh.ids))
				cg.Go(func() error {
					if err := r.clients[s].ApplyGradients(cctx, table, dim, sh.ids[lo:hi], sums[lo*dim:hi*dim], u); err != nil {
						return fmt.Errorf("ps %d: %w", s, err)
					}
					return nil
				})
			}
			return cg.Wait()
		})
	}
	return g.Wait()
}

// each calls fn for every server in parallel and returns the first error.
func (r *Router) each(ctx context.Context, fn func(ctx context.Context, s int, c *Client) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for s, c := range r.clients {
		g.Go(func() error {
			cctx, cancel := c.callCtx(gctx)
			defer cancel()
			if err := fn(cctx, s, c); err != nil {
				return fmt.Errorf("ps %d (%s): %w", s, c.addr, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// CreateTables creates the tables on every server.
func (r *Router) CreateTables(ctx context.Context, tables []*pspb.TableConfig) error {
	return r.each(ctx, func(ctx context.Context, _ int, c *Client) error {
		_, err := c.rpc.CreateTables(ctx, &pspb.CreateTablesRequest{Tables: tables})
		return err
	})
}

// Save has every server dump its tables (all when none are named) to dir and returns the
// answers, by server.
func (r *Router) Save(ctx context.Context, dir string, tables ...string) ([]*pspb.SaveResponse, error) {
	out := make([]*pspb.SaveResponse, len(r.clients))
	err := r.each(ctx, func(ctx context.Context, s int, c *Client) error {
		var err error
		out[s], err = c.rpc.Save(ctx, &pspb.SaveRequest{Dir: dir, Tables: tables})
		return err
	})
	return out, err
}

// Restore has every server restore its tables (all when none are named) from the dump in dir,
// written by any number of servers, and returns the answers, by server.
func (r *Router) Restore(ctx context.Context, dir string, tables ...string) ([]*pspb.RestoreResponse, error) {
	out := make([]*pspb.RestoreResponse, len(r.clients))
	err := r.each(ctx, func(ctx context.Context, s int, c *Client) error {
		var err error
		out[s], err = c.rpc.Restore(ctx, &pspb.RestoreRequest{Dir: dir, Tables: tables})
		return err
	})
	return out, err
}

// Stats returns every server's stats, by server.
func (r *Router) Stats(ctx context.Context) ([]*pspb.StatsResponse, error) {
	out := make([]*pspb.StatsResponse, len(r.clients))
	err := r.each(ctx, func(ctx context.Context, s int, c *Client) error {
		var err error
		out[s], err = c.rpc.Stats(ctx, &pspb.StatsRequest{})
		return err
	})
	return out, err
}

// Health returns every server's health, by server, checking that server i says it is index i of
// NumPS.
func (r *Router) Health(ctx context.Context) ([]*pspb.HealthResponse, error) {
	out := make([]*pspb.HealthResponse, len(r.clients))
	err := r.each(ctx, func(ctx context.Context, s int, c *Client) error {
		resp, err := c.rpc.Health(ctx, &pspb.HealthRequest{})
		if err != nil {
			return err
		}
		if int(resp.GetIndex()) != s || int(resp.GetNumPs()) != len(r.clients) {
			return errkind.New(errkind.Precondition, "the server says it is ps %d of %d, the router has it as %d of %d",
				resp.GetIndex(), resp.GetNumPs(), s, len(r.clients))
		}
		out[s] = resp
		return nil
	})
	return out, err
}
