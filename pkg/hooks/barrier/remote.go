package barrier

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Defaults of a Remote barrier's timing.
const (
	// DefaultCallTimeout bounds each Barrier RPC, besides the time the server holds a WAIT.
	DefaultCallTimeout = 10 * time.Second
	// DefaultPollInterval is the longest a WAIT call waits before the worker asks again (so a
	// server that went away is noticed within it plus the call timeout).
	DefaultPollInterval = 5 * time.Second
)

// RemoteConfig configures a Remote barrier.
type RemoteConfig struct {
	// Client reaches the parameter server holding the barrier (by convention PS 0, where the
	// reference kept its barrier variables). Required.
	Client pspb.ParameterServerClient
	// Name names the barrier on the server; processes using the same name share it. Required.
	Name string
	// Capacity is the number of slots: the chief and the workers. The first process to use the
	// name fixes it; another capacity is an error.
	Capacity int
	// Callbacks run in this process, as Barrier's do: after a Place, and when this process's
	// worker reaches the barrier.
	Callbacks []Callback
	// CallTimeout bounds each RPC (0: DefaultCallTimeout); PollInterval is how long the server
	// holds a WAIT before the worker asks again (0: DefaultPollInterval).
	CallTimeout, PollInterval time.Duration
}

// Remote is a barrier a parameter server holds (its Barrier RPC), shared by the processes of a
// job: the chief places and removes it, workers in other processes wait at it. It is safe for
// concurrent use.
type Remote struct {
	cfg RemoteConfig
}

// NewRemote returns the barrier cfg names. Nothing is sent until it is used.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	switch {
	case cfg.Client == nil:
		return nil, errkind.New(errkind.Value, "remote barrier: a client is required")
	case cfg.Name == "":
		return nil, errkind.New(errkind.Value, "remote barrier: a name is required")
	case cfg.Capacity < 1:
		return nil, errkind.New(errkind.Value, "barrier: capacity %d must be at least 1", cfg.Capacity)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return &Remote{cfg: cfg}, nil
}

// Capacity is the number of slots.
func (r *Remote) Capacity() int { return r.cfg.Capacity }

// call sends one Barrier request; wait is how long the server may hold it.
func (r *Remote) call(ctx context.Context, op pspb.BarrierRequest_Op, index int, action string, wait time.Duration) (*pspb.BarrierResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout+wait)
	defer cancel()
	resp, err := r.cfg.Client.Barrier(ctx, &pspb.BarrierRequest{
		Op: op, Name: r.cfg.Name, Worker: int32(index), Count: int32(r.cfg.Capacity),
		Action: action, WaitMs: wait.Milliseconds(),
	})
	if err != nil {
		if status.Code(err) == codes.AlreadyExists && op == pspb.BarrierRequest_PLACE {
			return nil, ErrAlreadyPlaced
		}
		return nil, fmt.Errorf("barrier %q: %s: %w", r.cfg.Name, op, err)
	}
	return resp, nil
}

// Place places the barrier with an action, then runs the callbacks here. ErrAlreadyPlaced when it
// is placed already.
func (r *Remote) Place(ctx context.Context, action string) error {
	if _, err := r.call(ctx, pspb.BarrierRequest_PLACE, 0, action, 0); err != nil {
		return err
	}
	return runCallbacks(ctx, r.cfg.Callbacks, action)
}

// RemoveContext removes the barrier.
func (r *Remote) RemoveContext(ctx context.Context) error {
	_, err := r.call(ctx, pspb.BarrierRequest_REMOVE, 0, "", 0)
	return err
}

// Status reads the barrier's state from the server.
func (r *Remote) Status(ctx context.Context) (Status, error) {
	resp, err := r.call(ctx, pspb.BarrierRequest_STATUS, 0, "", 0)
	if err != nil {
		return Status{}, err
	}
	return statusOf(resp), nil
}

func statusOf(resp *pspb.BarrierResponse) Status {
	st := Status{Placed: resp.GetPlaced(), Action: resp.GetAction(), Capacity: int(resp.GetCapacity()), Blocked: []int{}}
	for _, i := range resp.GetBlocked() {
		st.Blocked = append(st.Blocked, int(i))
	}
	return st
}

// WaitUntilRemoved runs the callbacks with the barrier's action, then waits until the barrier is
// removed, its slot set on the server while it waits (the server holds each call up to the poll
// interval, then the worker asks again), logging every 60 s that it still waits. An index outside
// [1, capacity) is an error of kind Value, as Barrier's.
func (r *Remote) WaitUntilRemoved(ctx context.Context, index int) error {
	if index <= 0 || index >= r.cfg.Capacity {
		return errkind.New(errkind.Value, "Index [%d] must be non-negative and less than capacity [%d]. ", index, r.cfg.Capacity)
	}
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	if err := runCallbacks(ctx, r.cfg.Callbacks, st.Action); err != nil {
		return err
	}
	lastLog := time.Now()
	for placed := st.Placed; placed; {
		resp, err := r.call(ctx, pspb.BarrierRequest_WAIT, index, "", r.cfg.PollInterval)
		if err != nil {
			if cerr := ctxDone(ctx); cerr != nil {
				return fmt.Errorf("barrier: worker %d waiting for the barrier's removal: %w", index, cerr)
			}
			return err
		}
		placed = resp.GetPlaced()
		if placed && time.Since(lastLog) >= waitLogInterval {
			slog.Info(fmt.Sprintf("The worker %d waits until barrier removed.", index))
			lastLog = time.Now()
		}
	}
	return nil
}

// The calls of Barrier's API without a context (for users written for the in-process barrier,
// like the controller's service): each is bounded by the call timeout; a failure is logged and
// reads as the barrier's safe state (not placed, nothing blocked).

// Remove removes the barrier (RemoveContext, bounded by the call timeout; a failure is logged).
func (r *Remote) Remove() {
	if err := r.RemoveContext(context.Background()); err != nil {
		slog.Error("remote barrier: remove failed", "barrier", r.cfg.Name, "err", err)
	}
}

func (r *Remote) status() Status {
	st, err := r.Status(context.Background())
	if err != nil {
		slog.Error("remote barrier: status failed", "barrier", r.cfg.Name, "err", err)
		return Status{Blocked: []int{}, Capacity: r.cfg.Capacity}
	}
	return st
}

// IsPlaced reports whether the barrier is placed (false when the server cannot be asked).
func (r *Remote) IsPlaced() bool { return r.status().Placed }

// BlockedIndices are the set slots, ascending (none when the server cannot be asked).
func (r *Remote) BlockedIndices() []int { return r.status().Blocked }

// UnblockedIndices are the clear slots, ascending.
func (r *Remote) UnblockedIndices() []int {
	blocked := map[int]bool{}
	for _, i := range r.BlockedIndices() {
		blocked[i] = true
	}
	out := []int{}
	for i := 0; i < r.cfg.Capacity; i++ {
		if !blocked[i] {
			out = append(out, i)
		}
	}
	return out
}

// ctxDone is ctx's error, or DeadlineExceeded once its deadline has passed (a call bounded by the
// same deadline may report it a moment before ctx does).
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
