package eventtime

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := From(ctx); got != 0 {
		t.Errorf("From(empty) = %d, want 0", got)
	}
	if got := From(With(ctx, time.Time{})); got != 0 {
		t.Errorf("From(With(zero)) = %d, want 0", got)
	}
	at := time.UnixMilli(1_700_000_000_123)
	if got := From(With(ctx, at)); got != 1_700_000_000_123 {
		t.Errorf("From(With(%v)) = %d", at, got)
	}
}

func TestMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals []string
		want int64
	}{
		{"none", nil, 0},
		{"one", []string{"1700000000123"}, 1_700_000_000_123},
		{"last wins", []string{"5", "7"}, 7},
		{"not a number", []string{"soon"}, 0},
		{"negative", []string{"-3"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := metadata.MD{}
			for _, v := range tc.vals {
				md.Append(MetadataKey, v)
			}
			if got := Incoming(metadata.NewIncomingContext(context.Background(), md)); got != tc.want {
				t.Errorf("Incoming = %d, want %d", got, tc.want)
			}
		})
	}
	out, _ := metadata.FromOutgoingContext(Outgoing(context.Background(), 42))
	if got := out.Get(MetadataKey); len(got) != 1 || got[0] != "42" {
		t.Errorf("Outgoing(42) metadata %v", got)
	}
	if _, ok := metadata.FromOutgoingContext(Outgoing(context.Background(), 0)); ok {
		t.Error("Outgoing(0) added metadata")
	}
}

func TestNewestOnlyGrows(t *testing.T) {
	var n Newest
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int64(1); k <= 1000; k++ {
				n.Observe(k*8 + int64(i))
			}
		}()
	}
	wg.Wait()
	n.Observe(5)
	n.Observe(-1)
	if got := n.Load(); got != 8007 {
		t.Errorf("Load = %d, want 8007", got)
	}
}
