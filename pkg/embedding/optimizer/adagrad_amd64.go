package optimizer

// adagradAVX runs the reference's AVX kernel on n values (n a multiple of 8); adagrad_amd64.s.
//
//go:noescape
func adagradAVX(w, norm, grad *float32, n int, lr, wd float32)

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// hasAVXFMA reports whether the CPU and the OS support 256-bit AVX with FMA: CPUID.1:ECX has FMA
// (bit 12), OSXSAVE (27) and AVX (28), and XCR0 enables the SSE and AVX register state.
func hasAVXFMA() bool {
	_, _, ecx, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if ecx&(fma|osxsave|avx) != fma|osxsave|avx {
		return false
	}
	xcr0, _ := xgetbv()
	return xcr0&6 == 6
}

// useAVX says whether Adagrad's 8-value blocks run on the assembly kernel; tests turn it off to
// check the portable path.
var useAVX = hasAVXFMA()

// adagradBlocksFast updates the first n values (a multiple of 8) with the assembly kernel when the
// CPU has it, and reports whether it did.
func adagradBlocksFast(w, norm, grad []float32, n int, lr, wd float32) bool {
	if !useAVX || n == 0 {
		return false
	}
	adagradAVX(&w[0], &norm[0], &grad[0], n, lr, wd)
	return true
}
