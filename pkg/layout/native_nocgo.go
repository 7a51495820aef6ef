//go:build !cgo

package layout

import "github.com/monolith-go/monolith/pkg/errkind"

// Without cgo there is no native kernel; the Oracle engine still works.

// NativeAvailable reports whether this binary contains the native (C++) kernel: it needs cgo.
const NativeAvailable = false

type nativePlan struct{}

func newNativePlan(*Plan) nativePlan { return nativePlan{} }

var errNoCgo = errkind.New(errkind.Runtime, "layout: built without cgo: the native kernel is unavailable (use the Oracle engine)")

func (p *Plan) forwardNative(*Input, [][]float32) error { return errNoCgo }

func (p *Plan) backwardNative(*Input, [][]float32, [][]float32) error { return errNoCgo }
