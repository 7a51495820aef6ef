package replica

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// Benchmarks run against a real local ZooKeeper:
//
//	go test -run '^$' -bench . -benchtime 5x ./pkg/replica/

const (
	benchTasks    = 500
	benchReplicas = 20
)

// liveMiB is the live heap plus goroutine stacks after a collection, in MiB.
func liveMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc+m.StackInuse) / (1 << 20)
}

// rssMiB is the process's resident set, in MiB (0 where /proc is missing).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseFloat(f[1], 64)
	return pages * float64(os.Getpagesize()) / (1 << 20)
}

// BenchmarkWatcherLoad10k: a watcher starts over 500 PS tasks x 20 replicas (10,000 replica
// nodes); one op is from NewWatcher to every replica listed by GetAllReplicas. Reported: the load
// time, the growth of the live heap + stacks it keeps (every watch included), and the RSS growth of
// the first load.
func BenchmarkWatcherLoad10k(b *testing.B) {
	srv := zktest.Start(b)
	writer := connectReal(b, srv, "")
	ctx := tctx(b)
	data := meta("10.1.2.3:8003", avail)
	data.AddressIPv6, data.ArchonAddress, data.ArchonAddressIPv6 = ptr("[fe80::abcd]:8003"), ptr("10.1.2.3:8001"), ptr("[fe80::abcd]:8001")
	payload := data.Serialize()
	err := parallel(ctx, benchTasks*benchReplicas, 64, func(ctx context.Context, i int) error {
		p := fmt.Sprintf("/bz/service/mdl/ps:%d/%d", i/benchReplicas, i%benchReplicas)
		_, err := writer.Create(ctx, p, payload, zk.CreateOptions{MakePath: true})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	conf := newConf(b, map[string]string{"MY_HOST_IP": "10.1.2.3"}, func(f *utilsspec.AgentConfig) {
		f.DeployType, f.NumPS = ptr("entry"), benchTasks
	})
	var maxLoad, cpu time.Duration
	var maxHeap, firstRSS float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		client := connectReal(b, srv, "")
		heap0, rss0 := liveMiB(), rssMiB()
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		b.StartTimer()
		start := time.Now()
		w, err := NewWatcher(client, conf, WatcherOptions{PollInterval: -1, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, addrs := range w.GetAllReplicas(psType, nil) {
			n += len(addrs)
		}
		took := time.Since(start)
		b.StopTimer()
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu += time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
		if n != benchTasks*benchReplicas {
			b.Fatalf("%d replicas listed after Start, want %d", n, benchTasks*benchReplicas)
		}
		maxLoad = max(maxLoad, took)
		maxHeap = max(maxHeap, liveMiB()-heap0)
		if i == 0 {
			firstRSS = rssMiB() - rss0
		}
		w.Stop()
		client.Close()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/load")
	b.ReportMetric(float64(maxLoad.Milliseconds()), "max-ms/load")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "go-cpu-ms/load")
	b.ReportMetric(maxHeap, "heap+stack-MiB")
	b.ReportMetric(firstRSS, "rss-MiB")
}

// BenchmarkSessionExpiry: the session of a running Manager (51 own replica nodes: entry and 50 PS
// tasks) is expired; one op is one expiry. Reported: the time from the new session's CONNECTED to
// every own node registered on it and to every own node AVAILABLE again, and the slowest
// ZooKeeper call (a Get every millisecond on the manager's client) started after CONNECTED while
// the manager recovered.
func BenchmarkSessionExpiry(b *testing.B) {
	srv := zktest.Start(b, zktest.WithTickTime(200*time.Millisecond))
	client, observer := connectReal(b, srv, "/bench"), connectReal(b, srv, "/bench")
	env := map[string]string{"MY_HOST_IP": "10.9.9.9", "REPLICA_ID": "0", "SHARD_ID": "0"}
	conf := newConf(b, env, func(f *utilsspec.AgentConfig) { f.DeployType, f.AgentVersion, f.NumPS = ptr("mixed"), 2, 50 })
	stub := &statusStub{}
	u0 := newUpdater(b, client, conf, UpdaterOptions{})
	for _, n := range u0.ModelNames() {
		stub.set(n, vs(1, sAvail))
	}
	m := newManager(b, client, conf, ManagerOptions{Updater: UpdaterOptions{Status: stub, UpdateInterval: time.Second}})
	ctx := tctx(b)
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	own := m.Updater().Paths()
	if _, err := observer.Create(ctx, "/probe", nil, zk.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	var mu sync.Mutex
	var lost bool
	connected := make(chan time.Time, 1)
	remove := client.AddListener(func(s zk.State) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case s == zk.StateLost:
			lost = true
		case s == zk.StateConnected && lost:
			lost = false
			select { // a listener must not block
			case connected <- time.Now():
			default:
			}
		}
	})
	defer remove()

	// The prober: a Get every millisecond; calls started after the latest CONNECTED count.
	var since atomic.Int64 // unix ns of the latest CONNECTED, 0 while not measuring
	var slowest atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pctx.Err() == nil {
			began := time.Now()
			cctx, cancel := context.WithTimeout(pctx, 10*time.Second)
			_, _, err := client.Get(cctx, "/probe")
			cancel()
			if s := since.Load(); err == nil && s != 0 && began.UnixNano() >= s {
				if d := int64(time.Since(began)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { stop(); wg.Wait() }()

	state := func(path string) (owner int64, available bool) {
		data, st, err := observer.Get(ctx, path)
		if err != nil {
			return 0, false
		}
		return st.EphemeralOwner, strings.Contains(string(data), `"stat": 30`)
	}
	var regSum, availSum, regMax, availMax time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id, passwd := client.SessionID()
		if err := srv.ExpireSession(id, passwd); err != nil {
			b.Fatal(err)
		}
		var at time.Time
		select {
		case at = <-connected:
		case <-time.After(30 * time.Second):
			b.Fatal("no new session")
		}
		since.Store(at.UnixNano())
		newID, _ := client.SessionID()
		var registered time.Duration
		owners, avails := make([]int64, len(own)), make([]bool, len(own))
		for {
			// Read every node at once, so a check takes about one round trip.
			_ = parallel(ctx, len(own), len(own), func(_ context.Context, i int) error {
				owners[i], avails[i] = state(own[i])
				return nil
			})
			all, allAvail := true, true
			for i := range own {
				all = all && owners[i] == newID
				allAvail = allAvail && owners[i] == newID && avails[i]
			}
			if all && registered == 0 {
				registered = time.Since(at)
			}
			if allAvail {
				break
			}
			if time.Since(at) > 30*time.Second {
				b.Fatal("replicas not back")
			}
		}
		available := time.Since(at)
		since.Store(0)
		regSum, availSum = regSum+registered, availSum+available
		regMax, availMax = max(regMax, registered), max(availMax, available)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(regSum)/float64(b.N), "registered-ms")
	b.ReportMetric(ms(regMax), "max-registered-ms")
	b.ReportMetric(ms(availSum)/float64(b.N), "available-ms")
	b.ReportMetric(ms(availMax), "max-available-ms")
	b.ReportMetric(ms(time.Duration(slowest.Load())), "slowest-call-ms")
	b.ReportMetric(0, "ns/op")
}
