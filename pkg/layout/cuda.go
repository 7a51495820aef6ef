//go:build (cuda || cudacdeps || cudaemu) && cgo

package layout

// The CUDA engine: native/layout/layout.cu, linked from the library build_cuda.sh makes (tag cuda,
// cuda_link.go), or from //native/layout:layout_cuda through Bazel's cdeps (tag cudacdeps), or
// compiled as C++ with its kernels emulated on the CPU (tag cudaemu, cuda_emu.go), which checks the
// kernels' logic where there is no GPU.

/*
#include <stdlib.h>
#include "native/layout/layout.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// CUDAAvailable reports whether this binary contains the CUDA kernel.
const CUDAAvailable = true

// CUDADevices returns the number of CUDA devices, or why there is none to use (no device, no
// driver, a driver older than the runtime).
func CUDADevices() (int, error) {
	var n C.int32_t
	var e C.fel_error
	if rc := C.fel_cuda_devices(&n, &e); rc != C.FEL_OK {
		return 0, engineErr("CUDA", cudaErr(rc, &e))
	}
	return int(n), nil
}

// cudaErr is nativeErr with the CUDA runtime's words for a CUDA failure.
func cudaErr(rc C.int32_t, e *C.fel_error) error {
	err := nativeErr(rc, e)
	if ie, ok := err.(*InputError); ok && ie.Code == codeCUDA {
		buf := make([]byte, 256)
		C.fel_cuda_error_string(C.int32_t(ie.A), (*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)))
		ie.Detail = C.GoString((*C.char)(unsafe.Pointer(&buf[0])))
	}
	return err
}

func (p *Plan) forwardCUDA(in *Input, out [][]float32) error {
	c := p.newCCall(in)
	defer c.pin.Unpin()
	outs, outSizes := c.tensors(out)
	var e C.fel_error
	rc := C.fel_forward_cuda(&c.plan, &c.input, outs, outSizes, C.int32_t(len(out)), &e)
	return cudaErr(rc, &e)
}

func (p *Plan) backwardCUDA(in *Input, grads, embGrads [][]float32) error {
	c := p.newCCall(in)
	defer c.pin.Unpin()
	gs, gradSizes := c.tensors(grads)
	embs, _ := c.tensors(embGrads)
	var e C.fel_error
	rc := C.fel_backward_cuda(&c.plan, &c.input, gs, gradSizes, C.int32_t(len(grads)), embs, &e)
	return cudaErr(rc, &e)
}

// CUDAKernelTimes runs the forward CUDA kernel iters times on inputs already on the device and
// returns the mean time of one run, and of one device-to-device copy of copyBytes bytes (the
// device's copy limit, to compare with). Host-device transfers are not timed.
func (p *Plan) CUDAKernelTimes(in *Input, iters int, copyBytes int64) (kernel, copy time.Duration, err error) {
	if iters < 1 || iters > 1<<30 || copyBytes < 0 {
		return 0, 0, errkind.New(errkind.Value, "layout CUDA timing: iters %d (want 1 to 2^30), copy bytes %d (want >= 0)", iters, copyBytes)
	}
	if in == nil {
		return 0, 0, errkind.New(errkind.Value, "layout CUDA timing: nil input")
	}
	if ie := p.checkFront(in); ie != nil {
		return 0, 0, inputErr("CUDA timing", ie)
	}
	c := p.newCCall(in)
	defer c.pin.Unpin()
	sizes := make([]int64, len(p.outputs))
	for i, o := range p.outputs {
		sizes[i] = int64(in.BatchSize) * int64(o.RowSize)
	}
	var e C.fel_error
	var kernelMS, copyMS C.double
	rc := C.fel_forward_cuda_bench(&c.plan, &c.input, (*C.int64_t)(pinned(&c.pin, sizes)), C.int32_t(len(sizes)),
		C.int32_t(iters), C.int64_t(copyBytes), &kernelMS, &copyMS, &e)
	if err := cudaErr(rc, &e); err != nil {
		return 0, 0, engineErr("CUDA timing", err)
	}
	ms := func(v C.double) time.Duration { return time.Duration(float64(v) * float64(time.Millisecond)) }
	return ms(kernelMS), ms(copyMS), nil
}
