// Package hostcall is monolith/core/base_host_call.py: the tensors a TPU model hands to its host
// call, recorded under unique names, compressed into one (1, n) tensor per dtype for the
// transfer, and split back on the host.
//
// A HostCall holds the values one TPU core computed in one step. On a TPU the host call receives
// every core's compressed tensors concatenated along axis 0; ConcatCores does that here.
package hostcall

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// GlobalStepName is the name of the first recorded tensor.
const GlobalStepName = "global_step"

// HostCall collects named rank-0/rank-1 tensors (BaseHostCall).
type HostCall struct {
	outputDir string
	enabled   bool
	names     []string
	tensors   []tensor.Tensor
	// sizes[i] lists the lengths of the tensors concatenated into compressed tensor i.
	sizes      [][]int
	compressed bool
	log        *slog.Logger
}

// New starts a host call whose first tensor is the global step as a (1,) int64 tensor, as the
// reference reshapes tf.train.get_global_step() to [-1]. A nil logger means slog.Default().
func New(outputDir string, enabled bool, globalStep int64, log *slog.Logger) *HostCall {
	if log == nil {
		log = slog.Default()
	}
	return &HostCall{
		outputDir: outputDir,
		enabled:   enabled,
		names:     []string{GlobalStepName},
		tensors:   []tensor.Tensor{tensor.Vector(globalStep)},
		log:       log,
	}
}

// OutputDir is the directory the host call's summaries go under.
func (h *HostCall) OutputDir() string { return h.outputDir }

// Enabled says whether RecordSummaryTensor records anything.
func (h *HostCall) Enabled() bool { return h.enabled }

// Names returns the tensor names, in the order of Tensors.
func (h *HostCall) Names() []string { return slices.Clone(h.names) }

// Tensors returns the recorded tensors (after CompressTensors, the compressed ones).
func (h *HostCall) Tensors() []tensor.Tensor { return slices.Clone(h.tensors) }

// TensorSizes returns, per compressed tensor, the lengths of the tensors it concatenates.
func (h *HostCall) TensorSizes() [][]int {
	out := make([][]int, len(h.sizes))
	for i, s := range h.sizes {
		out[i] = slices.Clone(s)
	}
	return out
}

// Compressed says whether CompressTensors has run.
func (h *HostCall) Compressed() bool { return h.compressed }

// RecordSummaryTensor appends a rank-0 or rank-1 tensor under a new name, flattened to rank 1
// (scalars become (1,)). It does nothing when the host call is disabled.
func (h *HostCall) RecordSummaryTensor(name string, t tensor.Tensor) error {
	if !h.enabled {
		return nil
	}
	if h.compressed {
		return errkind.New(errkind.Precondition, "host call: record %q after the tensors were compressed", name)
	}
	if t == nil {
		return errkind.New(errkind.Value, "host call: record %q: nil tensor", name)
	}
	if slices.Contains(h.names, name) {
		h.log.Info(fmt.Sprintf("%s | %v", name, h.names))
		return errkind.New(errkind.Precondition, "host call: summary tensor name %q is already recorded", name)
	}
	if t.Rank() > 1 {
		return errkind.New(errkind.Precondition, "Now we only support tensor with shape (k, ) or ()but we met tensor with shape: %s", tensor.ShapeString(t.Shape()))
	}
	flat, err := tensor.Reshape(t, -1)
	if err != nil {
		return fmt.Errorf("host call: record %q: %w", name, err)
	}
	h.names = append(h.names, name)
	h.tensors = append(h.tensors, flat)
	return nil
}

// CompressTensors groups the tensors by dtype (groups in the order their dtype first appears, so
// the global step's int64 group comes first), concatenates each group into a (1, k0+k1+...)
// tensor and records the lengths for DecompressTensors. Names are reordered to match.
func (h *HostCall) CompressTensors() error {
	if h.compressed {
		return errkind.New(errkind.Precondition, "host call: tensors are already compressed")
	}
	if len(h.names) != len(h.tensors) {
		return errkind.New(errkind.Precondition, "tensor_names and tensors must have same length,tensor_names length: %d, tensors length: %d", len(h.names), len(h.tensors))
	}
	var order []tensor.DType
	names := map[tensor.DType][]string{}
	groups := map[tensor.DType][]tensor.Tensor{}
	for i, t := range h.tensors {
		d := t.DType()
		if _, ok := groups[d]; !ok {
			order = append(order, d)
		}
		names[d] = append(names[d], h.names[i])
		groups[d] = append(groups[d], t)
	}
	var outNames []string
	var outTensors []tensor.Tensor
	var sizes [][]int
	for _, d := range order {
		outNames = append(outNames, names[d]...)
		lens := make([]int, len(groups[d]))
		for i, t := range groups[d] {
			lens[i] = t.Size()
		}
		cat, err := tensor.Concat(groups[d], 0)
		if err != nil {
			return fmt.Errorf("host call: compress %s tensors: %w", d, err)
		}
		batched, err := tensor.ExpandDims(cat, 0)
		if err != nil {
			return fmt.Errorf("host call: compress %s tensors: %w", d, err)
		}
		sizes = append(sizes, lens)
		outTensors = append(outTensors, batched)
		h.log.Info(fmt.Sprintf("Host call compressed tensors, data type: %s, compressed tensor shape: %s", d, tensor.ShapeString(batched.Shape())))
	}
	h.names, h.tensors, h.sizes, h.compressed = outNames, outTensors, sizes, true
	return nil
}

// DecompressTensors splits the host call's arguments, one (num_cores, k0+k1+...) tensor per
// dtype group, back into the recorded tensors, each squeezed as tf.squeeze does: (num_cores, k)
// loses its size-1 dimensions. It returns core 0's global step and the tensors in Names order.
func (h *HostCall) DecompressTensors(compressed []tensor.Tensor) (int64, []tensor.Tensor, error) {
	if !h.compressed {
		return 0, nil, errkind.New(errkind.Precondition, "host call: decompress before CompressTensors")
	}
	if len(compressed) > len(h.sizes) {
		return 0, nil, errkind.New(errkind.Value, "host call: %d compressed tensors, %d were compressed", len(compressed), len(h.sizes))
	}
	var out []tensor.Tensor
	for i, c := range compressed {
		if c == nil || c.Rank() != 2 {
			shape := "None"
			if c != nil {
				shape = tensor.ShapeString(c.Shape())
			}
			return 0, nil, errkind.New(errkind.Precondition, "Compressed tensors shape must be (n, m), met shape: %s", shape)
		}
		h.log.Info(fmt.Sprintf("Decompressed tensors shape: %s, dtype: %s.", tensor.ShapeString(c.Shape()), c.DType()))
		parts, err := tensor.Split(c, h.sizes[i], 1)
		if err != nil {
			return 0, nil, fmt.Errorf("host call: decompress tensor %d: %w", i, err)
		}
		for _, p := range parts {
			sq, err := tensor.Squeeze(p)
			if err != nil {
				return 0, nil, fmt.Errorf("host call: decompress tensor %d: %w", i, err)
			}
			out = append(out, sq)
		}
	}
	if len(h.names) == 0 || h.names[0] != GlobalStepName {
		first := ""
		if len(h.names) > 0 {
			first = h.names[0]
		}
		return 0, nil, errkind.New(errkind.Precondition, "The first tensor name must be global_step, met value: %s", first)
	}
	if len(out) == 0 {
		return 0, nil, errkind.New(errkind.Value, "host call: no compressed tensors to take the global step from")
	}
	gs, err := tensor.As[int64](out[0])
	if err != nil {
		return 0, nil, fmt.Errorf("host call: global step: %w", err)
	}
	data := gs.Data()
	if len(data) == 0 {
		return 0, nil, errkind.New(errkind.Value, "host call: empty global step tensor")
	}
	return data[0], out, nil
}

// ConcatCores is what the TPU runtime does with a host call's arguments: every core's i-th
// compressed tensor, (1, m_i), stacked into (num_cores, m_i). All cores must send the same layout.
func ConcatCores(perCore [][]tensor.Tensor) ([]tensor.Tensor, error) {
	if len(perCore) == 0 {
		return nil, errkind.New(errkind.Value, "host call: no cores")
	}
	out := make([]tensor.Tensor, len(perCore[0]))
	for i := range out {
		col := make([]tensor.Tensor, len(perCore))
		for c, ts := range perCore {
			if len(ts) != len(perCore[0]) {
				return nil, errkind.New(errkind.Value, "host call: core %d sent %d tensors, core 0 sent %d", c, len(ts), len(perCore[0]))
			}
			col[c] = ts[i]
		}
		cat, err := tensor.Concat(col, 0)
		if err != nil {
			return nil, fmt.Errorf("host call: concat tensor %d across cores: %w", i, err)
		}
		out[i] = cat
	}
	return out, nil
}
