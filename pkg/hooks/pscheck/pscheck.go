// Package pscheck is the reference's ps_check_hooks: while training runs, a background checker
// polls every parameter server's machine health; when one is unhealthy (out of memory) it reports
// the results once, places the barrier so that workers stop, and waits for the loop to stop.
//
// The reference builds MonolithMachineInfo / MonolithCheckMachineHealth ops on each PS device and
// runs them through the session; here each PS is asked through a Probe: RemoteProbe asks real
// parameter servers (pkg/ps) through their Health RPC, LocalProbe is the in-process equivalent of
// those ops (a MachineInfoStore and the process's resident memory).
package pscheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/ops"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// DefaultInterval is the time between two checks (the reference's wait_for_stop(timeout=30)).
const DefaultInterval = 30 * time.Second

// PSMachineInfoSharedName is the shared name of PS index's machine info (the reference's
// get_ps_machine_info_shared_name).
func PSMachineInfoSharedName(index int) string { return fmt.Sprintf("ps_machine_info_%d", index) }

// Probe returns PS index's serialized MachineHealthResult: empty when the PS is healthy.
type Probe func(ctx context.Context, index int) ([]byte, error)

// LocalProbe checks PS index in this process: the machine info named
// PSMachineInfoSharedName(index) in store (created with DefaultMemLimit when missing, as the
// reference's checker creates it) against the memory usage reported by usage (nil:
// ProcessMemoryUsage).
func LocalProbe(store *MachineInfoStore, usage func() (int64, error)) Probe {
	if usage == nil {
		usage = ProcessMemoryUsage
	}
	return func(_ context.Context, index int) ([]byte, error) {
		info := store.LookupOrCreate(PSMachineInfoSharedName(index), DefaultMemLimit)
		mem, err := usage()
		if err != nil {
			return nil, err
		}
		return CheckMachineHealth(info, mem)
	}
}

// Placer places the training barrier; *barrier.Barrier implements it.
type Placer interface {
	Place(ctx context.Context, action string) error
}

var _ Placer = (*barrier.Barrier)(nil)

// Config configures the checker (the reference's Config).
type Config struct {
	// Barrier is placed when a PS is unhealthy. Required.
	Barrier Placer
	// NumPS is the number of parameter servers, probed as indices 0..NumPS-1.
	NumPS int
	// Probe asks one PS for its health (the reference's ps_device_fn chose the device the check
	// op ran on). Required.
	Probe Probe
	// Report receives the unhealthy PS results by index; nil means DefaultReport.
	Report func(results map[int]*pb.MachineHealthResult)
	// Interval is the time between checks; 0 means DefaultInterval.
	Interval time.Duration
}

// FormatReport is the text DefaultReport logs: "PS are not healthy:" and one line per PS in index
// order, "PS <i>: <result in one-line text format>".
func FormatReport(results map[int]*pb.MachineHealthResult) string {
	lines := make([]string, 0, len(results))
	for _, i := range slices.Sorted(maps.Keys(results)) {
		lines = append(lines, fmt.Sprintf("PS %d: %s", i, oneLine(results[i])))
	}
	return "PS are not healthy:\n" + strings.Join(lines, "\n")
}

// DefaultReport logs FormatReport at error level (the reference's _default_report).
func DefaultReport(results map[int]*pb.MachineHealthResult) {
	slog.Error(FormatReport(results))
}

// oneLine is Python's text_format.MessageToString(m, as_one_line=True): the multi-line form with
// each line trimmed and the lines joined by single spaces (strings never hold a raw newline).
func oneLine(m proto.Message) string {
	var parts []string
	for _, l := range strings.Split(pytext.Format(m), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

// Hook runs the checker while the loop runs (the reference's PsHealthCheckerHook).
type Hook struct {
	runhook.Base
	cfg Config
}

var _ runhook.Hook = (*Hook)(nil)

// NewHook returns the checker's hook; the configuration is checked in Begin, where the reference
// builds its check ops.
func NewHook(cfg Config) *Hook { return &Hook{cfg: cfg} }

// Begin checks the configuration and fills in its defaults.
func (h *Hook) Begin(context.Context) error {
	switch {
	case h.cfg.Barrier == nil:
		return errkind.New(errkind.Value, "pscheck: a barrier is required")
	case h.cfg.Probe == nil:
		return errkind.New(errkind.Value, "pscheck: a probe is required")
	case h.cfg.NumPS < 0:
		return errkind.New(errkind.Value, "pscheck: num_ps %d is negative", h.cfg.NumPS)
	}
	if h.cfg.Report == nil {
		h.cfg.Report = DefaultReport
	}
	if h.cfg.Interval <= 0 {
		h.cfg.Interval = DefaultInterval
	}
	return nil
}

// AfterCreateSession starts the checker on the session's coordinator; it stops with the loop.
func (h *Hook) AfterCreateSession(_ context.Context, s *runhook.Session) error {
	cfg := h.cfg
	s.Coord.Go(func(ctx context.Context) error { return run(ctx, cfg) })
	return nil
}

// run checks right away, then every cfg.Interval, until ctx is done. After an unhealthy check it
// reports, places the barrier and only waits for ctx.
func run(ctx context.Context, cfg Config) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		results, err := check(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// The reference's checker thread dies on a failed check; keep checking instead.
			slog.Error("pscheck: health check failed", "err", err)
		} else if len(results) > 0 {
			cfg.Report(results)
			if err := cfg.Barrier.Place(ctx, ""); err != nil && !errors.Is(err, barrier.ErrAlreadyPlaced) {
				return fmt.Errorf("pscheck: place barrier after unhealthy PS: %w", err)
			}
			<-ctx.Done()
			return nil
		}
		t.Reset(cfg.Interval)
	}
}

// check probes every PS at once and returns the unhealthy results by index.
func check(ctx context.Context, cfg Config) (map[int]*pb.MachineHealthResult, error) {
	statuses := make([][]byte, cfg.NumPS)
	errs := make([]error, cfg.NumPS)
	var wg sync.WaitGroup
	for i := 0; i < cfg.NumPS; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], errs[i] = cfg.Probe(ctx, i)
		}()
	}
	wg.Wait()
	results := map[int]*pb.MachineHealthResult{}
	for i, st := range statuses {
		if errs[i] != nil {
			return nil, fmt.Errorf("pscheck: probe PS %d: %w", i, errs[i])
		}
		if len(st) == 0 {
			continue
		}
		res := &pb.MachineHealthResult{}
		if err := proto.Unmarshal(st, res); err != nil {
			return nil, errkind.Wrap(errkind.Value, fmt.Errorf("pscheck: PS %d health result: %w", i, err))
		}
		results[i] = res
	}
	return results, nil
}
