package embeddingtask

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Slice is one embedding of a feature column (feature.py's FeatureSlice). The initializer,
// optimizer and learning-rate function are TF objects in the reference; here they are opaque
// descriptions carried into the TableConfig unchanged.
type Slice struct {
	Index          int
	Dim            int
	Initializer    string
	Optimizer      string
	LearningRateFn string
}

// Column is a feature column: FeatureColumnV1, or FeatureColumn3D (a sequence feature of at most
// MaxSeqLength ids per example) when Sequence is set. Slices are the slices the column looks up,
// in lookup order (with merge_vector, the merged slices).
type Column struct {
	Name         string
	Sequence     bool
	MaxSeqLength int
	Slices       []Slice
}

// Slot is a feature slot and its columns; a slot without columns is ignored.
type Slot struct {
	ID      int
	Columns []Column
}

// Task is a BaseEmbeddingTask's state: its params, the vocab sizes, the model's slots and the
// feature/table configs built from them.
type Task struct {
	p        Params
	vocab    map[int]int
	slots    []Slot
	final    bool
	features map[string]FeatureConfig
	tables   map[string]TableConfig
	log      *slog.Logger
}

// New builds a task: the vocab sizes come from CreateVocabDict (which may download the file).
// The task keeps its own copy of p, with the downloaded path when there was one.
func New(ctx context.Context, p Params, dl Downloader, log *slog.Logger) (*Task, error) {
	if log == nil {
		log = slog.Default()
	}
	if p.VocabSizePerSlot != nil {
		log.Info(fmt.Sprintf("Set fixed vocab_size: %d for all the slots.", *p.VocabSizePerSlot))
	}
	if p.CustomVocabSizeMapping != nil {
		log.Info(fmt.Sprintf("Set fixed vocab size for some slots: %v", p.CustomVocabSizeMapping))
	}
	vocab, err := CreateVocabDict(ctx, &p, dl, log)
	if err != nil {
		return nil, fmt.Errorf("embedding task: %w", err)
	}
	return NewWithVocab(p, vocab, log), nil
}

// NewWithVocab builds a task from vocab sizes already known.
func NewWithVocab(p Params, vocab map[int]int, log *slog.Logger) *Task {
	if log == nil {
		log = slog.Default()
	}
	return &Task{p: p.Clone(), vocab: maps.Clone(vocab), features: map[string]FeatureConfig{}, tables: map[string]TableConfig{}, log: log}
}

// Params returns a copy of the task's params.
func (t *Task) Params() Params { return t.p.Clone() }

// VocabSizes returns a copy of the vocab size per slot.
func (t *Task) VocabSizes() map[int]int { return maps.Clone(t.vocab) }

// SetSlots registers the model's slots and finalizes them (init_slot_to_env: what logits_fn
// declares, then Env.finalize). Slot ids must be unique; it can run once.
func (t *Task) SetSlots(slots []Slot) error {
	if t.final {
		return errkind.New(errkind.Precondition, "Env can't be finalized more than once")
	}
	seen := map[int]bool{}
	for _, s := range slots {
		if seen[s.ID] {
			return errkind.New(errkind.Precondition, "Feature slot with id: %d can not be created more than once.", s.ID)
		}
		seen[s.ID] = true
	}
	t.slots = slices.Clone(slots)
	t.final = true
	return nil
}

// Slots returns the registered slots.
func (t *Task) Slots() []Slot { return slices.Clone(t.slots) }

// idVocabSize is the vocab size the post-processing uses for a slot: vocab_size_per_slot, else
// the custom mapping, else the file's size (10 for a slot the file lacks).
func (t *Task) idVocabSize(slot int) (size int, mod bool) {
	if t.p.VocabSizePerSlot != nil {
		return *t.p.VocabSizePerSlot, true
	}
	if c, ok := t.p.CustomVocabSizeMapping[slot]; ok {
		return c, true
	}
	if v, ok := t.vocab[slot]; ok {
		return v, false
	}
	return 10, false
}

// qr says whether a slot of this vocab size is QR-hashed, and its remainder and quotient vocab
// sizes.
func (t *Task) qr(vocab int) (hashed bool, rVocab, qVocab int, err error) {
	if !t.p.QRMultiHashing || vocab <= t.p.QRHashingThreshold {
		return false, 0, 0, nil
	}
	if t.p.QRCollisionRate == 0 {
		return false, 0, 0, errkind.New(errkind.Value, "qr_collision_rate is 0 (integer division or modulo by zero)")
	}
	return true, pyint.FloorDiv(vocab, t.p.QRCollisionRate) + 1, t.p.QRCollisionRate + 1, nil
}
