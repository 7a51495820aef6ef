package zkmirror

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// quiet is a logger for tests that do not look at the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const localIP = "10.1.2.3"

// testConfig is zk_mirror_test's setup: bzid, shard 2 of 10, replica 2, host 10.1.2.3.
func testConfig(c zk.Client) Config {
	replica := 2
	return Config{
		Client: c, BZID: "bzid", ShardID: 2, NumShard: 10, ReplicaID: &replica, LocalHost: localIP,
		Env: agentconf.MapEnv(map[string]string{}), Logger: quiet,
	}
}

// newMirror builds a mirror over cfg; the test's cleanup stops it.
func newMirror(t testing.TB, cfg Config) *Mirror {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

// zkfakeClient is a fresh fake ZooKeeper session, closed by the test's cleanup.
func zkfakeClient(t testing.TB) *zkfake.Fake {
	t.Helper()
	c := zkfake.New()
	t.Cleanup(func() { c.Close() })
	return c
}

// fakeMirror is a started mirror (service and publish watches) on a fresh fake ZooKeeper.
func fakeMirror(t testing.TB) (*Mirror, *zkfake.Fake) {
	t.Helper()
	c := zkfakeClient(t)
	m := newMirror(t, testConfig(c))
	if err := m.Start(tctx(t), false); err != nil {
		t.Fatal(err)
	}
	return m, c
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

// publish builds a LOAD PublishMeta.
func publish(shard, replica int, model string, total int, subs ...string) datadef.PublishMeta {
	pm := datadef.NewPublishMeta()
	pm.ShardID, pm.ReplicaID, pm.ModelName, pm.TotalPublishNum = ptr(shard), replica, ptr(model), total
	pm.NumPS = ptr(10)
	pm.SubModels = []datadef.SubModel{}
	for _, s := range subs {
		pm.SubModels = append(pm.SubModels, datadef.SubModel{Name: s, Path: "/m/" + s + "/1"})
	}
	return pm
}

// replica builds a ReplicaMeta.
func replica(addr, model, st string, task, rep int, stat datadef.ModelState) datadef.ReplicaMeta {
	rm := datadef.NewReplicaMeta()
	rm.Address, rm.ModelName, rm.ServerType = ptr(addr), ptr(model), ptr(st)
	rm.Task, rm.Replica, rm.Stat = task, rep, stat
	return rm
}

// events drains the queue without waiting.
func events(m *Mirror) []datadef.Event {
	var out []datadef.Event
	for {
		ev, ok := m.Queue().TryGet()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

func subNames(pm datadef.PublishMeta) []string {
	var out []string
	for _, s := range pm.SubModels {
		out = append(out, s.Name)
	}
	return out
}
