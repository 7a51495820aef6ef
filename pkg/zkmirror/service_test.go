package zkmirror

import (
	"slices"
	"testing"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestUpdateService: stale local replicas go, new ones are ephemeral, unchanged ones are not
// rewritten, and other hosts' or other replicas' nodes are left alone.
func TestUpdateService(t *testing.T) {
	m, c := fakeMirror(t)
	ctx := tctx(t)
	ps0 := replica(localIP+":9000", "m", "ps", 0, 2, datadef.StateAvailable)
	entry := replica(localIP+":9001", "m", "entry", 0, 2, datadef.StateAvailable)
	remote := replica("10.9.9.9:9000", "m", "ps", 0, 3, datadef.StateLoading)
	otherReplica := replica(localIP+":9002", "m", "ps", 1, 7, datadef.StateAvailable) // same host, replica 7
	if err := m.UpdateService(ctx, []datadef.ReplicaMeta{ps0, entry, remote, otherReplica}); err != nil {
		t.Fatal(err)
	}
	want := []string{"/bzid/service/m/entry:0/2", "/bzid/service/m/ps:0/2"}
	if got := m.LocalReplicaPaths(); !slices.Equal(got, want) {
		t.Fatalf("local replica paths %v, want %v", got, want)
	}
	_, st, err := c.Get(ctx, "/bzid/service/m/ps:0/2")
	if err != nil || st.EphemeralOwner == 0 {
		t.Fatalf("ps:0/2 is not ephemeral: %+v %v", st, err)
	}
	version := st.Version

	// Only ps0, changed to LOADING: entry goes, ps0 is rewritten; the others stay.
	ps0.Stat = datadef.StateLoading
	if err := m.UpdateService(ctx, []datadef.ReplicaMeta{ps0}); err != nil {
		t.Fatal(err)
	}
	if got := m.LocalReplicaPaths(); !slices.Equal(got, []string{"/bzid/service/m/ps:0/2"}) {
		t.Fatalf("local replica paths %v", got)
	}
	for _, p := range []string{"/bzid/service/m/ps:0/3", "/bzid/service/m/ps:1/7"} {
		if st, err := c.Exists(ctx, p); err != nil || st == nil {
			t.Errorf("%s was deleted", p)
		}
	}
	_, st, _ = c.Get(ctx, "/bzid/service/m/ps:0/2")
	if st.Version == version {
		t.Fatal("a changed replica was not rewritten")
	}
	// The same list again writes nothing.
	version = st.Version
	if err := m.UpdateService(ctx, []datadef.ReplicaMeta{ps0}); err != nil {
		t.Fatal(err)
	}
	if _, st, _ = c.Get(ctx, "/bzid/service/m/ps:0/2"); st.Version != version {
		t.Fatal("an unchanged replica was rewritten")
	}
	// A replica without a model name cannot have a path.
	bad := datadef.NewReplicaMeta()
	if err := m.UpdateService(ctx, []datadef.ReplicaMeta{bad, ps0}); errkind.Of(err) != errkind.Type {
		t.Fatalf("replica without model name: %v", err)
	}
}

// TestReplicaQueries: AVAILABLE replicas only, keys {model}:{type}:{task}, each replica once.
func TestReplicaQueries(t *testing.T) {
	m, _ := fakeMirror(t)
	ctx := tctx(t)
	rms := []datadef.ReplicaMeta{
		replica("10.0.0.1:1", "m", "ps", 0, 1, datadef.StateAvailable),
		replica("10.0.0.2:1", "m", "ps", 0, 2, datadef.StateAvailable),
		replica("10.0.0.3:1", "m", "ps", 0, 3, datadef.StateLoading),
		replica("10.0.0.1:2", "m", "ps", 1, 1, datadef.StateAvailable),
		replica("10.0.0.1:3", "m", "entry", 0, 1, datadef.StateAvailable),
		replica("10.0.0.1:4", "m", "dense", 0, 1, datadef.StateAvailable),
		replica("10.0.0.1:5", "n", "ps", 0, 1, datadef.StateAvailable),
	}
	if err := m.UpdateService(ctx, rms); err != nil {
		t.Fatal(err)
	}
	addrs := func(l []datadef.ReplicaMeta) []string {
		var out []string
		for _, r := range l {
			out = append(out, *r.Address)
		}
		return out
	}
	all := m.AllReplicas(ServerPS)
	wantAll := map[string][]string{"m:ps:0": {"10.0.0.1:1", "10.0.0.2:1"}, "m:ps:1": {"10.0.0.1:2"}, "n:ps:0": {"10.0.0.1:5"}}
	if len(all) != len(wantAll) {
		t.Fatalf("AllReplicas(ps) keys %v", all)
	}
	for k, w := range wantAll {
		if got := addrs(all[k]); !slices.Equal(got, w) {
			t.Errorf("AllReplicas(ps)[%s] = %v, want %v", k, got, w)
		}
	}
	model := m.ModelReplicas("m", ServerPS)
	if len(model) != 2 || !slices.Equal(addrs(model["m:ps:0"]), wantAll["m:ps:0"]) || !slices.Equal(addrs(model["m:ps:1"]), wantAll["m:ps:1"]) {
		t.Errorf("ModelReplicas(m, ps) = %v", model)
	}
	if d := m.ModelReplicas("m", ServerDense); len(d) != 1 || len(d["m:dense:0"]) != 1 {
		t.Errorf("ModelReplicas(m, dense) = %v", d)
	}
	if got := addrs(m.TaskReplicas("m", ServerPS, 0)); !slices.Equal(got, wantAll["m:ps:0"]) {
		t.Errorf("TaskReplicas(m, ps, 0) = %v", got)
	}
	if _, ok := m.Replica("m", ServerPS, 0, 3); ok {
		t.Error("a LOADING replica was returned")
	}
	if len(m.AllReplicas(ServerType("PS"))) != 3 {
		t.Error("AllReplicas does not lower-case the server type")
	}
}

// TestServerTypeFromProto covers the v2 AgentService bug: the gRPC enum converts to the path
// form, so HeartBeat(PS) finds the ps replicas (the reference compared "ps" with 0 and found none).
func TestServerTypeFromProto(t *testing.T) {
	tests := []struct {
		in      agentpb.ServerType
		want    ServerType
		wantErr bool
	}{
		{agentpb.ServerType_PS, ServerPS, false},
		{agentpb.ServerType_ENTRY, ServerEntry, false},
		{agentpb.ServerType_DENSE, ServerDense, false},
		{agentpb.ServerType(7), "", true},
	}
	for _, tc := range tests {
		got, err := ServerTypeFromProto(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr || (err != nil && errkind.Of(err) != errkind.Value) {
			t.Errorf("ServerTypeFromProto(%v) = %q, %v", tc.in, got, err)
		}
	}
	for _, s := range []string{"ps", "PS", "Entry", "dense"} {
		if st, err := ParseServerType(s); err != nil || !st.Valid() {
			t.Errorf("ParseServerType(%q) = %q, %v", s, st, err)
		}
	}
	if _, err := ParseServerType("unified"); errkind.Of(err) != errkind.Value {
		t.Errorf("ParseServerType(unified): %v", err)
	}

	m, _ := fakeMirror(t)
	rm := replica(localIP+":1", "mm", "ps", 0, 1, datadef.StateAvailable)
	if err := m.UpdateService(tctx(t), []datadef.ReplicaMeta{rm}); err != nil {
		t.Fatal(err)
	}
	st, err := ServerTypeFromProto(agentpb.ServerType_PS)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.AllReplicas(st); len(got["mm:ps:0"]) != 1 {
		t.Fatalf("HeartBeat(PS) replicas: %v", got)
	}
	if got := m.TaskReplicas("mm", st, 0); len(got) != 1 {
		t.Fatalf("GetReplicas(PS, 0): %v", got)
	}
}
