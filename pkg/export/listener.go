package export

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/hookutil"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// Listener exports a trainer's checkpoints as they are saved (the reference's
// ExportSaverListener): a checkpoint saver listener (estimator.Config.SaverListeners) that exports
// every Every-th checkpoint of this run, and at the end of training the last one saved if it was
// not exported yet. It belongs to the process that saves the checkpoints (the chief). An export
// that fails fails the save, and so the training, as in the reference; a checkpoint exported
// before (a resumed run ending at its restored step) is skipped.
type Listener struct {
	hookutil.BaseListener

	o     Options
	every int

	mu       sync.Mutex
	saves    int
	saved    int64 // the step of the last save, -1 before the first
	exported int64 // the step of the last export, -1 before the first
	results  []*Result
}

var _ hookutil.SaverListener = (*Listener)(nil)

// NewListener returns a listener exporting the checkpoints of o.ModelDir with o (o.Checkpoint is
// set for each), every every-th save (at least 1).
func NewListener(o Options, every int) (*Listener, error) {
	if every < 1 {
		return nil, errkind.New(errkind.Value, "export listener: every %d checkpoints, want at least 1", every)
	}
	if o.Checkpoint != "" {
		return nil, errkind.New(errkind.Value, "export listener: a checkpoint (%q) is given; the listener exports those saved", o.Checkpoint)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Listener{o: o, every: every, saved: -1, exported: -1}, nil
}

// AfterSave exports the checkpoint of step when it is the every-th save.
func (l *Listener) AfterSave(ctx context.Context, step int64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.saves++
	l.saved = step
	if l.saves%l.every != 0 {
		return false, nil
	}
	return false, l.exportLocked(ctx, step)
}

// End exports the last checkpoint saved unless it was exported.
func (l *Listener) End(ctx context.Context, _ int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.saved < 0 || l.saved == l.exported {
		return nil
	}
	return l.exportLocked(ctx, l.saved)
}

func (l *Listener) exportLocked(ctx context.Context, step int64) error {
	o := l.o
	o.Checkpoint = checkpoint.DefaultBasename + "-" + strconv.FormatInt(step, 10)
	res, err := Export(ctx, o)
	if errors.Is(err, ErrVersionExists) {
		l.o.Log.Info("checkpoint already exported", "global_step", step, "err", err)
		l.exported = step
		return nil
	}
	if err != nil {
		return fmt.Errorf("export listener: global step %d: %w", step, err)
	}
	l.exported = step
	l.results = append(l.results, res)
	return nil
}

// Results are the exports done so far, oldest first.
func (l *Listener) Results() []*Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Result(nil), l.results...)
}
