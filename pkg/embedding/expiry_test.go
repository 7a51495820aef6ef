package embedding

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

const day = 24 * 60 * 60

// expiryTable has a default expire time of 10 days, 1 day for slot 2 and 0 (never kept past a
// save) for slot 3.
func expiryTable(t *testing.T) *Table {
	cfg := &hashtablepb.SlotExpireTimeConfig{
		DefaultExpireTime: proto.Uint32(10),
		SlotExpireTimes: []*hashtablepb.SlotExpireTimeConfig_SlotExpireTime{
			{Slot: proto.Uint32(2), ExpireTime: proto.Uint32(1)},
			{Slot: proto.Uint32(3), ExpireTime: proto.Uint32(0)},
		},
	}
	return newTable(t, Config{Dim: 2, Optimizer: testAdagrad{dim: 2, init: 0.1}, Initializer: constInit(0), ExpireTime: cfg, Stripes: 4})
}

func TestEvict(t *testing.T) {
	const now = 1_700_000_000
	tests := []struct {
		name    string
		id      int64
		age     int64
		evicted bool
	}{
		{name: "default slot, 9 days", id: fidV2(1, 1), age: 9 * day, evicted: false},
		{name: "default slot, exactly 10 days", id: fidV2(1, 2), age: 10 * day, evicted: true},
		{name: "slot 2, just under a day", id: fidV2(2, 1), age: day - 1, evicted: false},
		{name: "slot 2, a day", id: fidV2(2, 2), age: day, evicted: true},
		{name: "slot 3, updated now", id: fidV2(3, 1), age: 0, evicted: true},
		{name: "negative id of the default slot, 20 days", id: -fidV2(1, 3), age: 20 * day, evicted: true},
	}
	tb := expiryTable(t)
	for _, tc := range tests {
		if err := tb.Apply([]int64{tc.id}, []float32{1, 1}, lr(0.1), 0, now-tc.age); err != nil {
			t.Fatal(err)
		}
	}
	if tb.MaxUpdateTsSec() != now {
		t.Fatalf("max update time %d, want %d", tb.MaxUpdateTsSec(), now)
	}
	// Saving leaves out what Evict would remove, as the reference's save does.
	base := filepath.Join(t.TempDir(), "t")
	if err := tb.Save(context.Background(), base, 2); err != nil {
		t.Fatal(err)
	}
	restored := expiryTable(t)
	if _, err := restored.Restore(context.Background(), []string{base}, ShardSpec{}); err != nil {
		t.Fatal(err)
	}
	wantEvicted := 0
	for _, tc := range tests {
		if tc.evicted {
			wantEvicted++
		}
	}
	if n := tb.Evict(tb.MaxUpdateTsSec()); n != wantEvicted {
		t.Fatalf("evicted %d, want %d", n, wantEvicted)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tb.Contains(tc.id) == tc.evicted {
				t.Errorf("after Evict: contains %v, want %v", tb.Contains(tc.id), !tc.evicted)
			}
			if restored.Contains(tc.id) == tc.evicted {
				t.Errorf("after save and restore: contains %v, want %v", restored.Contains(tc.id), !tc.evicted)
			}
		})
	}
}

// TestEvictReusesMemory: a table whose entries expire and are replaced by new ones does not grow.
func TestEvictReusesMemory(t *testing.T) {
	tb := newTable(t, Config{Dim: 4, Optimizer: testSGD{dim: 4}, Initializer: constInit(0), Stripes: 4,
		ExpireTime: &hashtablepb.SlotExpireTimeConfig{DefaultExpireTime: proto.Uint32(1)}})
	var peak int64
	for round := int64(0); round < 20; round++ {
		ids := seqIDs(round*10000, 5000)
		if err := tb.Apply(ids, make([]float32, 4*len(ids)), lr(1), 0, round*day); err != nil {
			t.Fatal(err)
		}
		tb.Evict(tb.MaxUpdateTsSec())
		if tb.Size() != 5000 {
			t.Fatalf("round %d: %d entries, want the last round's 5000", round, tb.Size())
		}
		if round == 2 {
			peak = tb.MemoryBytes()
		}
		if round > 2 && tb.MemoryBytes() > peak {
			t.Fatalf("round %d: memory %d grew past %d", round, tb.MemoryBytes(), peak)
		}
	}
}

func TestRunEvictionStopsWithContext(t *testing.T) {
	leakcheck.Check(t)
	tb := expiryTable(t)
	if err := tb.Apply([]int64{fidV2(3, 1)}, []float32{1, 1}, lr(0.1), 0, 100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tb.RunEviction(ctx, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	// Slot 3 expires at once: the loop evicts it within a few ticks.
	deadline := time.Now().Add(5 * time.Second)
	for tb.Contains(fidV2(3, 1)) {
		if time.Now().After(deadline) {
			t.Fatal("the eviction loop did not evict the expired entry within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
