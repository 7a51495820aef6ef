package agentsvc

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/datadef"
)

// benchCallers is how many goroutines call at once, all over one connection.
const benchCallers = 64

// benchSetup serves agent_service_test's deployment (20 PS tasks x 2 replicas, 2 entry replicas,
// dc_aware at lf:default) plus the same deployment in another location, which must be filtered out,
// from the ReplicaWatcher-like source; versioned lets the service cache its answers.
func benchSetup(b *testing.B, versioned bool) (*Client, map[string][]string) {
	b.Helper()
	const base = "/test_model/service/" + modelName
	w := newFakeWatcher(true)
	registerReplicas(w, base+"/lf:default", 20)
	registerReplicas(w, base+"/hl:default", 20)
	w.set(base+"/lf:default/ps:3/2", meta("192.168.9.9:1", datadef.StateLoading))
	var src ReplicaSource = w
	if versioned {
		src = versionedWatcher{w}
	}
	idc, cluster := "lf", "default"
	client := serve(b, NewWatcherService(src, WatcherConfig{IDC: &idc, Cluster: &cluster, DCAware: true}, WithLogger(quiet)))
	want := map[string][]string{}
	for task := 0; task < 20; task++ {
		want[fmt.Sprintf("ps:%d", task)] = []string{
			fmt.Sprintf("192.168.1.%d:%d", 2+2*task, 7002+2*task), fmt.Sprintf("192.168.1.%d:%d", 3+2*task, 7003+2*task)}
	}
	return client, want
}

// runCallers runs b.N calls from benchCallers goroutines and reports throughput and latency
// percentiles. call returns an error when the response is wrong.
func runCallers(b *testing.B, call func(i int) error) {
	b.Helper()
	var next atomic.Int64
	lat := make([][]time.Duration, benchCallers)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for g := 0; g < benchCallers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				err := call(i)
				lat[g] = append(lat[g], time.Since(t0))
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rpc/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	// CPU time per call (client and server together) does not depend on what else the machine
	// runs, unlike rpc/s and latencies.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/rpc")
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func checkAddrs(got, want []string) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("addresses %v, want %v", got, want)
	}
	return nil
}

// BenchmarkHeartBeat: HeartBeat(PS), every answer checked against the 20 tasks' addresses.
// Targets: >= 16,000 rpc/s and p99 < 5 ms (the reference: 1,650 rpc/s).
func BenchmarkHeartBeat(b *testing.B) {
	for _, versioned := range []bool{false, true} {
		b.Run(fmt.Sprintf("versioned=%v", versioned), func(b *testing.B) {
			client, want := benchSetup(b, versioned)
			runCallers(b, func(int) error {
				resp, err := client.HeartBeat(bg(), pb.ServerType_PS)
				if err != nil {
					return err
				}
				return checkTable(resp, want)
			})
		})
	}
}

// BenchmarkGetReplicas: GetReplicas(PS, task) over the 20 tasks, every answer checked. Targets:
// >= 25,000 rpc/s and p99 < 5 ms (the reference: 2,880 rpc/s).
func BenchmarkGetReplicas(b *testing.B) {
	for _, versioned := range []bool{false, true} {
		b.Run(fmt.Sprintf("versioned=%v", versioned), func(b *testing.B) {
			client, want := benchSetup(b, versioned)
			runCallers(b, func(i int) error {
				task := i % 20
				resp, err := client.GetReplicas(bg(), pb.ServerType_PS, int32(task))
				if err != nil {
					return err
				}
				return checkAddrs(resp.GetAddressList().GetAddress(), want[fmt.Sprintf("ps:%d", task)])
			})
		})
	}
}
