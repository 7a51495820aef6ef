//go:build cgo

package layout

// The C++ kernel is compiled into this package: by `go build` through the symlink layout_cpu.cc
// (native/layout/layout_cpu.cc), and by Bazel from the //native/layout:layout_cpu cc_library
// (cdeps; gazelle excludes the symlinks).

/*
#cgo CFLAGS: -I${SRCDIR}/../..
#cgo CXXFLAGS: -I${SRCDIR}/../.. -std=c++17 -O3
#cgo LDFLAGS: -lpthread
#include "native/layout/layout.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// NativeAvailable reports whether this binary contains the native (C++) kernel: it needs cgo.
const NativeAvailable = true

// nativePlan is the plan in the C ABI's types.
type nativePlan struct {
	slices   []C.fel_slice
	maxEnd   []int32
	rowSizes []int64
}

func newNativePlan(p *Plan) nativePlan {
	np := nativePlan{
		slices:   make([]C.fel_slice, len(p.slices)),
		maxEnd:   make([]int32, len(p.maxEnd)),
		rowSizes: make([]int64, len(p.outputs)),
	}
	for i, s := range p.slices {
		np.slices[i] = C.fel_slice{
			feature:    C.int32_t(s.feature),
			start:      C.int32_t(s.start),
			dims:       C.int32_t(s.dims),
			pooling:    C.int32_t(s.pooling),
			max_seq:    C.int32_t(s.maxSeq),
			output:     C.int32_t(s.output),
			offset:     C.int64_t(s.offset),
			seq_stride: C.int64_t(s.seqStride),
			addn:       cbool(s.addn),
			addn_first: cbool(s.addnFirst),
		}
	}
	for i, e := range p.maxEnd {
		np.maxEnd[i] = int32(e)
	}
	for i, o := range p.outputs {
		np.rowSizes[i] = int64(o.RowSize)
	}
	return np
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// pinned returns a C pointer to the first element of s (nil when empty) and pins it: the C structs
// and pointer arrays below hold Go pointers, which cgo allows only for pinned memory.
func pinned[T any](pin *runtime.Pinner, s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	pin.Pin(p)
	return p
}

// tensors pins every tensor and returns the C arrays of their data pointers and of their sizes.
func (c *cCall) tensors(ts [][]float32) (**C.float, *C.int64_t) {
	ptrs := make([]*C.float, len(ts))
	sizes := make([]int64, len(ts))
	for i, t := range ts {
		ptrs[i] = (*C.float)(pinned(&c.pin, t))
		sizes[i] = int64(len(t))
	}
	return (**C.float)(pinned(&c.pin, ptrs)), (*C.int64_t)(pinned(&c.pin, sizes))
}

// cCall holds the C views of one call's plan and inputs; it lives until the call returns.
type cCall struct {
	pin   runtime.Pinner
	plan  C.fel_plan
	input C.fel_input
}

func (p *Plan) newCCall(in *Input) *cCall {
	c := &cCall{}
	pin := &c.pin
	np := &p.native
	c.plan = C.fel_plan{
		version:            C.int32_t(p.opts.Version),
		ps_num:             C.int32_t(p.opts.PSNum),
		num_features:       C.int32_t(len(p.features)),
		num_tables:         C.int32_t(len(p.tables)),
		table_features:     (*C.int32_t)(pinned(pin, p.tableFeatures)),
		table_feature_dims: (*C.int32_t)(pinned(pin, p.tableFeatureDims)),
		feature_max_end:    (*C.int32_t)(pinned(pin, np.maxEnd)),
		num_slices:         C.int32_t(len(np.slices)),
		slices:             (*C.fel_slice)(pinned(pin, np.slices)),
		num_outputs:        C.int32_t(len(np.rowSizes)),
		output_row_size:    (*C.int64_t)(pinned(pin, np.rowSizes)),
	}
	embs, embSizes := c.tensors(in.Embeddings)
	var dims []int64
	if p.opts.Version == 1 {
		dims = make([]int64, len(in.EmbeddingDims))
		for i, d := range in.EmbeddingDims {
			dims[i] = int64(d)
		}
	}
	splitPtrs := make([]*C.int64_t, len(in.FidListRowSplit))
	splitSizes := make([]int64, len(in.FidListRowSplit))
	for i, s := range in.FidListRowSplit {
		splitPtrs[i] = (*C.int64_t)(pinned(pin, s))
		splitSizes[i] = int64(len(s))
	}
	c.input = C.fel_input{
		num_embeddings:      C.int32_t(len(in.Embeddings)),
		embeddings:          embs,
		embedding_sizes:     embSizes,
		embedding_dims:      (*C.int64_t)(pinned(pin, dims)),
		num_row_splits:      C.int32_t(len(in.FidListRowSplit)),
		row_splits:          (**C.int64_t)(pinned(pin, splitPtrs)),
		row_split_sizes:     (*C.int64_t)(pinned(pin, splitSizes)),
		num_emb_row_lengths: C.int64_t(len(in.FidListEmbRowLength)),
		emb_row_lengths:     (*C.int32_t)(pinned(pin, in.FidListEmbRowLength)),
		fid_offset:          (*C.uint64_t)(pinned(pin, in.FidOffset)),
		num_fids:            C.int64_t(len(in.FidOffset)),
		feature_offset:      (*C.int32_t)(pinned(pin, in.FeatureOffset)),
		num_feature_rows:    C.int64_t(len(in.FeatureOffset)),
		nfl_offset:          (*C.uint32_t)(pinned(pin, in.NflOffset)),
		num_nfl:             C.int64_t(len(in.NflOffset)),
		batch_size:          C.int64_t(in.BatchSize),
	}
	return c
}

func nativeErr(rc C.int32_t, e *C.fel_error) error {
	if rc == C.FEL_OK {
		return nil
	}
	return &InputError{Code: Code(e.code), A: int64(e.a), B: int64(e.b), C: int64(e.c)}
}

func (p *Plan) forwardNative(in *Input, out [][]float32) error {
	c := p.newCCall(in)
	defer c.pin.Unpin()
	outs, outSizes := c.tensors(out)
	var e C.fel_error
	rc := C.fel_forward(&c.plan, &c.input, outs, outSizes, C.int32_t(len(out)), C.int32_t(p.threads()), &e)
	return nativeErr(rc, &e)
}

func (p *Plan) backwardNative(in *Input, grads, embGrads [][]float32) error {
	c := p.newCCall(in)
	defer c.pin.Unpin()
	gs, gradSizes := c.tensors(grads)
	embs, _ := c.tensors(embGrads)
	var e C.fel_error
	rc := C.fel_backward(&c.plan, &c.input, gs, gradSizes, C.int32_t(len(grads)), embs, C.int32_t(p.threads()), &e)
	return nativeErr(rc, &e)
}
