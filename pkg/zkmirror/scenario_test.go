package zkmirror

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
)

const modelName = "model"

func resource(shard, rep int) datadef.ResourceSpec {
	r := datadef.NewResourceSpec()
	r.Address, r.ShardID, r.ReplicaID, r.Memory = ptr(localIP+":1234"), ptr(shard), ptr(rep), ptr(12345)
	r.CPU, r.Network, r.WorkLoad = 5.6, 3.2, 0.7
	return r
}

// schedule is zk_mirror_test's scheduler: num_shard publishes of 3 replicas each, ps_k on shard
// k % num_shard plus entry on all, this host's shard first and the others drawn at random.
func schedule(t testing.TB, mm datadef.ModelMeta, myShard, numTCEShard int, rng *rand.Rand) []datadef.PublishMeta {
	t.Helper()
	const version, numPS, numReplicas = 123456, 10, 3
	shards := rng.Perm(numTCEShard)
	var pms []datadef.PublishMeta
	for i := range mm.NumShard {
		var subs []datadef.SubModel
		for k := range numPS {
			if k%mm.NumShard == i {
				name := "ps_" + strconv.Itoa(k)
				subs = append(subs, datadef.SubModel{Name: name, Path: *mm.ModelDir + "/" + name + "/" + strconv.Itoa(version)})
			}
		}
		subs = append(subs, datadef.SubModel{Name: "entry", Path: *mm.ModelDir + "/entry/" + strconv.Itoa(version)})
		shard := myShard
		if i > 0 {
			shard, shards = shards[len(shards)-1], shards[:len(shards)-1]
			if shard == myShard {
				shard, shards = shards[len(shards)-1], shards[:len(shards)-1]
			}
		}
		for r := range numReplicas {
			pm := datadef.NewPublishMeta()
			pm.ShardID, pm.ReplicaID, pm.ModelName, pm.NumPS = ptr(shard), r, mm.ModelName, ptr(numPS)
			pm.SubModels = subs
			pms = append(pms, pm)
		}
	}
	for i := range pms {
		pms[i].TotalPublishNum = len(pms)
	}
	return pms
}

// runScenario is zk_mirror_test's test_zk_mirror on any client: portal, scheduler, expected
// loading, update_service, replica queries, resources. settle waits until the watches have
// caught up (nothing to wait for on the fake).
func runScenario(t *testing.T, m *Mirror, settle func(what string, cond func() bool)) {
	ctx := tctx(t)
	// 0) request loading.
	if err := m.WatchPortal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchResource(ctx); err != nil {
		t.Fatal(err)
	}
	mm := datadef.NewModelMeta()
	mm.ModelName, mm.ModelDir, mm.NumShard = ptr(modelName), ptr("/tmp/model/saved_models"), 5
	portal := zk.Join(m.PortalPath(), modelName)
	if err := m.Create(ctx, portal, mm.Serialize(), zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}

	// 1) the scheduler reads the PORTAL event and publishes.
	getCtx, cancel := context.WithTimeout(ctx, 10e9)
	defer cancel()
	ev, err := m.Queue().Get(getCtx)
	if err != nil {
		t.Fatal(err)
	}
	if ev.EType != datadef.EventPortal || ev.Path == nil || *ev.Path != portal {
		t.Fatalf("event %v %v, want PORTAL %s", ev.EType, ev.Path, portal)
	}
	got, err := datadef.DeserializeModelMeta(ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Action != "NONE" || got.NumShard != 5 || *got.ModelDir != *mm.ModelDir {
		t.Fatalf("portal event %s", ev.Data)
	}
	pms := schedule(t, got, m.TCEShardID(), m.NumTCEShard(), rand.New(rand.NewPCG(1, 2)))
	if err := m.PublishLoading(ctx, pms...); err != nil {
		t.Fatal(err)
	}
	settle("all publishes mirrored", func() bool { return len(m.PublishedPaths(modelName)) == len(pms) })

	// The publishes complete once: one PUBLISH event, for the last one mirrored.
	settle("the PUBLISH event", func() bool { return m.Queue().Len() > 0 })
	pub := events(m)
	if len(pub) != 1 || pub[0].EType != datadef.EventPublish {
		t.Fatalf("events after publishing: %v", pub)
	}

	// 2) expected loading: this host's own publish (shard 2, replica 2) is not there (replicas
	// 0..2 of shard 2 are: replica 2 is), with its ps sub models and entry.
	expected := m.ExpectedLoading()
	pm, ok := expected[modelName]
	if len(expected) != 1 || !ok {
		t.Fatalf("expected loading %v", expected)
	}
	if *pm.ShardID != m.TCEShardID() || pm.ReplicaID != m.TCEReplicaID() {
		t.Fatalf("expected loading shard %d replica %d", *pm.ShardID, pm.ReplicaID)
	}
	if names := subNames(pm); !slices.Equal(names, []string{"ps_0", "ps_5", "entry"}) {
		t.Fatalf("expected sub models %v", names)
	}

	// 3) update_service with the expected sub models.
	var replicas []datadef.ReplicaMeta
	for _, s := range pm.SubModels {
		st, task := "entry", 0
		if s.Name != "entry" {
			var idx string
			st, idx, _ = strings.Cut(s.Name, "_")
			task, _ = strconv.Atoi(idx)
		}
		replicas = append(replicas, replica(localIP+":8080", modelName, st, task, m.TCEReplicaID(), datadef.StateAvailable))
	}
	if err := m.UpdateService(ctx, replicas); err != nil {
		t.Fatal(err)
	}
	want := []string{"/bzid/service/model/entry:0/2", "/bzid/service/model/ps:0/2", "/bzid/service/model/ps:5/2"}
	if m.BZID() != "bzid" {
		for i := range want {
			want[i] = strings.Replace(want[i], "/bzid/", "/"+m.BZID()+"/", 1)
		}
	}
	settle("the service nodes mirrored", func() bool { return slices.Equal(m.LocalReplicaPaths(), want) })

	// 4) replica queries.
	entry := replica(localIP+":8080", modelName, "entry", 0, 2, datadef.StateAvailable)
	ps0 := replica(localIP+":8080", modelName, "ps", 0, 2, datadef.StateAvailable)
	ps5 := replica(localIP+":8080", modelName, "ps", 5, 2, datadef.StateAvailable)
	all := m.AllReplicas(ServerPS)
	if len(all) != 2 || !sameReplicas(all["model:ps:0"], ps0) || !sameReplicas(all["model:ps:5"], ps5) {
		t.Fatalf("AllReplicas(ps) = %v", all)
	}
	if mr := m.ModelReplicas(modelName, ServerEntry); len(mr) != 1 || !sameReplicas(mr["model:entry:0"], entry) {
		t.Fatalf("ModelReplicas(entry) = %v", mr)
	}
	if tr := m.TaskReplicas(modelName, ServerPS, 0); !sameReplicas(tr, ps0) {
		t.Fatalf("TaskReplicas(ps, 0) = %v", tr)
	}
	if r, ok := m.Replica(modelName, ServerPS, 5, 2); !ok || string(r.Serialize()) != string(ps5.Serialize()) {
		t.Fatalf("Replica(ps, 5, 2) = %v %v", r, ok)
	}
	if _, ok := m.Replica(modelName, ServerPS, 5, 3); ok {
		t.Fatal("Replica(ps, 5, 3) found")
	}
	if !slices.Equal(m.LocalReplicaPaths(), want) {
		t.Fatalf("local replica paths %v, want %v", m.LocalReplicaPaths(), want)
	}

	// 5, 6) resources.
	res := resource(m.TCEShardID(), m.TCEReplicaID())
	if err := m.ReportResource(ctx, res); err != nil {
		t.Fatal(err)
	}
	settle("the resource mirrored", func() bool { return len(m.Resources()) == 1 })
	if got := m.Resources(); string(got[0].Serialize()) != string(res.Serialize()) {
		t.Fatalf("resources %s, want %s", got[0].Serialize(), res.Serialize())
	}
}

func sameReplicas(got []datadef.ReplicaMeta, want ...datadef.ReplicaMeta) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if string(got[i].Serialize()) != string(want[i].Serialize()) {
			return false
		}
	}
	return true
}

// TestZKMirror is zk_mirror_test's test_zk_mirror on the fake.
func TestZKMirror(t *testing.T) {
	leakcheck.Check(t)
	m, _ := fakeMirror(t)
	runScenario(t, m, func(what string, cond func() bool) {
		t.Helper()
		if !cond() {
			t.Fatalf("%s: not done when the call returned (the fake runs watches synchronously)", what)
		}
	})
}
