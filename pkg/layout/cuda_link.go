//go:build cuda && !cudacdeps && !cudaemu && cgo

package layout

// The CUDA kernel library made by native/layout/build_cuda.sh (see native/README.md).

// #cgo LDFLAGS: -L${SRCDIR}/../../native/layout/build -llayout_cuda -L/usr/local/cuda/lib64 -lcudart
import "C"
