package layout

import (
	"errors"
	"fmt"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Input holds the op's tensors (the reference's names in brackets). Which embedding fields are read
// depends on the version:
//
//	v1  Embeddings: one [rows, EmbeddingDims[i]] tensor per part; fid position = row
//	v2  Embeddings: one flat tensor per (table, ps), its features' rows concatenated, split by
//	    FidListRowSplit; part = (table, ps, feature); fid position = row
//	v3  Embeddings: one flat tensor per (table, ps) part; fid position = float offset
//	v4  Embeddings: a single tensor, the (ps, table) parts concatenated, FidListEmbRowLength floats
//	    each; fid position = float offset
//
// Tables and features are sorted by name; (table, ps) parts are numbered table * PSNum + ps.
type Input struct {
	// Embeddings [embeddings_list], row-major.
	Embeddings [][]float32
	// EmbeddingDims (v1) is the second dimension of each embedding.
	EmbeddingDims []int
	// FidListRowSplit [fid_list_row_split] (v2): per embedding, its features' prefix fid counts.
	FidListRowSplit [][]int64
	// FidListEmbRowLength [fid_list_emb_row_lenth] (v4): floats of each (ps, table) part.
	FidListEmbRowLength []int32
	// FidOffset [fid_offset]: part << 32 | position.
	FidOffset []uint64
	// FeatureOffset [feature_offset]: first fid of every feature row.
	FeatureOffset []int32
	// NflOffset [nfl_offset]: first feature row of every feature, | SharedBit when shared.
	NflOffset []uint32
	// BatchSize [batch_size].
	BatchSize int
}

// SharedBit marks a shared feature in NflOffset (SHARD_BIT in the reference test).
const SharedBit = 0x80000000

// Code says what is wrong with an input; the values are native/layout/layout.h's FEL_ERR_*.
type Code int32

// Input error codes. A, B and C of InputError carry what each comment names.
const (
	CodeVersion           Code = 1   // A: version
	CodeEmbeddingCount    Code = 2   // A: embeddings given, B: wanted
	CodeEmbeddingDims     Code = 3   // (v1) A: dims given, B: embeddings given
	CodeEmbeddingShape    Code = 4   // (v1) A: embedding, B: its size, C: its row width
	CodeRowSplitCount     Code = 5   // (v2) A: row splits given, B: wanted
	CodeRowSplitLength    Code = 6   // (v2) A: embedding, B: its row split length, C: wanted
	CodeRowSplitOrder     Code = 7   // (v2) A: embedding, B: position, C: value
	CodeRowSplitSize      Code = 8   // (v2) A: embedding, B: position, C: embedding size
	CodeEmbRowLengthCount Code = 9   // (v4) A: lengths given, B: wanted
	CodeEmbRowLengthValue Code = 10  // (v4) A: position, B: value
	CodeEmbRowLengthSum   Code = 11  // (v4) A: sum, B: embedding size
	CodeBatchSize         Code = 12  // A: batch size
	CodeOutputCount       Code = 13  // A: tensors given, B: wanted
	CodeOutputSize        Code = 14  // A: tensor, B: its size, C: wanted
	CodeNflLength         Code = 15  // A: nfl_offset length, B: features
	CodeNflOrder          Code = 16  // A: feature, B: its feature rows
	CodeFeatureRows       Code = 17  // A: feature, B: its feature rows, C: batch size
	CodeFeatureRange      Code = 18  // A: feature, B: its first feature row, C: feature rows
	CodeFidRange          Code = 19  // A: feature row, B: first fid, C: end fid
	CodeFidPart           Code = 20  // A: fid position, B: part, C: parts
	CodeFidWidth          Code = 21  // A: fid position, B: part, C: the part's row width
	CodeFidOffset         Code = 22  // A: fid position, B: position in the part, C: part size
	codeNativePlan        Code = 23  // internal: the native kernel rejected the plan
	codeNativeInput       Code = 24  // internal: a pointer was missing
	codeNativeResource    Code = 25  // out of memory in the native kernel
	codeCUDA              Code = 26  // A: cudaError_t, B: step
	CodeOutputBatch       Code = 100 // A: output, B: its fixed first dimension, C: batch size
	CodeGradCount         Code = 101 // A: gradient tensors given, B: embeddings
	CodeGradSize          Code = 102 // A: gradient tensor, B: its size, C: the embedding's size
	CodeBatchTooLarge     Code = 103 // A: batch size, B: output, C: its row size
)

// maxTensorFloats bounds a layout tensor (Go cannot allocate more than 2^48 bytes).
const maxTensorFloats = 1 << 46

// InputError is an inconsistent input, reported before any data is read. Every implementation
// reports the same InputError for the same input.
type InputError struct {
	Code    Code
	A, B, C int64
	// Detail is the CUDA runtime's name and description of error A (CUDA failures only).
	Detail string
}

// cudaSteps names the step of a CUDA failure (B; FEL_CUDA_STEP_* in native/layout/layout.h).
var cudaSteps = map[int64]string{
	1: "finding a CUDA device",
	2: "copying the plan and the offsets to the device",
	3: "copying the inputs to the device",
	4: "allocating the results on the device",
	5: "launching the kernel",
	6: "running the kernel",
	7: "copying the results back from the device",
	8: "timing on the device",
}

func (e *InputError) Error() string {
	a, b, c := e.A, e.B, e.C
	switch e.Code {
	case CodeVersion:
		return fmt.Sprintf("unsupported version %d", a)
	case CodeEmbeddingCount:
		return fmt.Sprintf("%d embedding tensors, want %d", a, b)
	case CodeEmbeddingDims:
		return fmt.Sprintf("%d embedding dims for %d embedding tensors", a, b)
	case CodeEmbeddingShape:
		return fmt.Sprintf("embedding %d: %d floats is not a whole number of rows of %d", a, b, c)
	case CodeRowSplitCount:
		return fmt.Sprintf("%d fid_list_row_split tensors, want %d", a, b)
	case CodeRowSplitLength:
		return fmt.Sprintf("fid_list_row_split %d has %d entries, want %d (features of its table + 1)", a, b, c)
	case CodeRowSplitOrder:
		return fmt.Sprintf("fid_list_row_split %d decreases at position %d (%d)", a, b, c)
	case CodeRowSplitSize:
		return fmt.Sprintf("fid_list_row_split %d position %d needs more than the embedding's %d floats", a, b, c)
	case CodeEmbRowLengthCount:
		return fmt.Sprintf("%d fid_list_emb_row_lenth entries, want %d (tables * ps_num)", a, b)
	case CodeEmbRowLengthValue:
		return fmt.Sprintf("fid_list_emb_row_lenth[%d] = %d is negative", a, b)
	case CodeEmbRowLengthSum:
		return fmt.Sprintf("fid_list_emb_row_lenth sums to %d, the embedding has %d floats", a, b)
	case CodeBatchSize:
		return fmt.Sprintf("negative batch size %d", a)
	case CodeOutputCount:
		return fmt.Sprintf("%d layout tensors, want %d", a, b)
	case CodeOutputSize:
		return fmt.Sprintf("layout tensor %d has %d floats, want %d", a, b, c)
	case CodeNflLength:
		return fmt.Sprintf("nfl_offset has %d entries for %d features", a, b)
	case CodeNflOrder:
		return fmt.Sprintf("feature %d: nfl_offset gives it %d feature rows", a, b)
	case CodeFeatureRows:
		return fmt.Sprintf("feature %d has %d feature rows, fewer than the batch size %d", a, b, c)
	case CodeFeatureRange:
		return fmt.Sprintf("feature %d starts at feature row %d, its rows run past the %d of feature_offset", a, b, c)
	case CodeFidRange:
		return fmt.Sprintf("feature row %d: fids [%d, %d) out of range", a, b, c)
	case CodeFidPart:
		return fmt.Sprintf("fid_offset[%d]: embedding part %d, there are %d", a, b, c)
	case CodeFidWidth:
		return fmt.Sprintf("fid_offset[%d]: embedding part %d rows have %d floats, fewer than the slices read", a, b, c)
	case CodeFidOffset:
		return fmt.Sprintf("fid_offset[%d]: position %d reads past the end of its embedding part (%d floats)", a, b, c)
	case codeNativePlan:
		return fmt.Sprintf("internal error: the native kernel rejected the plan (%d, %d, %d)", a, b, c)
	case codeNativeInput:
		return fmt.Sprintf("internal error: the native kernel is missing an input (%d, %d)", a, b)
	case codeNativeResource:
		return "the native kernel ran out of memory"
	case codeCUDA:
		msg := fmt.Sprintf("CUDA error %d", a)
		if e.Detail != "" {
			msg += " (" + e.Detail + ")"
		}
		if step, ok := cudaSteps[b]; ok {
			return msg + " while " + step
		}
		return fmt.Sprintf("%s at step %d", msg, b)
	case CodeOutputBatch:
		return fmt.Sprintf("layout tensor %d has a fixed batch dimension %d, the batch size is %d", a, b, c)
	case CodeGradCount:
		return fmt.Sprintf("%d embedding gradient tensors for %d embeddings", a, b)
	case CodeGradSize:
		return fmt.Sprintf("embedding gradient %d has %d floats, the embedding %d", a, b, c)
	case CodeBatchTooLarge:
		return fmt.Sprintf("batch size %d: layout tensor %d (%d floats per row) would be too large", a, b, c)
	}
	return fmt.Sprintf("input error %d (%d, %d, %d)", e.Code, a, b, c)
}

func inputErr(op string, e *InputError) error {
	return errkind.Wrap(errkind.Value, fmt.Errorf("layout %s: %w", op, e))
}

// asError turns a nil *InputError into a nil error.
func asError(e *InputError) error {
	if e == nil {
		return nil
	}
	return e
}

// engineErr gives an engine's error the op's context: input errors are errkind.Value, failures of
// the native machinery errkind.Runtime; the others (no cgo, no CUDA) keep their kind.
func engineErr(op string, err error) error {
	var ie *InputError
	if !errors.As(err, &ie) {
		return fmt.Errorf("layout %s: %w", op, err)
	}
	switch ie.Code {
	case codeNativePlan, codeNativeInput, codeNativeResource, codeCUDA:
		return errkind.Wrap(errkind.Runtime, fmt.Errorf("layout %s: %w", op, ie))
	}
	return inputErr(op, ie)
}

// AsInputError returns the InputError inside err, if any.
func AsInputError(err error) (*InputError, bool) {
	var ie *InputError
	ok := errors.As(err, &ie)
	return ie, ok
}

// Engine selects an implementation of the op.
type Engine int

// Engines.
const (
	// Native is the C++ CPU kernel (native/layout), through cgo.
	Native Engine = iota
	// Oracle is the plain Go reference implementation.
	Oracle
	// CUDA is the CUDA kernel; it exists only in binaries built with the cuda tag.
	CUDA
)

func (e Engine) String() string {
	switch e {
	case Native:
		return "native"
	case Oracle:
		return "oracle"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("Engine(%d)", int(e))
}

// Forward runs the op with the native kernel and returns the layout tensors, in Outputs order.
func (p *Plan) Forward(in *Input) ([][]float32, error) {
	return p.ForwardWith(Native, in, nil)
}

// Backward runs the gradient op with the native kernel: the gradients of the embeddings (shaped
// like in.Embeddings) from the gradients of the layout tensors (shaped like the outputs).
func (p *Plan) Backward(in *Input, grads [][]float32) ([][]float32, error) {
	return p.BackwardWith(Native, in, grads, nil)
}

// ForwardWith runs the op with engine e. When out is nil the tensors are allocated; otherwise out
// must hold one tensor of the right size per output, and every float of it is overwritten. After
// an error the contents of out are unspecified: the native kernel checks fids as it reads them
// and may have written rows before it finds a bad one.
func (p *Plan) ForwardWith(e Engine, in *Input, out [][]float32) ([][]float32, error) {
	if in == nil {
		return nil, errkind.New(errkind.Value, "layout forward: nil input")
	}
	if ie := p.checkFront(in); ie != nil {
		return nil, inputErr("forward", ie)
	}
	if out == nil && in.BatchSize >= 0 {
		out = make([][]float32, len(p.outputs))
		for i, o := range p.outputs {
			out[i] = make([]float32, in.BatchSize*o.RowSize)
		}
	}
	var err error
	switch e {
	case Native:
		err = p.forwardNative(in, out)
	case Oracle:
		err = asError(p.forwardOracle(in, out))
	case CUDA:
		err = p.forwardCUDA(in, out)
	default:
		return nil, errkind.New(errkind.Value, "layout forward: unknown engine %d", e)
	}
	if err != nil {
		return nil, engineErr("forward", err)
	}
	return out, nil
}

// BackwardWith runs the gradient op with engine e. When embGrads is nil the gradients are
// allocated; otherwise embGrads must hold one tensor per embedding, of its size, and every float of
// it is overwritten.
func (p *Plan) BackwardWith(e Engine, in *Input, grads, embGrads [][]float32) ([][]float32, error) {
	if in == nil {
		return nil, errkind.New(errkind.Value, "layout backward: nil input")
	}
	if ie := p.checkFront(in); ie != nil {
		return nil, inputErr("backward", ie)
	}
	if embGrads == nil {
		embGrads = make([][]float32, len(in.Embeddings))
		for i, emb := range in.Embeddings {
			embGrads[i] = make([]float32, len(emb))
		}
	} else {
		if len(embGrads) != len(in.Embeddings) {
			return nil, inputErr("backward", &InputError{Code: CodeGradCount, A: int64(len(embGrads)), B: int64(len(in.Embeddings))})
		}
		for i, g := range embGrads {
			if len(g) != len(in.Embeddings[i]) {
				return nil, inputErr("backward", &InputError{Code: CodeGradSize, A: int64(i), B: int64(len(g)), C: int64(len(in.Embeddings[i]))})
			}
		}
	}
	var err error
	switch e {
	case Native:
		err = p.backwardNative(in, grads, embGrads)
	case Oracle:
		err = asError(p.backwardOracle(in, grads, embGrads))
	case CUDA:
		err = p.backwardCUDA(in, grads, embGrads)
	default:
		return nil, errkind.New(errkind.Value, "layout backward: unknown engine %d", e)
	}
	if err != nil {
		return nil, engineErr("backward", err)
	}
	return embGrads, nil
}

// checkFront checks what the C ABI cannot express (the lengths of parallel Go slices) and the plan's
// fixed batch dimensions; every engine runs behind it.
func (p *Plan) checkFront(in *Input) *InputError {
	if p.opts.Version == 1 && len(in.EmbeddingDims) != len(in.Embeddings) {
		return &InputError{Code: CodeEmbeddingDims, A: int64(len(in.EmbeddingDims)), B: int64(len(in.Embeddings))}
	}
	for i, o := range p.outputs {
		if o.Shape[0] != -1 && o.Shape[0] != in.BatchSize {
			return &InputError{Code: CodeOutputBatch, A: int64(i), B: int64(o.Shape[0]), C: int64(in.BatchSize)}
		}
		if o.RowSize > 0 && in.BatchSize > maxTensorFloats/o.RowSize {
			return &InputError{Code: CodeBatchTooLarge, A: int64(in.BatchSize), B: int64(i), C: int64(o.RowSize)}
		}
	}
	return nil
}
