package job

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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
	// Open opens the batches of one pass over the input, from position at on (where a restored
	// global step left it; a source that can seek may seek). The job opens the training input
	// once per run and the evaluation input at every evaluation.
	Open(ctx context.Context, at Position) (estimator.Input[*batch.Batch], error)
	// Describe words the input for the log.
	Describe() string
}

// Position is where a run's input starts: after what the restored checkpoint trained on.
type Position struct {
	// Batches is the restored global step: the batches trained on.
	Batches int64
	// Examples is the number of examples they held, as the checkpoint recorded it (the chief's
	// own input); -1 when the checkpoint does not say (a worker other than the chief, or a
	// checkpoint of an earlier version): then each batch counts as a full one.
	Examples int64
	// Source is a stream source's position (batch.Batch.Position of the last batch trained on),
	// as the checkpoint recorded it; nil when it recorded none.
	Source []byte
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

// Files is the Source of TFRecord files of Examples: one pass reads Paths Epochs times over, in
// batches of BatchSize that run on across epochs (pkg/trainer/batch's Stream), each record
// decoded as Inputs say. Its shards are every workers-th file from the worker's index on.
type Files struct {
	// Name names the files in errors: the flag that listed them (--train_data).
	Name  string
	Paths []string
	// Epochs is how many times one pass reads Paths (at least once).
	Epochs    int
	BatchSize int
	// Inputs say how to decode the records; without them, Schema's Monolith Examples are read
	// (batch.SchemaInputs).
	Inputs  *batch.Inputs
	Schema  batch.Schema
	Options dataset.Options
	// ShuffleBuffer and Seed shuffle each epoch (batch.StreamConfig).
	ShuffleBuffer int
	Seed          uint64
}

// inputs are the decoder's inputs.
func (f Files) inputs() batch.Inputs {
	if f.Inputs != nil {
		return *f.Inputs
	}
	return batch.SchemaInputs(f.Schema)
}

// Open opens the files as a stream of batches from position at: at.Examples examples in, or
// at.Batches full batches when the number of examples is not known.
func (f Files) Open(ctx context.Context, at Position) (estimator.Input[*batch.Batch], error) {
	skip := at.Examples
	if skip < 0 {
		skip = at.Batches * int64(f.BatchSize)
	}
	in := f.inputs()
	return batch.OpenStream(batch.StreamConfig{Files: f.Paths, Options: f.Options, NewDecoder: func() (*batch.Decoder, error) { return batch.NewDecoder(in) },
		Epochs: max(1, f.Epochs), BatchSize: f.BatchSize, ShuffleBuffer: f.ShuffleBuffer, Seed: f.Seed, Skip: skip})
}

// Check reads the first records of the files before anything is trained or written: the first
// of every file (a file that cannot be read, or is compressed otherwise than Options say) and the
// first most of all; none at all is an error, and so is a feature those records never have (a
// misspelled name; with a did-you-mean from suggest).
func (f Files) Check(ctx context.Context, most int, suggest func(string, []string) string) error {
	in := f.inputs()
	in.Suggest = suggest
	dec, err := batch.NewDecoder(in)
	if err != nil {
		return err
	}
	b := &batch.Batch{}
	for i, path := range f.Paths {
		r, err := dataset.OpenFiles([]string{path}, f.Options)
		if err != nil {
			return err
		}
		n := 1
		if int(dec.Records()) < most {
			n = most - int(dec.Records())
		}
		for range n {
			rec, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				return err
			}
			if err := dec.Append(b, rec.Data); err != nil {
				r.Close()
				return &batch.RecordError{File: rec.File, Offset: rec.Offset, Err: err}
			}
			if b.Size() >= 1024 {
				b = &batch.Batch{}
			}
		}
		r.Close()
		if i == len(f.Paths)-1 && dec.Records() == 0 {
			return fmt.Errorf("no records in %s", wordFiles(f.Paths))
		}
	}
	if missing := dec.Missing(suggest); len(missing) > 0 {
		return fmt.Errorf("no record of the first %d has the feature %s (%s)", dec.Records(), strings.Join(missing, ", "), wordFiles(f.Paths))
	}
	return nil
}

// wordFiles names files for a message.
func wordFiles(paths []string) string {
	if len(paths) == 1 {
		return paths[0]
	}
	return fmt.Sprintf("the %d files %s, ...", len(paths), paths[0])
}

// EpochCount is the number of epochs of a pass (for the line that says what ended the run).
func (f Files) EpochCount() int { return max(1, f.Epochs) }

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

// inputFn opens src for the estimator; every error reading it is an InputError. With tr, the
// input starts where the restored checkpoint left it (tr.start) and tr counts what the loop takes
// (the examples trained on, the epochs ended). With st, the time the loop waits for batches is
// recorded; with sync, the job learns when the input is about to end (a worker of several stops
// the others with its last batch), or when stop is closed (a signalled worker stops the others
// with its next step: see peekInput.Ended).
func inputFn(src Source, what string, tr *tracker, st *trainstatus.Status, sync *densesync.Sync, stop <-chan struct{}) estimator.InputFn[*batch.Batch] {
	return func(ctx context.Context, _ estimator.Mode) (estimator.Input[*batch.Batch], error) {
		at := Position{Examples: -1}
		if tr != nil {
			at = tr.start()
		}
		in, err := src.Open(ctx, at)
		if err != nil {
			return nil, asInputError(ctx, what, err)
		}
		var input estimator.Input[*batch.Batch] = checkedInput{in: in, what: what}
		if st != nil {
			input = &timedInput{in: input, st: st}
		}
		if sync != nil {
			p := &peekInput{in: input, stop: stop, tr: tr}
			if err := p.prime(ctx); err != nil {
				p.Close()
				return nil, err
			}
			sync.SetInput(p)
			input = p
		}
		if tr != nil {
			input = &trackedInput{in: input, tr: tr}
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
	if err == nil {
		// The wait that finds the input's end (a stream's timeout) is no step's.
		t.st.ReadFor(time.Since(start))
	}
	return b, err
}

func (t *timedInput) Close() error { return t.in.Close() }

// peekInput reads one batch ahead, so that the batch it returns is known to be the last one.
type peekInput struct {
	in      estimator.Input[*batch.Batch]
	next    *batch.Batch
	nextErr error
	// stop, closed, makes the batch returned last the last one (Config.Stop); tr, when set,
	// records why the input ends.
	stop <-chan struct{}
	tr   *tracker
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

// Ended reports whether the input has no batch after the one Next returned last, or is to end
// with it: Config.Stop is closed. The synchronization asks it in the step's allreduce, whose
// flag stops every worker after that step: a signalled worker's orderly stop is the job's, at the
// same step on all (the chief's final checkpoint is of it), instead of leaving the others waiting
// for a step it never starts.
func (p *peekInput) Ended() bool {
	switch {
	case isStopped(p.stop):
		if p.tr != nil {
			p.tr.stop()
		}
		return true
	case errors.Is(p.nextErr, io.EOF):
		if p.tr != nil {
			p.tr.end()
		}
		return true
	}
	return false
}

func (p *peekInput) Close() error { return p.in.Close() }
