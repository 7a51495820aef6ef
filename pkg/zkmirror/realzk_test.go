package zkmirror

import (
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// settleWithin bounds how long a real client's watches may take to catch up.
const settleWithin = 10 * time.Second

func realClient(t *testing.T, srv *zktest.Server) *zkreal.Client {
	t.Helper()
	c, err := zkreal.Connect(tctx(t), zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: 4 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func realMirror(t *testing.T, c zk.Client, bzid string) *Mirror {
	t.Helper()
	cfg := testConfig(c)
	cfg.BZID = bzid
	m := newMirror(t, cfg)
	if err := m.Start(tctx(t), false); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRealZooKeeper runs the mirror against one real ZooKeeper server shared by the subtests
// (each with its own bzid).
func TestRealZooKeeper(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))

	// zk_mirror_test's test_zk_mirror: portal, publish, service and resources.
	t.Run("scenario", func(t *testing.T) {
		leakcheck.Check(t)
		m := realMirror(t, realClient(t, srv), "scenario")
		runScenario(t, m, func(what string, cond func() bool) {
			t.Helper()
			eventually(t, settleWithin, what, cond)
		})
	})

	// Resources reported after WatchResource, before /{bzid}/resource existed, are mirrored
	// (kazoo's ChildrenWatch gave up on the missing node: the reference mirrored none).
	t.Run("resource_node_created_later", func(t *testing.T) {
		leakcheck.Check(t)
		c := realClient(t, srv)
		m := realMirror(t, c, "later")
		ctx := tctx(t)
		if err := m.WatchResource(ctx); err != nil {
			t.Fatal(err)
		}
		if st, _ := c.Exists(ctx, m.ResourcePath()); st != nil {
			t.Fatal("the resource node exists already: the test tests nothing")
		}
		if err := m.ReportResource(ctx, resource(2, 2)); err != nil {
			t.Fatal(err)
		}
		eventually(t, settleWithin, "resource mirrored", func() bool { return len(m.Resources()) == 1 })
	})

	// After a session expiry the mirror converges without a restart: the ephemeral nodes of the
	// old session are dropped from it, and what is written on the new session is mirrored.
	t.Run("session_expiry", func(t *testing.T) {
		leakcheck.Check(t)
		c := realClient(t, srv)
		m := realMirror(t, c, "expiry")
		ctx := tctx(t)
		if err := m.WatchResource(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.ReportResource(ctx, resource(2, 2)); err != nil {
			t.Fatal(err)
		}
		rm := replica(localIP+":1", "m", "ps", 0, 2, datadef.StateAvailable)
		if err := m.UpdateService(ctx, []datadef.ReplicaMeta{rm}); err != nil {
			t.Fatal(err)
		}
		eventually(t, settleWithin, "mirrored", func() bool { return len(m.Resources()) == 1 && len(m.LocalReplicaPaths()) == 1 })

		id, passwd := c.SessionID()
		if err := srv.ExpireSession(id, passwd); err != nil {
			t.Fatal(err)
		}
		eventually(t, settleWithin, "ephemeral nodes of the old session dropped", func() bool {
			return len(m.Resources()) == 0 && len(m.LocalReplicaPaths()) == 0
		})
		eventually(t, settleWithin, "update_service on the new session", func() bool {
			return m.UpdateService(ctx, []datadef.ReplicaMeta{rm}) == nil
		})
		eventually(t, settleWithin, "replica mirrored again", func() bool { return len(m.LocalReplicaPaths()) == 1 })
	})
}
