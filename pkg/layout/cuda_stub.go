//go:build !(cuda || cudacdeps || cudaemu) || !cgo

package layout

import "github.com/monolith-go/monolith/pkg/errkind"

// errNoCUDA is what the CUDA engine returns in binaries built without it.
var errNoCUDA = errkind.New(errkind.Runtime, "layout: built without the CUDA kernel (see native/README.md: build it with nvcc, then go build -tags cuda; -tags cudaemu emulates it on the CPU)")

// CUDAAvailable reports whether this binary contains the CUDA kernel.
const CUDAAvailable = false

func (p *Plan) forwardCUDA(*Input, [][]float32) error { return errNoCUDA }

func (p *Plan) backwardCUDA(*Input, [][]float32, [][]float32) error { return errNoCUDA }
