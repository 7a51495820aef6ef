//go:build !(cudaemu && !cuda && !cudacdeps && cgo)

package layout

// cudaEmulated reports whether the CUDA engine runs emulated on the CPU (tag cudaemu, cuda_emu.go).
const cudaEmulated = false
