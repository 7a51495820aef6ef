//go:build (cuda || cudacdeps) && cgo

package layout

// cudaEmulated reports whether the CUDA engine runs emulated on the CPU (tag cudaemu).
const cudaEmulated = false
