package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// inputError is an error reading the training or evaluation data: bad input, exit status 2.
type inputError struct {
	what string // "training input", "evaluation input"
	err  error
}

func (e *inputError) Error() string { return e.what + ": " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// inputFn opens files as batches of size; every error reading them is an inputError. With skip,
// the first skip() batches are passed over (the batches the restored global step trained on).
// With st, the time the loop waits for batches is recorded; with w, its job learns when the input
// is about to end (a worker of several stops the others with its last batch).
func inputFn(files []string, in data, size int, what string, skip func() int64, st *status, w *worker) estimator.InputFn[*batch.Batch] {
	return func(ctx context.Context, _ estimator.Mode) (estimator.Input[*batch.Batch], error) {
		r, err := batch.Open(files, in.opts, in.schema, size)
		if err != nil {
			return nil, &inputError{what: what, err: err}
		}
		var input estimator.Input[*batch.Batch] = checkedInput{r: r, what: what}
		if skip != nil {
			n := skip()
			for i := int64(0); i < n; i++ {
				if _, err := input.Next(ctx); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					input.Close()
					return nil, err
				}
			}
		}
		if st != nil {
			input = &timedInput{in: input, st: st}
		}
		if w != nil && w.sync != nil {
			p := &peekInput{in: input}
			if err := p.prime(ctx); err != nil {
				p.Close()
				return nil, err
			}
			w.sync.input = p
			input = p
		}
		return input, nil
	}
}

// checkedInput marks the reader's errors as input errors.
type checkedInput struct {
	r    *batch.Reader
	what string
}

func (c checkedInput) Next(ctx context.Context) (*batch.Batch, error) {
	b, err := c.r.Next(ctx)
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return nil, &inputError{what: c.what, err: err}
	}
	return b, err
}

func (c checkedInput) Close() error { return c.r.Close() }

// timedInput records how long each Next takes.
type timedInput struct {
	in estimator.Input[*batch.Batch]
	st *status
}

func (t *timedInput) Next(ctx context.Context) (*batch.Batch, error) {
	start := time.Now()
	b, err := t.in.Next(ctx)
	t.st.readFor(time.Since(start))
	return b, err
}

func (t *timedInput) Close() error { return t.in.Close() }

// peekInput reads one batch ahead, so that the batch it returns is known to be the last one.
type peekInput struct {
	in      estimator.Input[*batch.Batch]
	next    *batch.Batch
	nextErr error
}

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

// empty reports whether the input has no batch at all.
func (p *peekInput) empty() bool { return p.next == nil && errors.Is(p.nextErr, io.EOF) }

// ended reports whether the input has no batch after the one Next returned last.
func (p *peekInput) ended() bool { return errors.Is(p.nextErr, io.EOF) }

func (p *peekInput) Close() error { return p.in.Close() }
