package inprocess

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

var clickLog = synth.Config{Seed: 7, NumDense: 4, NumSlots: 3, Vocab: 60, LatentDim: 2}

// TestStart: the model trains on its parameter servers (each id's entry on the server of its
// shard), and a job that cannot start stops what it started; Close stops everything.
func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"1 ps", Config{Data: clickLog, Dim: 4, NumPS: 1, Hidden: []int{8}}, false},
		{"2 ps, stamped", Config{Data: clickLog, Dim: 2, NumPS: 2, Hidden: []int{8, 4},
			Now: TickingClock(time.Unix(1700000000, 0))}, false},
		{"bad click logs", Config{Data: synth.Config{Vocab: -1}, Dim: 4, NumPS: 1}, true},
		{"bad table", Config{Data: clickLog, Dim: 0, NumPS: 2}, true},
		// The model fails after the servers and the router started: they stop.
		{"bad model", Config{Data: clickLog, Dim: 4, NumPS: 2, Hidden: []int{-1}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			j, err := Start(tc.cfg)
			if tc.wantErr {
				if err == nil {
					j.Close()
					t.Fatal("Start succeeded")
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if len(j.Servers) != tc.cfg.NumPS {
				t.Fatalf("%d servers, want %d", len(j.Servers), tc.cfg.NumPS)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := j.Gen.Stream(1)
			b := &batch.Batch{}
			var fids []int64
			for range 64 {
				ex, _ := st.Next()
				if err := j.Gen.Schema().Append(b, ex); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := j.Model.Step(ctx, b); err != nil {
				t.Fatal(err)
			}
			if got := j.Model.GlobalStep(); got != 1 {
				t.Errorf("global step %d, want 1", got)
			}
			table := synth.SlotFeature(1)
			for id := uint64(1); id <= uint64(clickLog.Vocab); id++ {
				fids = append(fids, int64(synth.FID(1, id)))
			}
			got := make([]float32, len(fids)*tc.cfg.Dim)
			if _, err := j.Router.Lookup(ctx, table, tc.cfg.Dim, fids, got); err != nil {
				t.Fatal(err)
			}
			if slices.Equal(got, make([]float32, len(got))) {
				t.Errorf("table %s holds no trained entry", table)
			}
			// Each entry is on its shard's server.
			for s, srv := range j.Servers {
				c, err := ps.Dial(srv.Addr(), ps.ClientConfig{CallTimeout: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				for i, fid := range fids {
					if embedding.Shard(fid, tc.cfg.NumPS) != s {
						continue
					}
					one := make([]float32, tc.cfg.Dim)
					if _, err := c.Lookup(ctx, table, tc.cfg.Dim, []int64{fid}, one); err != nil {
						t.Fatal(err)
					}
					if want := got[i*tc.cfg.Dim : (i+1)*tc.cfg.Dim]; !slices.Equal(one, want) {
						t.Errorf("server %d has %v for %d, the router %v", s, one, fid, want)
					}
				}
			}
		})
	}
}

// TestTickingClock: one second per reading from start, distinct readings however many goroutines
// read it at once.
func TestTickingClock(t *testing.T) {
	start := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name       string
		goroutines int
		each       int
	}{
		{"one reader", 1, 5},
		{"concurrent readers", 8, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := TickingClock(start)
			var mu sync.Mutex
			var got []time.Time
			var wg sync.WaitGroup
			for range tc.goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range tc.each {
						tm := now()
						mu.Lock()
						got = append(got, tm)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			slices.SortFunc(got, func(a, b time.Time) int { return a.Compare(b) })
			for i, tm := range got {
				if want := start.Add(time.Duration(i+1) * time.Second); !tm.Equal(want) {
					t.Fatalf("reading %d (sorted) is %v, want %v", i, tm, want)
				}
			}
		})
	}
}
