package pscheck

import (
	"context"
	"testing"
)

// BenchmarkCheck measures one check round over 16 in-process PS, one of them out of memory.
func BenchmarkCheck(b *testing.B) {
	store := NewMachineInfoStore()
	store.LookupOrCreate(PSMachineInfoSharedName(3), 1)
	cfg := Config{NumPS: 16, Probe: LocalProbe(store, func() (int64, error) { return 1 << 30, nil })}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := check(ctx, cfg)
		if err != nil || len(res) != 1 {
			b.Fatalf("check = %v, %v", res, err)
		}
	}
}
