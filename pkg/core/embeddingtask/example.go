package embeddingtask

import (
	"fmt"
	"maps"

	"github.com/monolith-go/monolith/pkg/core/embeddinghostcall"
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Example is a parsed batch of examples (the dict tf.io.parse_example returns): sparse id
// features, ragged id features (sequence columns) and dense features, by name.
type Example struct {
	Sparse map[string]tensor.Sparse[int64]
	Ragged map[string]tensor.Ragged[int64]
	Dense  map[string]tensor.Tensor
}

// NewExample returns an example with empty maps.
func NewExample() *Example {
	return &Example{Sparse: map[string]tensor.Sparse[int64]{}, Ragged: map[string]tensor.Ragged[int64]{}, Dense: map[string]tensor.Tensor{}}
}

// Clone returns a copy whose maps (not tensors) are new.
func (e *Example) Clone() *Example {
	out := &Example{Sparse: maps.Clone(e.Sparse), Ragged: maps.Clone(e.Ragged), Dense: maps.Clone(e.Dense)}
	if out.Sparse == nil {
		out.Sparse = map[string]tensor.Sparse[int64]{}
	}
	if out.Ragged == nil {
		out.Ragged = map[string]tensor.Ragged[int64]{}
	}
	if out.Dense == nil {
		out.Dense = map[string]tensor.Tensor{}
	}
	return out
}

func (e *Example) delete(name string) {
	delete(e.Sparse, name)
	delete(e.Ragged, name)
	delete(e.Dense, name)
}

// PostProcessExample is _post_process_example. For every column of every slot, the ids under
// "<column>_0" are clamped at 0 and, when the slot's vocab size is fixed (vocab_size_per_slot or
// custom mapping), taken modulo it. A QR-hashed slot's raw ids are replaced by
// "<column>_<slice>_0" (id mod R) and "<column>_<slice>_1" (id div R) per slice. Otherwise a
// sequence column gets "<column>_0_row_lengths" (int32) and its ids cut to MaxSeqLength
// positions; the ids are reordered and every slice other than 0 gets the same ids under
// "<column>_<slice>". A dense "uid" gives "uid_bucket" = uid mod 1000 (int32). The example is
// changed only when every step succeeds.
func (t *Task) PostProcessExample(ex *Example) error {
	if !t.final {
		return errkind.New(errkind.Precondition, "post-process before the slots are set")
	}
	out := ex.Clone()
	for _, slot := range t.slots {
		for _, col := range slot.Columns {
			if err := t.postProcessColumn(out, slot.ID, col); err != nil {
				return fmt.Errorf("post-process %s: %w", col.Name, err)
			}
		}
	}
	if uid, ok := out.Dense[embeddinghostcall.UID]; ok {
		b, err := uidBuckets(uid)
		if err != nil {
			return err
		}
		out.Dense[embeddinghostcall.UIDBucket] = b
	} else if _, ok := out.Sparse[embeddinghostcall.UID]; ok {
		return errkind.New(errkind.Type, "post-process: uid must be a dense tensor")
	}
	*ex = *out
	return nil
}

// uidBuckets is tf.cast(tf.math.mod(uid, RatioN), tf.int32).
func uidBuckets(uid tensor.Tensor) (tensor.Tensor, error) {
	switch uid.DType() {
	case tensor.Int32, tensor.Int64:
	default:
		return nil, errkind.New(errkind.Type, "post-process: uid has dtype %s, want an integer", uid.DType())
	}
	u, _ := tensor.Cast[int64](uid)
	data := u.Data()
	b := make([]int32, len(data))
	for i, v := range data {
		b[i] = int32(pyint.FloorMod(int(v), embeddinghostcall.RatioN))
	}
	return tensor.New(b, uid.Shape())
}

func (t *Task) postProcessColumn(ex *Example, slotID int, col Column) error {
	key := col.Name + "_0"
	var raw tensor.Sparse[int64]
	var ragged tensor.Ragged[int64]
	if col.Sequence {
		r, ok := ex.Ragged[key]
		if !ok {
			return errkind.New(errkind.NotFound, "feature %q (a ragged sequence feature) is missing", key)
		}
		s, err := r.ToSparse()
		if err != nil {
			return err
		}
		ragged, raw = r, s
	} else {
		s, ok := ex.Sparse[key]
		if !ok {
			return errkind.New(errkind.NotFound, "feature %q (a sparse feature) is missing", key)
		}
		if err := s.Validate(); err != nil {
			return err
		}
		raw = s
	}
	ids := raw.MapValues(func(v int64) int64 { return max(v, 0) })
	vocab, mod := t.idVocabSize(slotID)
	if mod {
		if vocab == 0 {
			return errkind.New(errkind.Value, "vocab size of slot %d is 0 (integer division by zero)", slotID)
		}
		ids = ids.MapValues(func(v int64) int64 { return int64(pyint.FloorMod(int(v), vocab)) })
	}
	hashed, rVocab, _, err := t.qr(vocab)
	if err != nil {
		return err
	}
	if hashed {
		if rVocab == 0 {
			return errkind.New(errkind.Value, "remainder vocab size of slot %d is 0", slotID)
		}
		ex.delete(key)
		for _, s := range col.Slices {
			ex.Sparse[fmt.Sprintf("%s_%d_0", col.Name, s.Index)] = raw.MapValues(func(v int64) int64 { return int64(pyint.FloorMod(int(v), rVocab)) })
			ex.Sparse[fmt.Sprintf("%s_%d_1", col.Name, s.Index)] = raw.MapValues(func(v int64) int64 { return int64(pyint.FloorDiv(int(v), rVocab)) })
		}
		return nil
	}
	if col.Sequence {
		lengths := ragged.RowLengths()
		l32 := make([]int32, len(lengths))
		for i, l := range lengths {
			l32[i] = int32(l)
		}
		ex.Dense[col.Name+"_0_row_lengths"] = tensor.Vector(l32...)
		if col.MaxSeqLength < 0 {
			return errkind.New(errkind.Value, "negative max_seq_length %d", col.MaxSeqLength)
		}
		if ids, err = ids.Slice([]int64{0, 0}, []int64{ids.DenseShape[0], int64(col.MaxSeqLength)}); err != nil {
			return err
		}
	}
	ex.delete(key)
	ex.Sparse[key] = ids.Reorder()
	for _, s := range col.Slices {
		if s.Index != 0 {
			alias := fmt.Sprintf("%s_%d", col.Name, s.Index)
			ex.delete(alias)
			ex.Sparse[alias] = ex.Sparse[key]
		}
	}
	return nil
}
