package job

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/densesync"
	"github.com/monolith-go/monolith/pkg/trainer/trainstatus"
)

// Source is an input the job reads in passes: a worker's share of the training input, or the
// evaluation input. Its batches have the Config's Schema.
type Source interface {
	// Open opens the batches of one pass over the input, the first skip of them passed over (the
	// batches a restored global step trained on; a source that can seek may seek). The job opens
	// the training input once per run and the evaluation input at every evaluation.
	Open(ctx context.Context, skip int64) (estimator.Input[*batch.Batch], error)
	// Describe words the input for the log.
	Describe() string
}

// Sharded is a training input the workers of a job divide among themselves.
type Sharded interface {
	// Shard is worker index's share of the input, in a job of workers; an error says the input
	// cannot be divided so (Run returns it as a *ConfigError).
	Shard(index, workers int) (Source, error)
}

// InputError is an error reading the training or evaluation input: bad input, not a failure of
// the run (cmd/train: exit status 2).
type InputError struct {
	// What is "training input" or "evaluation input".
	What string
	Err  error
}

func (e *InputError) Error() string { return e.What + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// asInputError makes err of reading the input what an *InputError, unless the run was cancelled
// (its error is the cancellation's) or err is one already.
func asInputError(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil || errors.As(err, new(*InputError)) {
		return err
	}
	return &InputError{What: what, Err: err}
}

// Files is the Source of TFRecord files of Monolith Examples: one pass reads Paths Epochs times
// over, in batches of BatchSize (pkg/trainer/batch). Its shards are every workers-th file from
// the worker's index on.
type Files struct {
	// Name names the files in errors: the flag that listed them (--train_data).
	Name  string
	Paths []string
	// Epochs is how many times one pass reads Paths (at least once).
	Epochs    int
	BatchSize int
	Schema    batch.Schema
	Options   dataset.Options
}

// Open opens the files as batches and passes over the first skip.
func (f Files) Open(ctx context.Context, skip int64) (estimator.Input[*batch.Batch], error) {
	r, err := batch.Open(slices.Repeat(f.Paths, max(1, f.Epochs)), f.Options, f.Schema, f.BatchSize)
	if err != nil {
		return nil, err
	}
	for i := int64(0); i < skip; i++ {
		if _, err := r.Next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Describe says how many files, epochs and batches.
func (f Files) Describe() string {
	return fmt.Sprintf("%d files, %d epochs in batches of %d", len(f.Paths), max(1, f.Epochs), f.BatchSize)
}

// Shard is worker index's files: every workers-th file from its index on; a worker without a file
// is an error.
func (f Files) Shard(index, workers int) (Source, error) {
	s := f
	s.Paths = nil
	for i := index; i < len(f.Paths); i += workers {
		s.Paths = append(s.Paths, f.Paths[i])
	}
	if len(s.Paths) == 0 {
		return nil, fmt.Errorf("%s: %d files for %d workers: worker %d has none", cmp.Or(f.Name, "files"), len(f.Paths), workers, index)
	}
	return s, nil
}

// inputFn opens src for the estimator; every error reading it is an InputError. With skip, the
// first skip() batches are passed over (the batches the restored global step trained on). With
// st, the time the loop waits for batches is recorded; with sync, the job learns when the input
// is about to end (a worker of several stops the others with its last batch).
func inputFn(src Source, what string, skip func() int64, st *trainstatus.Status, sync *densesync.Sync) estimator.InputFn[*batch.Batch] {
	return func(ctx context.Context, _ estimator.Mode) (estimator.Input[*batch.Batch], error) {
		var n int64
		if skip != nil {
			n = skip()
		}
		in, err := src.Open(ctx, n)
		if err != nil {
			return nil, asInputError(ctx, what, err)
		}
		var input estimator.Input[*batch.Batch] = checkedInput{in: in, what: what}
		if st != nil {
			input = &timedInput{in: input, st: st}
		}
		if sync != nil {
			p := &peekInput{in: input}
			if err := p.prime(ctx); err != nil {
				p.Close()
				return nil, err
			}
			sync.SetInput(p)
			input = p
		}
		return input, nil
	}
}

// checkedInput marks the source's errors as input errors.
type checkedInput struct {
	in   estimator.Input[*batch.Batch]
	what string
}

func (c checkedInput) Next(ctx context.Context) (*batch.Batch, error) {
	b, err := c.in.Next(ctx)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, asInputError(ctx, c.what, err)
	}
	return b, err
}

func (c checkedInput) Close() error { return c.in.Close() }

// timedInput records how long each Next takes.
type timedInput struct {
	in estimator.Input[*batch.Batch]
	st *trainstatus.Status
}

func (t *timedInput) Next(ctx context.Context) (*batch.Batch, error) {
	start := time.Now()
	b, err := t.in.Next(ctx)
	t.st.ReadFor(time.Since(start))
	return b, err
}

func (t *timedInput) Close() error { return t.in.Close() }

// peekInput reads one batch ahead, so that the batch it returns is known to be the last one.
type peekInput struct {
	in      estimator.Input[*batch.Batch]
	next    *batch.Batch
	nextErr error
}

var _ densesync.InputEnd = (*peekInput)(nil)

// prime reads the first batch.
func (p *peekInput) prime(ctx context.Context) error {
	p.next, p.nextErr = p.in.Next(ctx)
	if p.nextErr != nil && !errors.Is(p.nextErr, io.EOF) {
		return p.nextErr
	}
	return nil
}

func (p *peekInput) Next(ctx context.Context) (*batch.Batch, error) {
	b, err := p.next, p.nextErr
	if err != nil {
		return nil, err
	}
	p.next, p.nextErr = p.in.Next(ctx)
	return b, nil
}

// Empty reports whether the input has no batch at all.
func (p *peekInput) Empty() bool { return p.next == nil && errors.Is(p.nextErr, io.EOF) }

// Ended reports whether the input has no batch after the one Next returned last.
func (p *peekInput) Ended() bool { return errors.Is(p.nextErr, io.EOF) }

func (p *peekInput) Close() error { return p.in.Close() }
