package dnn

import (
	"fmt"
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
)

// The dense checkpoint's tensor names. Layer l's parameters are dnn/layer_<l>/kernel
// ([inputs, outputs]) and dnn/layer_<l>/bias ([outputs]), the last layer being the logit; the
// optimizer's slots follow TensorFlow's naming: <variable>/Adam and <variable>/Adam_1 (m and v)
// with the beta1_power and beta2_power scalars, or <variable>/Adagrad.
const (
	StepName       = "dnn/step"
	Beta1PowerName = "dnn/beta1_power"
	Beta2PowerName = "dnn/beta2_power"
)

func layerName(l int) string { return fmt.Sprintf("dnn/layer_%d", l) }

// variable is one checkpointed tensor of the model: where its float64 values live.
type variable struct {
	name   string
	shape  []int64
	values []float64 // nil for the step
}

func (m *Model) variables() []variable {
	var vars []variable
	for _, p := range m.params {
		vars = append(vars, variable{p.name, p.shape, p.value})
	}
	for k, suffix := range m.opt.slotSuffixes {
		for p, pa := range m.params {
			vars = append(vars, variable{pa.name + suffix, pa.shape, m.opt.slots[k][p]})
		}
	}
	if m.opt.kind == Adam {
		vars = append(vars,
			variable{Beta1PowerName, []int64{}, nil},
			variable{Beta2PowerName, []int64{}, nil})
	}
	return vars
}

// scalar returns the address of a scalar variable's value.
func (m *Model) scalar(name string) *float64 {
	switch name {
	case Beta1PowerName:
		return &m.opt.beta1Pow
	case Beta2PowerName:
		return &m.opt.beta2Pow
	}
	return nil
}

// Tensors returns the dense parameters, the optimizer's slots and the step count as float64 (and
// int64) tensors, the model's own precision, so a restored model continues exactly where it was
// saved. The embedding tables are not among them: the store saves those.
func (m *Model) Tensors() []estimator.Tensor {
	out := []estimator.Tensor{{Name: StepName, Shape: []int64{}, Int64: []int64{m.step}}}
	for _, v := range m.variables() {
		values := v.values
		if values == nil {
			values = []float64{*m.scalar(v.name)}
		}
		out = append(out, estimator.Tensor{Name: v.name, Shape: slices.Clone(v.shape), Float64: slices.Clone(values)})
	}
	return out
}

// Assign sets the dense parameters, the optimizer's slots and the step count from tensors; each
// must be there with the model's shape (float32 values are taken too, for a warm start from
// another model's checkpoint). Other tensors are ignored, as a TensorFlow restore ignores
// variables the graph lacks. Nothing changes unless every tensor fits.
func (m *Model) Assign(ts []estimator.Tensor) error {
	byName := make(map[string]estimator.Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	st, ok := byName[StepName]
	if !ok {
		return errkind.New(errkind.NotFound, "dnn: no tensor %s", StepName)
	}
	if len(st.Shape) != 0 || len(st.Int64) != 1 {
		return errkind.New(errkind.Value, "dnn: tensor %s has shape %v and %d int64 values, want a scalar", StepName, st.Shape, len(st.Int64))
	}
	vars := m.variables()
	vals := make([][]float64, len(vars))
	for i, v := range vars {
		t, ok := byName[v.name]
		if !ok {
			return errkind.New(errkind.NotFound, "dnn: no tensor %s", v.name)
		}
		n := 1
		for _, d := range v.shape {
			n *= int(d)
		}
		if !slices.Equal(t.Shape, v.shape) || len(t.Float32)+len(t.Float64) != n || (t.Float32 != nil && t.Float64 != nil) {
			return errkind.New(errkind.Value, "dnn: tensor %s has shape %v (%d float values), want %v", v.name, t.Shape, len(t.Float32)+len(t.Float64), v.shape)
		}
		vals[i] = slices.Clone(t.Float64)
		if t.Float64 == nil {
			vals[i] = make([]float64, n)
			for j, x := range t.Float32 {
				vals[i][j] = float64(x)
			}
		}
	}
	for i, v := range vars {
		if v.values == nil {
			*m.scalar(v.name) = vals[i][0]
			continue
		}
		copy(v.values, vals[i])
	}
	m.step = st.Int64[0]
	return nil
}
