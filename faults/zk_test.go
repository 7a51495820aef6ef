package faults

import (
	"context"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/monolith-go/monolith/faults/netns"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// serving is a deployment of one container: a real ZooKeeper holding the saved models and layout
// of an export (entry and ps_0, trained in this process), and agent v3 (cmd/agent) running
// cmd/model_server as its TF Serving, serving both; the entry finds its PS replica through the
// agent's HeartBeat.
type serving struct {
	zk         *zktest.Server
	job        *exporttest.Job
	agent      *proc
	entryAddr  string // the model server's gRPC address
	agentAddr  string // the agent's AgentService
	sessionTTL time.Duration
}

const servingBzid = "faults"

// startServing starts the deployment and waits until the entry's Predict works.
func startServing(t *testing.T, ctx context.Context, sessionTimeout time.Duration) *serving {
	t.Helper()
	zk := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond)) // sessions of 0.4 to 4 s
	j := exporttest.NewJob(t, 1, []int{8})
	j.Train(ctx, 20)
	base := filepath.Join(t.TempDir(), "demo")
	j.Export(ctx, base, 1)

	c, _ := zk.Connect(t, 4*time.Second)
	for _, sub := range []string{"entry", "ps_0"} {
		data := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(base, sub))
		mkdirs(t, c, path.Join("/", servingBzid, "saved_models", "demo", sub), []byte(data))
		mkdirs(t, c, path.Join("/", servingBzid, "layouts", "serve", "demo:"+sub), nil)
	}
	c.Close()

	dir := t.TempDir()
	s := &serving{zk: zk, job: j, sessionTTL: sessionTimeout}
	agentPort, grpcPort := freePort(t), freePort(t)
	s.entryAddr = "127.0.0.1:" + strconv.Itoa(grpcPort)
	s.agentAddr = "127.0.0.1:" + strconv.Itoa(agentPort)
	conf := filepath.Join(dir, "agent.conf")
	text := fmt.Sprintf("bzid %s\ndeploy_type unified\nagent_version 3\nzk_servers %s\nlayout_pattern serve\nagent_port %d\n", servingBzid, zk.Addr(), agentPort)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// PORT3 is TF Serving's gRPC port (deploy_type unified); MY_POD_NAME names the container.
	s.agent = startProc(t, "agent", agentBin.Path(t), []string{"PORT3=" + strconv.Itoa(grpcPort), "MY_POD_NAME=faults-0", "MY_HOST_IP=127.0.0.1"},
		"--conf="+conf, "--tfs_binary="+modelServerBin.Path(t), "--tfs_log="+filepath.Join(dir, "tfs.log"), "--advertise_host=127.0.0.1",
		"--status_addr=127.0.0.1:0", "--zk_session_timeout="+sessionTimeout.String())
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "tfs.log"))
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("model server log:\n%s", b)
		}
	})
	return s
}

// mkdirs creates the node p (and its parents) with data.
func mkdirs(t *testing.T, c *gozk.Conn, p string, data []byte) {
	t.Helper()
	parts := []string{}
	for d := p; d != "/"; d = path.Dir(d) {
		parts = append(parts, d)
	}
	slices.Reverse(parts)
	for i, d := range parts {
		var v []byte
		if i == len(parts)-1 {
			v = data
		}
		if _, err := c.Create(d, v, 0, gozk.WorldACL(gozk.PermAll)); err != nil && err != gozk.ErrNodeExists {
			t.Fatalf("create %s: %v", d, err)
		}
	}
}

// predictor sends the entry a Predict of a fixed batch and checks the scores against the
// trainer's.
type predictor struct {
	client   servingapis.PredictionServiceClient
	req      *servingapis.PredictRequest
	want     []float64
	deadline time.Duration
}

func newPredictor(t *testing.T, ctx context.Context, addr string, j *exporttest.Job, deadline time.Duration) *predictor {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	examples := j.Examples(9, 16)
	in, err := instance.Marshal(examples)
	if err != nil {
		t.Fatal(err)
	}
	return &predictor{client: servingapis.NewPredictionServiceClient(cc), want: j.Predict(ctx, examples), deadline: deadline,
		req: &servingapis.PredictRequest{ModelSpec: &servingapis.ModelSpec{Name: "demo:entry"},
			Inputs: map[string]*tfframework.TensorProto{entry.InputExamples: instance.MakeTensorProto(in)}}}
}

// predict sends the Predict and says how long it took and what was wrong, if anything.
func (p *predictor) predict(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.deadline)
	defer cancel()
	begin := time.Now()
	resp, err := p.client.Predict(ctx, p.req)
	took := time.Since(begin)
	if err != nil {
		return took, err
	}
	got, err := tensors.Float32s(resp.GetOutputs()[entry.OutputScores])
	if err != nil {
		return took, err
	}
	if len(got) != len(p.want) {
		return took, fmt.Errorf("%d scores, want %d", len(got), len(p.want))
	}
	for i := range got {
		if math.Abs(float64(got[i])-p.want[i]) > 1e-6 {
			return took, fmt.Errorf("example %d scored %v, the trainer %v", i, got[i], p.want[i])
		}
	}
	return took, nil
}

// predictLoop sends Predicts every interval until stop, recording each.
type predictLoop struct {
	mu       sync.Mutex
	n        int
	failures []string
	lat      []time.Duration
	stop     func()
}

func (p *predictor) loop(ctx context.Context, every time.Duration) *predictLoop {
	ctx, cancel := context.WithCancel(ctx)
	l := &predictLoop{}
	done := make(chan struct{})
	l.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for ctx.Err() == nil {
			took, err := p.predict(ctx)
			if ctx.Err() != nil {
				return
			}
			l.mu.Lock()
			l.n++
			l.lat = append(l.lat, took)
			if err != nil {
				l.failures = append(l.failures, time.Now().Format("15:04:05.000")+": "+err.Error())
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	return l
}

// percentile is the p-th percentile of the latencies.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(p/100*float64(len(s))))-1)]
}

// registrations are the agent's ephemeral nodes (bindings, container service infos) with their
// owning sessions.
func registrations(c *gozk.Conn) (map[string]int64, error) {
	out := map[string]int64{}
	var walk func(string) error
	walk = func(p string) error {
		kids, st, err := c.Children(p)
		if err == gozk.ErrNoNode {
			return nil
		} else if err != nil {
			return err
		}
		if st.EphemeralOwner != 0 {
			out[p] = st.EphemeralOwner
		}
		for _, k := range kids {
			if err := walk(path.Join(p, k)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, root := range []string{"binding", "container_service", "service"} {
		if err := walk(path.Join("/", servingBzid, root)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Scenario 2: the agent and ZooKeeper are partitioned (every packet to and from ZooKeeper's port
// dropped) for 8 s, past the agent's session timeout (2 s): ZooKeeper expires the session and
// deletes the agent's ephemeral nodes. Serving goes on: a Predict of the entry every 100 ms
// (each within 2 s) answers the trainer's scores before, during and after the partition, every
// one. After the heal the agent has a new session and its bindings and container service info are
// back, owned by the new session, within 15 s.
func TestPartitionAgentFromZooKeeper(t *testing.T) {
	netns.Require(t)
	ctx := tctx(t, 3*time.Minute)
	const (
		sessionTimeout = 2 * time.Second
		partition      = 8 * time.Second
	)
	s := startServing(t, ctx, sessionTimeout)
	pred := newPredictor(t, ctx, s.entryAddr, s.job, 2*time.Second)
	took := eventually(t, time.Minute, "the entry's Predict answers the trainer's scores", func() bool {
		if s.agent.exited() {
			t.Fatalf("the agent exited: %v; stderr:\n%s", s.agent.cmd.ProcessState, s.agent.tail(3000))
		}
		_, err := pred.predict(ctx)
		return err == nil
	})
	t.Logf("serving: the entry's Predict works %v after the agent started", took.Round(time.Millisecond))
	c, _ := s.zk.Connect(t, 4*time.Second)
	var before map[string]int64
	eventually(t, 30*time.Second, "the agent's bindings of entry and ps_0 and its service info", func() bool {
		var err error
		before, err = registrations(c)
		return err == nil && len(before) >= 3
	})
	c.Close()
	t.Logf("registrations before the partition: %v", keys(before))

	loop := pred.loop(ctx, 100*time.Millisecond)
	defer loop.stop()
	time.Sleep(time.Second)
	cut := netns.Partition(t, s.zk.Port())
	time.Sleep(partition)
	if err := cut.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	c, _ = s.zk.Connect(t, 4*time.Second)
	var after map[string]int64
	restored := func() bool {
		var err error
		after, err = registrations(c)
		if err != nil || len(after) != len(before) {
			return false
		}
		for p, owner := range before {
			if o, ok := after[p]; !ok || o == owner {
				return false
			}
		}
		return true
	}
	for !restored() {
		if time.Since(healed) > 15*time.Second {
			t.Fatalf("the agent's registrations are not restored within 15 s of the heal: before %v, now %v; agent stderr:\n%s", before, after, s.agent.tail(3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	recovery := time.Since(healed)
	time.Sleep(time.Second) // Predicts after the heal too
	loop.stop()
	loop.mu.Lock()
	defer loop.mu.Unlock()
	t.Logf("recovery: %v after the heal the agent's %d registrations are back under a new session (bound 15 s)", recovery.Round(time.Millisecond), len(after))
	t.Logf("Predict throughout: %d sent, %d failed; latency p50 %v, p99 %v, max %v", loop.n, len(loop.failures),
		percentile(loop.lat, 50).Round(10*time.Microsecond), percentile(loop.lat, 99).Round(10*time.Microsecond), percentile(loop.lat, 100).Round(10*time.Microsecond))
	for _, l := range strings.Split(s.agent.stderr.String(), "\n") {
		if strings.Contains(l, "zk state") || strings.Contains(l, "restored bindings") {
			t.Logf("agent: %s", l)
		}
	}
	if len(loop.failures) > 0 {
		t.Errorf("%d of %d Predicts failed during or after the partition: %q", len(loop.failures), loop.n, loop.failures)
	}
	if s.agent.exited() {
		t.Errorf("the agent exited: %v", s.agent.cmd.ProcessState)
	}
}

func keys(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
