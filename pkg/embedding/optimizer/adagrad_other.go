//go:build !amd64

package optimizer

// Elsewhere than amd64 Adagrad's 8-value blocks run in Go (fma32).

func hasAVXFMA() bool { return false }

var useAVX = false

func adagradBlocksFast(w, norm, grad []float32, n int, lr, wd float32) bool { return false }
