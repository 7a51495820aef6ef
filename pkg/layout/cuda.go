//go:build (cuda || cudacdeps || cudaemu) && cgo

package layout

// The CUDA engine: native/layout/layout.cu, linked from the library build_cuda.sh makes (tag cuda,
// cuda_link.go), or from //native/layout:layout_cuda through Bazel's cdeps (tag cudacdeps), or
// compiled as C++ with its kernels emulated on the CPU (tag cudaemu, cuda_emu.go), which checks the
// kernels' logic where there is no GPU.

/*
#include "native/layout/layout.h"
*/
import "C"

// CUDAAvailable reports whether this binary contains the CUDA kernel.
const CUDAAvailable = true

func (p *Plan) forwardCUDA(in *Input, out [][]float32) error {
	c := p.newCCall(in)
	defer c.pin.Unpin()
	outPtrs, outSizes := floatPtrs(&c.pin, out)
	var e C.fel_error
	rc := C.fel_forward_cuda(&c.plan, &c.input, (**C.float)(pinned(&c.pin, outPtrs)),
		(*C.int64_t)(pinned(&c.pin, outSizes)), C.int32_t(len(out)), &e)
	return nativeErr(rc, &e)
}

func (p *Plan) backwardCUDA(in *Input, grads, embGrads [][]float32) error {
	c := p.newCCall(in)
	defer c.pin.Unpin()
	gradPtrs, gradSizes := floatPtrs(&c.pin, grads)
	embPtrs, _ := floatPtrs(&c.pin, embGrads)
	var e C.fel_error
	rc := C.fel_backward_cuda(&c.plan, &c.input, (**C.float)(pinned(&c.pin, gradPtrs)),
		(*C.int64_t)(pinned(&c.pin, gradSizes)), C.int32_t(len(grads)),
		(**C.float)(pinned(&c.pin, embPtrs)), &e)
	return nativeErr(rc, &e)
}
