package embedding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	"github.com/monolith-go/monolith/internal/leakcheck"
)

// TestConcurrentUse runs applies, lookups, assigns, evictions, saves and single-id reads at once
// (run it with -race). Each applier adds 1 to every embedding value of its own ids per round
// (SGD, learning rate 1, gradient -1, duplicates included), so at the end each value is the
// number of times its id was applied; lookups meanwhile must see whole numbers in range.
func TestConcurrentUse(t *testing.T) {
	leakcheck.Check(t)
	const (
		appliers = 4
		rounds   = 30
		perBatch = 3000
		dim      = 3
	)
	tb := newTable(t, Config{Dim: dim, Optimizer: testSGD{dim: dim}, Initializer: constInit(0), Workers: 3,
		ExpireTime: &hashtablepb.SlotExpireTimeConfig{DefaultExpireTime: proto.Uint32(1), SlotExpireTimes: []*hashtablepb.SlotExpireTimeConfig_SlotExpireTime{{Slot: proto.Uint32(1), ExpireTime: proto.Uint32(100000)}}}})
	dir := t.TempDir()
	counts := make([]map[int64]int, appliers)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for a := 0; a < appliers; a++ {
		counts[a] = map[int64]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(a), 1))
			for r := 0; r < rounds; r++ {
				ids := make([]int64, perBatch)
				for i := range ids {
					// Slot 1 never expires; applier a owns ids = a mod appliers.
					ids[i] = fidV2(1, int64(rng.IntN(2000)*appliers+a))
					counts[a][ids[i]]++
				}
				grads := make([]float32, perBatch*dim)
				for i := range grads {
					grads[i] = -1
				}
				if err := tb.Apply(ids, grads, lr(1), int64(r), 1000); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(3)
	go func() { // lookups
		defer readers.Done()
		ids := make([]int64, 5000)
		out := make([]float32, len(ids)*dim)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range ids {
				ids[i] = fidV2(1, int64(i))
			}
			if _, err := tb.Lookup(ids, out); err != nil {
				errs <- err
				return
			}
			for _, v := range out {
				if v != float32(int(v)) || v < 0 || v > rounds*perBatch {
					errs <- fmt.Errorf("lookup saw %v", v)
					return
				}
			}
		}
	}()
	go func() { // assigns and evictions of slot 2 ids (expire after a day)
		defer readers.Done()
		for ts := int64(0); ; ts += 2 * day {
			select {
			case <-stop:
				return
			default:
			}
			ids := seqIDs(fidV2(2, 0), 500)
			if err := tb.Assign(ids, make([]float32, len(ids)*dim), ts); err != nil {
				errs <- err
				return
			}
			tb.Evict(ts)
			tb.Contains(ids[0])
			tb.LookupEntry(ids[1])
		}
	}()
	go func() { // saves
		defer readers.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := tb.Save(context.Background(), filepath.Join(dir, fmt.Sprint(i%2), "t"), 3); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for a := range counts {
		for id, n := range counts[a] {
			d, ok := tb.LookupEntry(id)
			if !ok {
				t.Fatalf("id %d missing", id)
			}
			for _, v := range d.GetNum() {
				if v != float32(n) {
					t.Fatalf("id %d: value %v, want %d (applied %d times)", id, v, n, n)
				}
			}
		}
	}
}
