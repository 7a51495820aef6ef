package agentv3

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/faketfsbin"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// Issue 21 item 1: after agent A's session expires, agent B's HeartBeat (and A's own) must list
// A's addresses again within 1 s of A's nodes being back, every time. Before the fix, A's client
// re-created its nodes in map order, a binding could come back before A's service info, and B,
// finding no service info, left A out until the next change of the bindings (4 of 20 expiries,
// for more than 80 s).
const (
	expiryRounds = 20
	// expiryModels is the number of models of the layout.
	expiryModels = 6
	// expiryBound is the requirement: the HeartBeat is complete within 1 s of the restore.
	expiryBound = time.Second
	// expiryCap is how long a round keeps polling an incomplete HeartBeat, so that the log says for
	// how long it stayed incomplete (the test fails either way once expiryBound has passed).
	expiryCap = 10 * time.Second
	// expirySession is the agents' session timeout; the expiries are forced, so it only bounds the
	// client's handshake wait.
	expirySession = 4 * time.Second
)

// expiryAgent is an agent v3 with its own ZooKeeper session and fake_tfs process, and a client
// of its AgentService.
type expiryAgent struct {
	name   string
	agent  *Agent
	zk     *zkreal.Client
	client *agentsvc.Client
}

func startExpiryAgent(t *testing.T, srv *zktest.Server, name string) *expiryAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	zc, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: expirySession, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zc.Close() })
	dir := t.TempDir()
	conf := testConfig(t, map[string]string{"MY_POD_NAME": name}, func(f *utilsspec.AgentConfig) { f.ZKServers = ptr(srv.Addr()) })
	a, err := New(conf, Options{
		ZK: zc, TFSBinary: faketfsbin.Path(t), TFSDir: dir, TFSLog: filepath.Join(dir, "tfs.log"), Host: "127.0.0.1",
		ModelConfigDir: dir, Logger: quiet, ReloadBackoff: 5 * time.Millisecond, ReloadBackoffMax: 50 * time.Millisecond,
		TFSStopGrace: 5 * time.Second, PendingSyncInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	c, err := agentsvc.Dial(a.AgentServiceAddr(), agentsvc.ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &expiryAgent{name: name, agent: a, zk: zc, client: c}
}

// addrAs is the address observer's HeartBeat gives for x's container (as AddrsMap picks it).
func (x *expiryAgent) addrAs(observer *expiryAgent) string {
	info := x.agent.ServiceInfo()
	if r, ok := observer.agent.TFS().(interface{ GRPCRemoteOp() bool }); ok && r.GRPCRemoteOp() {
		return *info.GRPC
	}
	return *info.Archon
}

// missing returns what x's HeartBeat lacks of want ("model:sub_graph" -> addresses), as
// "key: addr" lines; nil when it lists them all.
func (x *expiryAgent) missing(ctx context.Context, want map[string][]string) ([]string, error) {
	resp, err := x.client.HeartBeat(ctx, pb.ServerType_PS)
	if err != nil {
		return nil, err
	}
	var out []string
	for key, addrs := range want {
		got := resp.GetAddresses()[key].GetAddress()
		for _, a := range addrs {
			if !slices.Contains(got, a) {
				out = append(out, key+": "+a)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func TestTwoAgentsSessionExpiries(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	leakcheck.Check(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctl, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()

	// One layout with several models of two sub-graphs each; both agents (no layout filters) serve
	// them all. Each model has its own binding watch, so a restore that brings a model's bindings
	// back before the service info shows in that model.
	var sms []string // "model:sub_graph"
	base := t.TempDir()
	for m := range expiryModels {
		model := fmt.Sprintf("test_ffm_model_%d", m)
		for _, sub := range []string{"entry", "ps_0"} {
			cfg := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(base, model, sub))
			if _, err := ctl.Create(ctx, "/gip/saved_models/"+model+"/"+sub, []byte(cfg), zk.CreateOptions{MakePath: true}); err != nil {
				t.Fatal(err)
			}
			if err := ctl.EnsurePath(ctx, "/gip/layout/"+model+":"+sub); err != nil {
				t.Fatal(err)
			}
			sms = append(sms, model+":"+sub)
		}
	}
	a := startExpiryAgent(t, srv, "agent-a")
	b := startExpiryAgent(t, srv, "agent-b")
	agents := []*expiryAgent{b, a} // the peer first: it is what the issue is about

	// want[x]: what x's HeartBeat must list, both agents' addresses for every sub-graph.
	want := map[*expiryAgent]map[string][]string{}
	for _, x := range agents {
		want[x] = map[string][]string{}
		for _, sm := range sms {
			want[x][sm] = []string{a.addrAs(x), b.addrAs(x)}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, x := range agents {
		for {
			miss, err := x.missing(ctx, want[x])
			if err == nil && len(miss) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's HeartBeat never complete: missing %v, err %v", x.name, miss, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A's nodes: its service info and one binding per sub-graph.
	nodes := []string{"/gip/container_service/" + a.agent.Container().String()}
	for _, sm := range sms {
		model, sub, _ := strings.Cut(sm, ":")
		nodes = append(nodes, "/gip/binding/"+model+"/"+sub+":"+a.agent.Container().String())
	}
	type late struct {
		round int
		agent string
		after time.Duration // how long the HeartBeat stayed incomplete after the restore
		miss  []string
	}
	var lates []late
	for round := range expiryRounds {
		// Every fifth round the new session is expired again at once, as soon as it is up: its
		// restore is cut short and the next one starts over.
		expiries := 1
		if round%5 == 4 {
			expiries = 2
		}
		var expired []int64
		for range expiries {
			id := expireNow(t, srv, a.zk, expired)
			expired = append(expired, id)
		}
		restoredAt := waitRestored(t, ctl, a.zk, nodes, expired)
		// Both HeartBeats are polled in turn, so each one's delay is its own.
		doneAt := map[*expiryAgent]time.Duration{}
		miss := map[*expiryAgent][]string{}
		for len(doneAt) < len(agents) && time.Since(restoredAt) <= expiryCap {
			for _, x := range agents {
				if _, ok := doneAt[x]; ok {
					continue
				}
				m, err := x.missing(ctx, want[x])
				switch {
				case err != nil:
					miss[x] = []string{err.Error()}
				case len(m) == 0:
					doneAt[x] = time.Since(restoredAt)
					delete(miss, x)
				default:
					miss[x] = m
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		for _, x := range agents {
			after, ok := doneAt[x]
			if !ok {
				after = time.Since(restoredAt)
			}
			if !ok || after > expiryBound {
				lates = append(lates, late{round, x.name, after, miss[x]})
			}
			t.Logf("round %d (%d expiries): %s's HeartBeat complete: %v, %v after the restore (missing %v)",
				round, expiries, x.name, ok, after.Round(time.Millisecond), miss[x])
		}
	}
	peerLate := 0
	for _, l := range lates {
		if l.agent == b.name {
			peerLate++
		}
		if l.miss != nil {
			t.Errorf("round %d: %s's HeartBeat still lacked %v %v after A's nodes were back", l.round, l.agent, l.miss, l.after.Round(time.Millisecond))
		} else {
			t.Errorf("round %d: %s's HeartBeat complete only %v after A's nodes were back (want within %v)", l.round, l.agent, l.after.Round(time.Millisecond), expiryBound)
		}
	}
	t.Logf("the peer's HeartBeat was incomplete for more than %v after %d of %d restores", expiryBound, peerLate, expiryRounds)
}

// expireNow expires c's session once c has one that is not in done, and returns its id.
func expireNow(t *testing.T, srv *zktest.Server, c *zkreal.Client, done []int64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		id, passwd := c.SessionID()
		if id != 0 && !slices.Contains(done, id) {
			if err := srv.ExpireSession(id, passwd); err != nil {
				t.Fatalf("expire session 0x%x: %v", id, err)
			}
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new session after expiring %x", done)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitRestored waits until every node exists and belongs to c's current session, one that is
// not among the expired ones, and returns when it saw that.
func waitRestored(t *testing.T, ctl zk.Client, c *zkreal.Client, nodes []string, expired []int64) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		id, _ := c.SessionID()
		ok := id != 0 && !slices.Contains(expired, id)
		var gone []string
		for _, p := range nodes {
			st, err := ctl.Exists(ctx, p)
			if err != nil || st == nil || st.EphemeralOwner != id {
				ok = false
				gone = append(gone, p)
			}
		}
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's nodes not back on a new session: %s", strings.Join(gone, ", "))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
