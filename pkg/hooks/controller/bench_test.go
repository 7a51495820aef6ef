package controller

import (
	"context"
	"testing"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
)

// BenchmarkGetBlockStatus measures one GetBlockStatus round trip over loopback gRPC.
func BenchmarkGetBlockStatus(b *testing.B) {
	h, err := NewHook(Config{
		ModelDir: b.TempDir(), Host: "127.0.0.1", ListenAddr: "127.0.0.1:0",
		Barrier: mustBarrier(b, 64), Saver: &saver{}, GlobalStep: func(context.Context) (int64, error) { return 0, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := h.AfterCreateSession(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer h.End(context.Background(), nil, nil)
	c, err := DialModelDir(h.cfg.ModelDir)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.GetBlockStatus(ctx, &pb.GetBlockStatusRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}
