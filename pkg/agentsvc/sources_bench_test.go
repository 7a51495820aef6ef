package agentsvc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/resource"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// The benchmarks of this file serve agent_service_test's deployment (20 PS tasks x 2 replicas and
// 2 entry replicas, dc_aware at lf:default) from the real data sources on zkfake, over gRPC on
// loopback, benchCallers goroutines sharing one connection, every answer checked. What they
// measure is the RPC path: the sources answer from memory and, versioned, are asked once per
// change. Targets: HeartBeat >= 16,000 rpc/s, GetReplicas >= 25,000 rpc/s, p99 < 5 ms.

// benchChurn is how often the churn variants change ZooKeeper.
const benchChurn = 10 * time.Millisecond

// churner changes a replica node outside what the answers show every benchChurn (its stat flips),
// so the data version moves and the service rebuilds its answers while they stay checkable.
func churner(b *testing.B, c zk.Client, path string, payload func(datadef.ModelState) []byte) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(benchChurn)
		defer t.Stop()
		stat := datadef.StateLoading
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if stat == datadef.StateLoading {
				stat = datadef.StateAvailable
			} else {
				stat = datadef.StateLoading
			}
			if _, err := c.Set(ctx, path, payload(stat), zk.AnyVersion); err != nil && ctx.Err() == nil {
				b.Errorf("churn: %v", err)
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// watcherBench serves the deployment from a real ReplicaWatcher behind FromWatcher; with churn a
// replica of another location changes every benchChurn.
func watcherBench(b *testing.B, churn bool) *Client {
	b.Helper()
	conf := newConf(b, scenarioEnv, func(c *fieldsT) {
		c.Bzid, c.BaseName, c.DeployType = strp(scenarioBZID), strp(modelName), strp("ps")
		c.NumPS, c.DCAware = scenarioNumPS, true
	})
	prefix, err := conf.PathPrefix()
	if err != nil {
		b.Fatal(err)
	}
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	b.Cleanup(func() { writer.Close(); client.Close() })
	other := watcherLayout("/" + scenarioBZID + "/service/" + modelName + "/hl:default")
	register(b, writer, watcherLayout(prefix))
	register(b, writer, other) // filtered out by location
	w, err := replica.NewWatcher(client, conf, replica.WatcherOptions{
		Env: agentconf.MapEnv(scenarioEnv), PollInterval: -1, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	c := serve(b, NewWatcherService(FromWatcher(w), WatcherConfigFrom(conf), WithLogger(quiet)))
	if churn {
		b.Cleanup(churner(b, writer, other.node("ps", 0, 0), func(st datadef.ModelState) []byte {
			return replicaNode(modelName, "ps", 0, 0, "10.9.9.9:1", st)
		}))
	}
	return c
}

// mirrorBench serves the deployment from a real ZKMirror behind FromMirror; with churn an entry
// replica the PS answers never show changes every benchChurn.
func mirrorBench(b *testing.B, churn bool) *Client {
	b.Helper()
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	b.Cleanup(func() { writer.Close(); client.Close() })
	register(b, writer, mirrorLayout())
	replicaID := 0
	m, err := zkmirror.New(zkmirror.Config{Client: client, BZID: scenarioBZID, ReplicaID: &replicaID,
		LocalHost: "127.0.0.1", Env: agentconf.MapEnv(scenarioEnv), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Stop)
	if err := m.Start(context.Background(), false); err != nil {
		b.Fatal(err)
	}
	c := serve(b, NewMirrorService(FromMirror(m), nil, WithLogger(quiet)))
	if churn {
		path := fmt.Sprintf("/%s/service/%s/entry:1/0", scenarioBZID, modelName)
		if _, err := writer.Create(context.Background(), path, replicaNode(modelName, "entry", 1, 0, "10.9.9.9:1", datadef.StateLoading),
			zk.CreateOptions{MakePath: true}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(churner(b, writer, path, func(st datadef.ModelState) []byte {
			return replicaNode(modelName, "entry", 1, 0, "10.9.9.9:1", st)
		}))
	}
	return c
}

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on every Linux ABI Go supports).
const userHZ = 100

// machineBusy is the CPU time every process on the machine has used (/proc/stat's busy time); false
// where it cannot be read.
func machineBusy() (time.Duration, bool) {
	var h resource.Host
	t, err := h.CPUTimes()
	if err != nil {
		return 0, false
	}
	return time.Duration(t.Busy() * float64(time.Second) / userHZ), true
}

// runMeasured is runCallers plus the load the rest of the machine put on it meanwhile, as
// "other-cores" (CPU cores' worth used by other processes): rpc/s and latencies depend on it on a
// shared machine, so figures are comparable only between runs with little of it.
func runMeasured(b *testing.B, call func(i int) error) {
	b.Helper()
	busy0, ok0 := machineBusy()
	own0, start := cpuTime(), time.Now()
	runCallers(b, call)
	busy1, ok1 := machineBusy()
	own, wall := cpuTime()-own0, time.Since(start)
	if ok0 && ok1 && wall > 0 {
		others := (busy1 - busy0 - own).Seconds() / wall.Seconds()
		b.ReportMetric(max(others, 0), "other-cores")
	}
}

// checkTable checks a HeartBeat table against want.
func checkTable(resp *pb.HeartBeatResponse, want map[string][]string) error {
	if len(resp.Addresses) != len(want) {
		return fmt.Errorf("%d tasks, want %d", len(resp.Addresses), len(want))
	}
	for k, v := range want {
		if err := checkAddrs(resp.Addresses[k].GetAddress(), v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// psTable is the deployment's PS table keyed as l keys it.
func psTable(l layout) map[string][]string {
	out := map[string][]string{}
	for task := 0; task < scenarioNumPS; task++ {
		out[l.key("ps", task)] = []string{scenarioAddr("ps", task, 0), scenarioAddr("ps", task, 1)}
	}
	return out
}

type sourceBench struct {
	name  string
	serve func(b *testing.B, churn bool) *Client
	l     layout
}

var sourceBenches = []sourceBench{
	{"watcher", watcherBench, watcherLayout("")},
	{"mirror", mirrorBench, mirrorLayout()},
}

// BenchmarkSourceHeartBeat: HeartBeat(PS) from the real sources, every answer checked against the
// 20 tasks' addresses. Target: >= 16,000 rpc/s, p99 < 5 ms.
func BenchmarkSourceHeartBeat(b *testing.B) {
	for _, sb := range sourceBenches {
		for _, churn := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/churn=%v", sb.name, churn), func(b *testing.B) {
				c := sb.serve(b, churn)
				want := psTable(sb.l)
				runMeasured(b, func(int) error {
					resp, err := c.HeartBeat(bg(), pb.ServerType_PS)
					if err != nil {
						return err
					}
					return checkTable(resp, want)
				})
			})
		}
	}
}

// BenchmarkSourceGetReplicas: GetReplicas(PS, task) over the 20 tasks from the real sources, every
// answer checked. Target: >= 25,000 rpc/s, p99 < 5 ms.
func BenchmarkSourceGetReplicas(b *testing.B) {
	for _, sb := range sourceBenches {
		for _, churn := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/churn=%v", sb.name, churn), func(b *testing.B) {
				c := sb.serve(b, churn)
				runMeasured(b, func(i int) error {
					task := i % scenarioNumPS
					req := sb.l.ask(pb.ServerType_PS, task)
					resp, err := c.GetModelReplicas(bg(), req.ModelName, req.ServerType, req.Task)
					if err != nil {
						return err
					}
					return checkAddrs(resp.GetAddressList().GetAddress(), []string{scenarioAddr("ps", task, 0), scenarioAddr("ps", task, 1)})
				})
			})
		}
	}
}
