package agentsvc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// The deployment of agent_service_test.py: 20 PS tasks of two replicas and an entry task of two,
// dc_aware at lf:default, registered in ZooKeeper as ReplicaMeta JSON.
const (
	scenarioBZID  = "test_model"
	scenarioNumPS = 20
)

var scenarioEnv = map[string]string{"TCE_INTERNAL_IDC": "lf", "TCE_LOGICAL_CLUSTER": "default", "MY_HOST_IP": "127.0.0.1"}

// scenarioAddr is the address agent_service_test gives replica r of a task: 192.168.1.<idx>:<7000+idx>,
// idx counting from 2 over the PS tasks, then the entry.
func scenarioAddr(st string, task, r int) string {
	idx := 2 + task*numPSReplicas + r
	if st == "entry" {
		idx = 2 + scenarioNumPS*numPSReplicas + r
	}
	return fmt.Sprintf("192.168.1.%d:%d", idx, 7000+idx)
}

// scenarioTable is the registered deployment as task ("ps:0", "entry:0") -> AVAILABLE addresses.
func scenarioTable() map[string][]string {
	out := map[string][]string{}
	for task := 0; task < scenarioNumPS; task++ {
		out["ps:"+strconv.Itoa(task)] = []string{scenarioAddr("ps", task, 0), scenarioAddr("ps", task, 1)}
	}
	out["entry:0"] = []string{scenarioAddr("entry", 0, 0), scenarioAddr("entry", 0, 1)}
	return out
}

// replicaNode is a ReplicaMeta payload as a registering replica writes it.
func replicaNode(model, st string, task, r int, addr string, stat datadef.ModelState) []byte {
	m := datadef.NewReplicaMeta()
	m.Address, m.Stat = &addr, stat
	m.ModelName, m.ServerType, m.Task, m.Replica = &model, &st, task, r
	return m.Serialize()
}

// layout places replica nodes: the watcher's tree and the mirror's differ.
type layout struct {
	// node is the path of replica r of task st:task.
	node func(st string, task, r int) string
	// key is the HeartBeat key of task st:task.
	key func(st string, task int) string
	// ask is a GetReplicas request for st:task.
	ask func(st pb.ServerType, task int) *pb.GetReplicasRequest
}

// watcherLayout is ReplicaWatcher's: {prefix}/lf:default/{st}:{task}/{r}, keys trimmed to the task.
func watcherLayout(prefix string) layout {
	return layout{
		node: func(st string, task, r int) string { return fmt.Sprintf("%s/%s:%d/%d", prefix, st, task, r) },
		key:  func(st string, task int) string { return st + ":" + strconv.Itoa(task) },
		ask: func(st pb.ServerType, task int) *pb.GetReplicasRequest {
			return &pb.GetReplicasRequest{ServerType: st, Task: int32(task)}
		},
	}
}

// mirrorLayout is ZKMirror's: /{bzid}/service/{model}/{st}:{task}/{r}, keys "{model}:{st}:{task}".
func mirrorLayout() layout {
	return layout{
		node: func(st string, task, r int) string {
			return fmt.Sprintf("/%s/service/%s/%s:%d/%d", scenarioBZID, modelName, st, task, r)
		},
		key: func(st string, task int) string { return fmt.Sprintf("%s:%s:%d", modelName, st, task) },
		ask: func(st pb.ServerType, task int) *pb.GetReplicasRequest {
			return &pb.GetReplicasRequest{ServerType: st, Task: int32(task), ModelName: modelName}
		},
	}
}

// register writes the deployment under l, in agent_service_test's order.
func register(t testing.TB, c zk.Client, l layout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	put := func(st string, task, r int) {
		data := replicaNode(modelName, st, task, r, scenarioAddr(st, task, r), datadef.StateAvailable)
		if _, err := c.Create(ctx, l.node(st, task, r), data, zk.CreateOptions{Ephemeral: true, MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	for task := 0; task < scenarioNumPS; task++ {
		for r := 0; r < numPSReplicas; r++ {
			put("ps", task, r)
		}
	}
	for r := 0; r < numEntryReplica; r++ {
		put("entry", 0, r)
	}
}

// counted wraps a source's DataVersion and counts the calls that reached the source, so a test
// can tell an answer built afresh from a cached one.
type counted struct {
	v     Versioned
	calls atomic.Int64
}

func (c *counted) DataVersion() uint64 { return c.v.DataVersion() }

type countedReplicas struct {
	*counted
	src ReplicaSource
}

func (c countedReplicas) GetReplicas(st pb.ServerType, task int, idc, cluster *string) []string {
	c.calls.Add(1)
	return c.src.GetReplicas(st, task, idc, cluster)
}

func (c countedReplicas) GetAllReplicas(st pb.ServerType, idc, cluster *string) map[string][]string {
	c.calls.Add(1)
	return c.src.GetAllReplicas(st, idc, cluster)
}

type countedMirror struct {
	*counted
	src MirrorSource
}

func (c countedMirror) GetAllReplicas(serverType string) map[string][]datadef.ReplicaMeta {
	c.calls.Add(1)
	return c.src.GetAllReplicas(serverType)
}

func (c countedMirror) GetTaskReplicas(model, serverType string, task int) []datadef.ReplicaMeta {
	c.calls.Add(1)
	return c.src.GetTaskReplicas(model, serverType, task)
}

// zkChange is one change a step makes in ZooKeeper: "set" (replica r's payload with stat, or an
// empty payload when empty), "create" (a new AVAILABLE replica at addr) or "delete".
type zkChange struct {
	op      string
	st      string
	task, r int
	stat    datadef.ModelState
	empty   bool
	addr    string
}

// sourceStep is one change and what the deployment's table becomes (applied to a copy).
type sourceStep struct {
	name   string
	change zkChange
	// otherTree applies the change outside the served tree (another location for the watcher);
	// the answers must not change.
	otherTree bool
	want      func(tbl map[string][]string)
}

var sourceSteps = []sourceStep{
	{name: "replica goes UNKNOWN", change: zkChange{op: "set", st: "ps", task: 3, r: 1, stat: datadef.StateUnknown},
		want: func(m map[string][]string) { m["ps:3"] = []string{scenarioAddr("ps", 3, 0)} }},
	{name: "replica AVAILABLE again", change: zkChange{op: "set", st: "ps", task: 3, r: 1, stat: datadef.StateAvailable},
		want: func(m map[string][]string) { m["ps:3"] = []string{scenarioAddr("ps", 3, 0), scenarioAddr("ps", 3, 1)} }},
	{name: "new replica", change: zkChange{op: "create", st: "ps", task: 3, r: 2, addr: "192.168.2.1:8001"},
		want: func(m map[string][]string) { m["ps:3"] = append(m["ps:3"], "192.168.2.1:8001") }},
	{name: "new task", change: zkChange{op: "create", st: "ps", task: 20, r: 0, addr: "192.168.2.2:8002"},
		want: func(m map[string][]string) { m["ps:20"] = []string{"192.168.2.2:8002"} }},
	{name: "replica deleted", change: zkChange{op: "delete", st: "ps", task: 0, r: 0},
		want: func(m map[string][]string) { m["ps:0"] = []string{scenarioAddr("ps", 0, 1)} }},
	{name: "last replica of a task deleted", change: zkChange{op: "delete", st: "ps", task: 20, r: 0},
		want: func(m map[string][]string) { delete(m, "ps:20") }},
	{name: "entry replica LOADING", change: zkChange{op: "set", st: "entry", task: 0, r: 0, stat: datadef.StateLoading},
		want: func(m map[string][]string) { m["entry:0"] = []string{scenarioAddr("entry", 0, 1)} }},
	{name: "empty payload", change: zkChange{op: "set", st: "ps", task: 5, r: 0, empty: true},
		want: func(m map[string][]string) { m["ps:5"] = []string{scenarioAddr("ps", 5, 1)} }},
	{name: "replica outside the served tree", otherTree: true,
		change: zkChange{op: "create", st: "ps", task: 4, r: 7, addr: "10.9.9.9:1"},
		want:   func(m map[string][]string) {}},
}

// apply makes the change in ZooKeeper through c (another session than the source's).
func (ch zkChange) apply(t *testing.T, c zk.Client, l layout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	path := l.node(ch.st, ch.task, ch.r)
	var err error
	switch ch.op {
	case "set":
		data := []byte{}
		if !ch.empty {
			data = replicaNode(modelName, ch.st, ch.task, ch.r, scenarioAddr(ch.st, ch.task, ch.r), ch.stat)
		}
		_, err = c.Set(ctx, path, data, zk.AnyVersion)
	case "create":
		_, err = c.Create(ctx, path, replicaNode(modelName, ch.st, ch.task, ch.r, ch.addr, datadef.StateAvailable),
			zk.CreateOptions{Ephemeral: true, MakePath: true})
	case "delete":
		err = c.Delete(ctx, path, zk.DeleteOptions{})
	default:
		t.Fatalf("unknown change %q", ch.op)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", ch.op, path, err)
	}
}

// checkAnswers compares HeartBeat (PS and ENTRY) and GetReplicas of every task of want (and of the
// tasks gone, which must answer an empty list) with want.
func checkAnswers(t *testing.T, c *Client, l layout, want map[string][]string, gone []string) {
	t.Helper()
	for _, st := range []pb.ServerType{pb.ServerType_PS, pb.ServerType_ENTRY} {
		resp, err := c.HeartBeat(bg(), st)
		if err != nil {
			t.Fatal(err)
		}
		wantTbl := map[string][]string{}
		for task, addrs := range want {
			name, idx, _ := strings.Cut(task, ":")
			if name == ServerTypeName(st) {
				n, _ := strconv.Atoi(idx)
				wantTbl[l.key(name, n)] = addrs
			}
		}
		if got := table(resp); !maps.EqualFunc(got, wantTbl, slices.Equal[[]string]) {
			t.Errorf("HeartBeat(%s) =\n%v\nwant\n%v", st, sorted(got), sorted(wantTbl))
		}
	}
	tasks := append(slices.Collect(maps.Keys(want)), gone...)
	sort.Strings(tasks)
	for _, task := range tasks {
		name, idx, _ := strings.Cut(task, ":")
		n, _ := strconv.Atoi(idx)
		st := pb.ServerType(pb.ServerType_value[strings.ToUpper(name)])
		req := l.ask(st, n)
		resp, err := c.GetModelReplicas(bg(), req.ModelName, req.ServerType, req.Task)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetAddressList().GetAddress(); !slices.Equal(got, want[task]) {
			t.Errorf("GetReplicas(%s) = %v, want %v", task, got, want[task])
		}
	}
}

func sorted(m map[string][]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %v\n", k, m[k])
	}
	return b.String()
}

// serve starts svc on loopback and returns a client of it; both end with the test.
func serve(t testing.TB, svc *Service) *Client {
	t.Helper()
	srv, err := Listen(svc, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Stop(time.Second) })
	c, err := Dial(fmt.Sprintf("127.0.0.1:%d", srv.Port()), ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// hammer calls HeartBeat and GetReplicas from a few goroutines until the returned stop (idempotent) is called,
// so the steps' changes race with answers being built and cached (run with -race).
func hammer(t *testing.T, c *Client, l layout) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				var err error
				if (g+i)%2 == 0 {
					_, err = c.HeartBeat(bg(), pb.ServerType_PS)
				} else {
					req := l.ask(pb.ServerType_PS, i%scenarioNumPS)
					_, err = c.GetModelReplicas(bg(), req.ModelName, req.ServerType, req.Task)
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}(g)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				t.Errorf("concurrent caller: %v", err)
			}
		})
	}
}

// runSteps checks the deployment's answers, then makes each step's change and checks that the
// very next answers show it: the cached answers of the previous data version must not be served.
// It also checks that answers are cached while nothing changes.
func runSteps(t *testing.T, c *Client, l, other layout, writer zk.Client, cnt *counted) {
	t.Helper()
	want := scenarioTable()
	checkAnswers(t, c, l, want, nil)
	stop := hammer(t, c, l)
	defer stop()
	var gone []string
	for _, s := range sourceSteps {
		before := maps.Clone(want)
		s.want(want)
		for task := range before {
			if _, ok := want[task]; !ok {
				gone = append(gone, task)
			}
		}
		target := l
		if s.otherTree {
			target = other
		}
		// Applied outside the subtest: the expectations of later steps build on every change,
		// whichever subtests -run selects.
		s.change.apply(t, writer, target)
		t.Run(s.name, func(t *testing.T) { checkAnswers(t, c, l, want, gone) })
	}
	stop()
	// Nothing changes now: the second round is answered from the cache.
	checkAnswers(t, c, l, want, gone)
	n := cnt.calls.Load()
	checkAnswers(t, c, l, want, gone)
	if got := cnt.calls.Load(); got != n {
		t.Errorf("%d source calls for answers of an unchanged version, want 0", got-n)
	}
}

// TestWatcherSource is agent_service_test.py over gRPC with the real ReplicaWatcher (on zkfake)
// behind FromWatcher, then the changes of sourceSteps made in ZooKeeper by another session.
func TestWatcherSource(t *testing.T) {
	leakcheck.Check(t)
	conf := newConf(t, scenarioEnv, func(c *fieldsT) {
		c.Bzid, c.BaseName, c.DeployType = strp(scenarioBZID), strp(modelName), strp("ps")
		c.BasePath = strp("/test_model/" + modelName + "/saved_models")
		c.NumPS, c.DCAware = scenarioNumPS, true
	})
	prefix, err := conf.PathPrefix()
	if err != nil {
		t.Fatal(err)
	}
	if prefix != "/test_model/service/"+modelName+"/lf:default" {
		t.Fatalf("path prefix %s", prefix)
	}
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	t.Cleanup(func() { writer.Close(); client.Close() })
	l := watcherLayout(prefix)
	other := watcherLayout("/test_model/service/" + modelName + "/hl:default")
	register(t, writer, l)
	register(t, writer, other) // another location: never served

	w, err := replica.NewWatcher(client, conf, replica.WatcherOptions{
		Env: agentconf.MapEnv(scenarioEnv), PollInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	src := FromWatcher(w)
	cnt := &counted{v: src.(Versioned)}
	c := serve(t, NewWatcherService(countedReplicas{cnt, src}, WatcherConfigFrom(conf), WithLogger(quiet)))

	t.Run("heart_beat", func(t *testing.T) {
		resp, err := c.HeartBeat(bg(), pb.ServerType_PS)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(resp.Addresses); n != scenarioNumPS {
			t.Errorf("%d PS tasks, want %d", n, scenarioNumPS)
		}
	})
	t.Run("get_replicas", func(t *testing.T) {
		resp, err := c.GetReplicas(bg(), pb.ServerType_PS, numPSReplicas-1)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(resp.GetAddressList().GetAddress()); n != numPSReplicas {
			t.Errorf("%d replicas of ps:1, want %d", n, numPSReplicas)
		}
	})
	t.Run("get_resource", func(t *testing.T) {
		resp, err := c.GetResource(bg())
		if err != nil || resp.Address != "" || resp.Memory != 0 {
			t.Errorf("v1 GetResource = %v, %v; want empty", resp, err)
		}
	})
	t.Run("changes", func(t *testing.T) { runSteps(t, c, l, other, writer, cnt) })
	t.Run("watcher stopped", func(t *testing.T) {
		// Stop empties the watcher's cache: the service must not keep answering the old table.
		w.Stop()
		resp, err := c.HeartBeat(bg(), pb.ServerType_PS)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Addresses) != 0 {
			t.Errorf("HeartBeat after the watcher stopped: %v", sorted(table(resp)))
		}
	})
}

// TestMirrorSource is the same deployment registered for agent v2, served by the real ZKMirror
// (on zkfake) behind FromMirror, then the changes of sourceSteps.
func TestMirrorSource(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	t.Cleanup(func() { writer.Close(); client.Close() })
	l := mirrorLayout()
	register(t, writer, l)
	// Another business's tree: never served.
	other := layout{node: func(st string, task, r int) string {
		return fmt.Sprintf("/other_bzid/service/%s/%s:%d/%d", modelName, st, task, r)
	}}

	replicaID := 0
	m, err := zkmirror.New(zkmirror.Config{Client: client, BZID: scenarioBZID, ShardID: 0, ReplicaID: &replicaID,
		LocalHost: "127.0.0.1", Env: agentconf.MapEnv(scenarioEnv), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	if err := m.Start(bg(), false); err != nil {
		t.Fatal(err)
	}
	src := FromMirror(m)
	cnt := &counted{v: src.(Versioned)}
	res := &Resource{Address: "127.0.0.1:1234", ShardID: 0, ReplicaID: 0, Memory: func() (int64, error) { return fixedMemory, nil }}
	c := serve(t, NewMirrorService(countedMirror{cnt, src}, res, WithLogger(quiet)))

	t.Run("heart_beat", func(t *testing.T) {
		resp, err := c.HeartBeat(bg(), pb.ServerType_PS)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(resp.Addresses); n != scenarioNumPS {
			t.Errorf("%d PS tasks, want %d", n, scenarioNumPS)
		}
	})
	t.Run("get_resource", func(t *testing.T) {
		resp, err := c.GetResource(bg())
		if err != nil || resp.Address != "127.0.0.1:1234" || resp.Memory != fixedMemory {
			t.Errorf("v2 GetResource = %v, %v", resp, err)
		}
	})
	t.Run("changes", func(t *testing.T) { runSteps(t, c, l, other, writer, cnt) })
	t.Run("unknown server type name", func(t *testing.T) {
		// FromMirror finds nothing for a name the mirror does not know (the service refuses
		// undefined enum values before it gets there).
		if got := src.GetAllReplicas("bogus"); len(got) != 0 {
			t.Errorf("GetAllReplicas(bogus) = %v", got)
		}
		if got := src.GetTaskReplicas(modelName, "bogus", 0); len(got) != 0 {
			t.Errorf("GetTaskReplicas(bogus) = %v", got)
		}
	})
}
