//go:build cudaemu && !cuda && !cudacdeps && cgo

package layout

// layout_cuda_emu.cc (a symlink to native/layout/layout.cu) is compiled as C++ with the CUDA
// runtime emulated on the CPU.

// #cgo CXXFLAGS: -DFEL_CUDA_EMULATION
import "C"

// cudaEmulated reports whether the CUDA engine runs emulated on the CPU (tag cudaemu).
const cudaEmulated = true
