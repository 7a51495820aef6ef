package estimator

import (
	"context"
	"fmt"
	"sync"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// GlobalStepName is the tensor under which a checkpoint holds the global step (an int64 scalar),
// as TensorFlow's checkpoints hold the global_step variable.
const GlobalStepName = "global_step"

// Checkpointer is what the estimator needs of checkpoint storage: the model dir's checkpoints.
// ckptdir.Checkpointer keeps them in a model directory (pkg/runner/checkpoint: state files,
// retention, the dense format); MemoryCheckpointer keeps them in memory.
type Checkpointer interface {
	// Save writes the checkpoint of step holding tensors and makes it the latest; it returns the
	// checkpoint's path.
	Save(ctx context.Context, step int64, tensors []Tensor) (path string, err error)
	// Latest is the newest checkpoint of the model dir and its step; ok is false when there is
	// none (a first start), which is not an error.
	Latest(ctx context.Context) (path string, step int64, ok bool, err error)
	CheckpointReader
}

// CheckpointReader reads checkpoints.
type CheckpointReader interface {
	// Restore reads the tensors of the checkpoint at path. A missing or corrupt checkpoint is an
	// error naming it.
	Restore(ctx context.Context, path string) ([]Tensor, error)
}

// MemoryCheckpointer keeps checkpoints in memory, the newest MaxToKeep of them (0: all). It is
// safe for concurrent use.
type MemoryCheckpointer struct {
	MaxToKeep int

	mu    sync.Mutex
	saved []memoryCheckpoint
}

type memoryCheckpoint struct {
	path    string
	step    int64
	tensors []Tensor
}

var _ Checkpointer = (*MemoryCheckpointer)(nil)

// MemoryPath is the path MemoryCheckpointer gives the checkpoint of step.
func MemoryPath(step int64) string { return fmt.Sprintf("memory:model.ckpt-%d", step) }

// Save keeps a copy of tensors as the checkpoint of step, replacing one of the same step.
func (m *MemoryCheckpointer) Save(ctx context.Context, step int64, tensors []Tensor) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memory checkpoint: save step %d: %w", step, err)
	}
	c := memoryCheckpoint{path: MemoryPath(step), step: step, tensors: cloneTensors(tensors)}
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.saved[:0]
	for _, s := range m.saved {
		if s.path != c.path {
			kept = append(kept, s)
		}
	}
	m.saved = append(kept, c)
	if m.MaxToKeep > 0 && len(m.saved) > m.MaxToKeep {
		m.saved = append([]memoryCheckpoint(nil), m.saved[len(m.saved)-m.MaxToKeep:]...)
	}
	return c.path, nil
}

// Latest is the checkpoint saved last.
func (m *MemoryCheckpointer) Latest(context.Context) (string, int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.saved) == 0 {
		return "", 0, false, nil
	}
	c := m.saved[len(m.saved)-1]
	return c.path, c.step, true, nil
}

// Restore returns a copy of the tensors of the checkpoint at path; an unknown path is an error of
// kind NotFound.
func (m *MemoryCheckpointer) Restore(_ context.Context, path string) ([]Tensor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.saved {
		if c.path == path {
			return cloneTensors(c.tensors), nil
		}
	}
	return nil, errkind.New(errkind.NotFound, "memory checkpoint %s: no such checkpoint", path)
}

// Paths lists the kept checkpoints, oldest first.
func (m *MemoryCheckpointer) Paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(m.saved))
	for i, c := range m.saved {
		out[i] = c.path
	}
	return out
}

func cloneTensors(ts []Tensor) []Tensor {
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = t.clone()
	}
	return out
}

// splitGlobalStep separates the global step tensor from a checkpoint's tensors.
func splitGlobalStep(path string, ts []Tensor) (step int64, found bool, rest []Tensor, err error) {
	rest = make([]Tensor, 0, len(ts))
	for _, t := range ts {
		if t.Name != GlobalStepName {
			rest = append(rest, t)
			continue
		}
		if len(t.Int64) != 1 || t.Float32 != nil || t.Float64 != nil {
			return 0, false, nil, errkind.New(errkind.Value, "checkpoint %s: %s is not an int64 scalar", path, GlobalStepName)
		}
		step, found = t.Int64[0], true
	}
	return step, found, rest, nil
}
