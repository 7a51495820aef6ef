package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// tracker follows the training input: where it started (the restored checkpoint's position),
// the examples the loop has taken since, and the epoch the last batch ended. The loop's goroutine
// updates it; the checkpointer and the hooks read it between steps.
type tracker struct {
	mu sync.Mutex
	// resume: the input starts where the restored checkpoint's was; else from its beginning.
	resume bool
	// restored is the restored checkpoint's global step and examples (-1: unknown).
	restoredStep, restoredExamples int64
	examples                       int64 // taken since the start
	batches                        int64
	lastEndsEpoch                  int  // of the last batch taken (0: it ended none)
	lastEpoch                      int  // the epoch of the last batch taken's last example
	ended                          bool // the input ran out
	signalled                      bool // Config.Stop ended the training
	// restoredSource and lastSource are a stream source's positions: the restored checkpoint's,
	// and after the last batch taken.
	restoredSource, lastSource []byte
}

func newTracker() *tracker { return &tracker{restoredExamples: -1} }

// start is the input's starting position.
func (t *tracker) start() Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.resume {
		return Position{}
	}
	return Position{Batches: t.restoredStep, Examples: t.restoredExamples, Source: t.restoredSource}
}

// restored records the position of the checkpoint restored at step.
func (t *tracker) restored(step, examples int64, source []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.restoredStep, t.restoredExamples, t.restoredSource = step, examples, source
}

// source is the stream source's position after the last batch taken (the restored one before
// any).
func (t *tracker) source() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastSource != nil {
		return t.lastSource
	}
	return t.restoredSource
}

// took records a batch the loop took (nil and io.EOF: the input ended).
func (t *tracker) took(b *batch.Batch, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case errors.Is(err, io.EOF):
		t.ended = true
	case err == nil:
		t.examples += int64(b.Size())
		t.batches++
		t.lastEndsEpoch, t.lastEpoch = b.EndsEpoch, b.Epoch
		if b.Position != nil {
			t.lastSource = b.Position
		}
	}
}

// position is the examples of the input trained on: the restored position's and the loop's.
// Unknown (-1) when the restored position was.
func (t *tracker) position() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	base := t.restoredExamples
	if !t.resume {
		base = 0
	}
	if base < 0 {
		if t.restoredStep > 0 {
			return -1
		}
		base = 0
	}
	return base + t.examples
}

// endedEpoch is the epoch the last batch taken ended, 0 when none.
func (t *tracker) endedEpoch() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastEndsEpoch
}

// end records that the input ends with the batch taken last (the job stops after its step).
func (t *tracker) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
}

// stop records that Config.Stop ended the training.
func (t *tracker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.signalled = true
}

// stopped reports whether Config.Stop ended the training.
func (t *tracker) stopped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.signalled
}

// inputEnded reports whether the input ran out.
func (t *tracker) inputEnded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// epoch is the epoch (from 1) of the last example taken; 0 when the source does not say.
func (t *tracker) epoch() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastEpoch
}

// trackedInput reports every batch it passes on to its tracker.
type trackedInput struct {
	in estimator.Input[*batch.Batch]
	tr *tracker
}

func (t *trackedInput) Next(ctx context.Context) (*batch.Batch, error) {
	b, err := t.in.Next(ctx)
	t.tr.took(b, err)
	return b, err
}

func (t *trackedInput) Close() error { return t.in.Close() }

// positionSuffix names the file beside a checkpoint (<prefix>.input.json) that records where its
// input was: retention deletes it with the checkpoint's other <prefix>.* files.
const positionSuffix = ".input.json"

// savedPosition is the file's content.
type savedPosition struct {
	// Examples is the number of examples of the chief's input the checkpoint trained on.
	Examples int64 `json:"examples"`
	// Source is a stream source's position (its partitions' next offsets).
	Source json.RawMessage `json:"source,omitempty"`
}

// positionCheckpointer saves the tracker's position beside every checkpoint, before the
// checkpoint itself (whose state file, written last, makes it the latest), and gives the
// tracker a restored checkpoint's.
type positionCheckpointer struct {
	estimator.Checkpointer
	tr *tracker
	// own: the checkpoints are this worker's (the chief's), whose input position they record;
	// another worker's position is not in them.
	own bool
	// prefix is the prefix of the checkpoint of step.
	prefix func(step int64) string
	// commit, when set, records a saved checkpoint's stream position with the source (the
	// Kafka consumer group's offsets, for monitoring); a failure is logged to log.
	commit func(ctx context.Context, position []byte) error
	log    *slog.Logger
}

func (c *positionCheckpointer) Save(ctx context.Context, step int64, tensors []estimator.Tensor) (string, error) {
	var source []byte
	if n := c.tr.position(); n >= 0 && c.own {
		source = c.tr.source()
		data, err := json.Marshal(savedPosition{Examples: n, Source: source})
		if err != nil {
			return "", err
		}
		if err := checkpoint.WriteFileAtomic(c.prefix(step)+positionSuffix, append(data, '\n')); err != nil {
			return "", fmt.Errorf("save the input position of step %d: %w", step, err)
		}
	}
	path, err := c.Checkpointer.Save(ctx, step, tensors)
	if err == nil && source != nil && c.commit != nil {
		// Only once the checkpoint holds it: a committed offset is never ahead of what a restore
		// brings back.
		if cerr := c.commit(ctx, source); cerr != nil {
			c.log.Warn("the checkpoint's stream position was not committed to the source (the checkpoint holds it)", "step", step, "err", cerr)
		}
	}
	return path, err
}

func (c *positionCheckpointer) Restore(ctx context.Context, path string) ([]estimator.Tensor, error) {
	ts, err := c.Checkpointer.Restore(ctx, path)
	if err != nil {
		return nil, err
	}
	step := stepOfTensors(ts)
	examples := int64(-1)
	var source []byte
	data, err := os.ReadFile(path + positionSuffix)
	switch {
	case !c.own:
	case errors.Is(err, fs.ErrNotExist):
		// A checkpoint of an earlier version: each batch counts as full.
	case err != nil:
		return nil, fmt.Errorf("the input position of checkpoint %s: %w", path, err)
	default:
		var p savedPosition
		if err := json.Unmarshal(data, &p); err != nil || p.Examples < 0 {
			return nil, fmt.Errorf("the input position of checkpoint %s (%s): not {\"examples\": N}", path, path+positionSuffix)
		}
		examples, source = p.Examples, p.Source
	}
	c.tr.restored(step, examples, source)
	return ts, nil
}

// checkpointPrefix is the prefix of the checkpoint of step in modelDir (ckptdir's saver's).
func checkpointPrefix(modelDir string) func(step int64) string {
	return func(step int64) string {
		return filepath.Join(modelDir, checkpoint.DefaultBasename) + "-" + strconv.FormatInt(step, 10)
	}
}

// stepOfTensors is the global step a checkpoint's tensors hold (0 when none).
func stepOfTensors(ts []estimator.Tensor) int64 {
	for _, t := range ts {
		if t.Name == estimator.GlobalStepName && len(t.Int64) == 1 {
			return t.Int64[0]
		}
	}
	return 0
}
