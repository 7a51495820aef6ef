package eventtime

import "sync/atomic"

// atomicMax is an int64 that only grows.
type atomicMax struct{ v atomic.Int64 }

func (a *atomicMax) max(v int64) {
	for {
		cur := a.v.Load()
		if v <= cur || a.v.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (a *atomicMax) load() int64 { return a.v.Load() }
