package agentsvc

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// table turns a HeartBeat response into key -> addresses.
func table(resp *pb.HeartBeatResponse) map[string][]string {
	out := map[string][]string{}
	for k, v := range resp.GetAddresses() {
		out[k] = append([]string{}, v.GetAddress()...)
	}
	return out
}

func TestWatcherHeartBeat(t *testing.T) {
	const prefix = "/bz/service/m"
	tests := []struct {
		name    string
		dcAware bool
		idc     *string
		cluster *string
		seed    map[string]datadef.ReplicaMeta
		st      pb.ServerType
		want    map[string][]string
	}{
		{
			name: "not dc aware",
			seed: map[string]datadef.ReplicaMeta{
				prefix + "/ps:0/0": meta("a:1", datadef.StateAvailable), prefix + "/ps:0/1": meta("a:2", datadef.StateAvailable),
				prefix + "/ps:1/0": meta("b:1", datadef.StateLoading), prefix + "/entry:0/0": meta("e:1", datadef.StateAvailable),
			},
			st:   pb.ServerType_PS,
			want: map[string][]string{"ps:0": {"a:1", "a:2"}, "ps:1": {}},
		},
		{
			name:    "dc aware keys trimmed to the task, other locations left out",
			dcAware: true, idc: strp("lf"), cluster: strp("default"),
			seed: map[string]datadef.ReplicaMeta{
				prefix + "/lf:default/ps:0/0": meta("a:1", datadef.StateAvailable),
				prefix + "/hl:default/ps:0/0": meta("x:1", datadef.StateAvailable),
				prefix + "/lf:default/ps:1/0": meta("b:1", datadef.StateAvailable),
			},
			st:   pb.ServerType_PS,
			want: map[string][]string{"ps:0": {"a:1"}, "ps:1": {"b:1"}},
		},
		{
			name:    "dc aware without a location: every location, merged in key order",
			dcAware: true,
			seed: map[string]datadef.ReplicaMeta{
				prefix + "/lf:default/dense:0/0": meta("a:1", datadef.StateAvailable),
				prefix + "/hl:default/dense:0/0": meta("x:1", datadef.StateAvailable),
			},
			st:   pb.ServerType_DENSE,
			want: map[string][]string{"dense:0": {"x:1", "a:1"}},
		},
		{
			name: "nothing of that type",
			seed: map[string]datadef.ReplicaMeta{prefix + "/ps:0/0": meta("a:1", datadef.StateAvailable)},
			st:   pb.ServerType_ENTRY,
			want: map[string][]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newFakeWatcher(tc.dcAware)
			for p, m := range tc.seed {
				w.set(p, m)
			}
			svc := NewWatcherService(w, WatcherConfig{IDC: tc.idc, Cluster: tc.cluster, DCAware: tc.dcAware}, WithLogger(quiet))
			resp, err := svc.HeartBeat(bg(), &pb.HeartBeatRequest{ServerType: tc.st})
			if err != nil {
				t.Fatal(err)
			}
			if got := table(resp); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("HeartBeat = %v, want %v", got, tc.want)
			}
			res, err := svc.GetResource(bg(), &pb.GetResourceRequest{})
			if err != nil || !proto.Equal(res, &pb.GetResourceResponse{}) {
				t.Errorf("v1 GetResource = %v, %v; want empty", res, err)
			}
		})
	}
}

func TestWatcherGetReplicas(t *testing.T) {
	w := newFakeWatcher(false)
	w.set("/bz/service/m/ps:0/0", meta("a:1", datadef.StateAvailable))
	w.set("/bz/service/m/ps:0/1", meta("a:2", datadef.StateAvailable))
	w.set("/bz/service/m/ps:1/0", meta("b:1", datadef.StateUnloading))
	svc := NewWatcherService(w, WatcherConfig{}, WithLogger(quiet))
	tests := []struct {
		task int32
		want string // Python text format of the response
	}{
		{0, "address_list {\n  address: \"a:1\"\n  address: \"a:2\"\n}\n"},
		{1, "address_list {\n}\n"},
		{7, "address_list {\n}\n"},
	}
	for _, tc := range tests {
		resp, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{ServerType: pb.ServerType_PS, Task: tc.task})
		if err != nil {
			t.Fatal(err)
		}
		if got := pytext.Format(resp); got != tc.want {
			t.Errorf("task %d: %q, want %q", tc.task, got, tc.want)
		}
	}
	_, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{ServerType: pb.ServerType(7)})
	wantStatus(t, err, codes.InvalidArgument, "unknown server_type 7")
	_, err = svc.HeartBeat(bg(), &pb.HeartBeatRequest{ServerType: pb.ServerType(-1)})
	wantStatus(t, err, codes.InvalidArgument, "unknown server_type -1")
}

func TestMirrorService(t *testing.T) {
	m := newFakeMirror()
	m.add("mm", "ps", 0, 1, meta("10.1.2.3:100", datadef.StateAvailable))
	m.add("mm", "ps", 0, 2, meta("10.1.2.4:100", datadef.StateAvailable))
	m.add("mm", "entry", 0, 1, meta("10.1.2.3:200", datadef.StateAvailable))
	m.add("mm", "ps", 1, 1, meta("10.1.2.5:100", datadef.StateLoading))
	m.add("other", "ps", 0, 0, datadef.NewReplicaMeta()) // no address: left out
	svc := NewMirrorService(m, &Resource{Address: "h:1", Memory: func() (int64, error) { return 5, nil }}, WithLogger(quiet))

	hb, err := svc.HeartBeat(bg(), &pb.HeartBeatRequest{ServerType: pb.ServerType_PS})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := table(hb), map[string][]string{"mm:ps:0": {"10.1.2.3:100", "10.1.2.4:100"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("HeartBeat(PS) = %v, want %v", got, want)
	}
	tests := []struct {
		model string
		st    pb.ServerType
		task  int32
		want  []string
	}{
		{"mm", pb.ServerType_PS, 0, []string{"10.1.2.3:100", "10.1.2.4:100"}},
		{"mm", pb.ServerType_PS, 1, []string{}},
		{"mm", pb.ServerType_ENTRY, 0, []string{"10.1.2.3:200"}},
		{"nope", pb.ServerType_DENSE, 0, []string{}},
	}
	for _, tc := range tests {
		resp, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{ModelName: tc.model, ServerType: tc.st, Task: tc.task})
		if err != nil {
			t.Fatal(err)
		}
		if got := append([]string{}, resp.GetAddressList().GetAddress()...); !reflect.DeepEqual(got, tc.want) || resp.AddressList == nil {
			t.Errorf("GetReplicas(%s, %s, %d) = %v, want %v", tc.model, tc.st, tc.task, resp, tc.want)
		}
	}
	// The reference passed the enum's int; the mirror must be asked with the path names.
	sort.Strings(m.asked)
	if want := []string{"dense", "entry", "ps", "ps", "ps"}; !reflect.DeepEqual(m.asked, want) {
		t.Errorf("mirror asked for server types %q, want %q", m.asked, want)
	}
}

func TestProviderService(t *testing.T) {
	tests := []struct {
		name string
		fn   AddrsFunc
		want map[string][]string
	}{
		{name: "nil func", want: map[string][]string{}},
		{name: "nil map", fn: func() map[string][]string { return nil }, want: map[string][]string{}},
		{
			name: "models",
			fn: func() map[string][]string {
				return map[string][]string{"m:entry": {"1.1.1.1:1", "1.1.1.2:1"}, "m:ps_0": {}}
			},
			want: map[string][]string{"m:entry": {"1.1.1.1:1", "1.1.1.2:1"}, "m:ps_0": {}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := NewProviderService(tc.fn, &Resource{}, WithLogger(quiet))
			// v3 answers every server type (even one the enum lacks) with the whole table.
			for _, st := range []pb.ServerType{pb.ServerType_PS, pb.ServerType_DENSE, pb.ServerType(9)} {
				resp, err := svc.HeartBeat(bg(), &pb.HeartBeatRequest{ServerType: st})
				if err != nil {
					t.Fatal(err)
				}
				if got := table(resp); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("HeartBeat(%s) = %v, want %v", st, got, tc.want)
				}
			}
			_, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{})
			wantStatus(t, err, codes.Unknown, "Exception calling application: not implement for agent v3")
		})
	}
}

func TestGetResource(t *testing.T) {
	memErr := errors.New("no /proc")
	tests := []struct {
		name string
		res  *Resource
		want *pb.GetResourceResponse
		code codes.Code
		msg  string
	}{
		{
			name: "fields",
			res:  &Resource{Address: "10.1.2.3:18765", ShardID: 2, ReplicaID: 4, Memory: func() (int64, error) { return 1 << 40, nil }},
			want: &pb.GetResourceResponse{Address: "10.1.2.3:18765", ShardId: 2, ReplicaId: 4, Memory: 1 << 40, Cpu: -1, Network: -1, WorkLoad: -1},
		},
		{name: "memory error", res: &Resource{Memory: func() (int64, error) { return 0, memErr }}, code: codes.Internal, msg: "no /proc"},
		{name: "replica id out of int32", res: &Resource{ReplicaID: 1 << 40, Memory: func() (int64, error) { return 1, nil }}, code: codes.Internal, msg: "replica_id 1099511627776"},
		{name: "no resource", code: codes.FailedPrecondition, msg: "no resource"},
		{name: "host memory", res: &Resource{Address: "h:1", ShardID: -1, ReplicaID: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, svc := range []*Service{NewMirrorService(newFakeMirror(), tc.res), NewProviderService(nil, tc.res)} {
				resp, err := svc.GetResource(bg(), &pb.GetResourceRequest{})
				if tc.code != codes.OK {
					wantStatus(t, err, tc.code, tc.msg)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.want == nil {
					if resp.Memory <= 0 || resp.Cpu != -1 || resp.ShardId != -1 || resp.Address != "h:1" {
						t.Errorf("GetResource = %v, want this machine's memory and the given identity", resp)
					}
					continue
				}
				if !proto.Equal(resp, tc.want) {
					t.Errorf("GetResource = %v, want %v", resp, tc.want)
				}
			}
		})
	}
}

func TestResourceFromConfig(t *testing.T) {
	env := map[string]string{"MY_HOST_IP": "10.1.2.3", "PORT2": "18765", "SHARD_ID": "2", "REPLICA_ID": "4"}
	conf := newConf(t, env, func(c *fieldsT) {
		c.Bzid, c.BaseName, c.DeployType, c.AgentVersion = strp("b"), strp("m"), strp("unified"), 3
	})
	res, err := ResourceFromConfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Address != "10.1.2.3:18765" || res.ShardID != 2 || res.ReplicaID != 4 {
		t.Errorf("ResourceFromConfig = %+v", res)
	}
	env["SHARD_ID"] = "two"
	if _, err := ResourceFromConfig(conf); err == nil {
		t.Error("a SHARD_ID that is not a number was accepted")
	}
	conf.AgentPort = nil
	if _, err := ResourceFromConfig(conf); err == nil {
		t.Error("no agent_port was accepted")
	}
}

// panicky is a data source that fails the way a buggy one might.
type panicky struct{}

func (panicky) GetReplicas(pb.ServerType, int, *string, *string) []string { panic("boom") }
func (panicky) GetAllReplicas(pb.ServerType, *string, *string) map[string][]string {
	panic(fmt.Errorf("bad %s", "data"))
}

func TestSourcePanicIsUnknown(t *testing.T) {
	svc := NewWatcherService(panicky{}, WatcherConfig{}, WithLogger(quiet))
	_, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{})
	wantStatus(t, err, codes.Unknown, "Exception calling application: boom")
	_, err = svc.HeartBeat(bg(), &pb.HeartBeatRequest{})
	wantStatus(t, err, codes.Unknown, "bad data")
	p := NewProviderService(func() map[string][]string { panic("provider") }, nil, WithLogger(quiet))
	_, err = p.HeartBeat(bg(), &pb.HeartBeatRequest{})
	wantStatus(t, err, codes.Unknown, "provider")
}

func TestCacheFollowsDataVersion(t *testing.T) {
	w := newFakeWatcher(false)
	w.set("/bz/service/m/ps:0/0", meta("a:1", datadef.StateAvailable))
	svc := NewWatcherService(versionedWatcher{w}, WatcherConfig{}, WithLogger(quiet))
	hb := func() *pb.HeartBeatResponse {
		t.Helper()
		r, err := svc.HeartBeat(bg(), &pb.HeartBeatRequest{ServerType: pb.ServerType_PS})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reps := func(task int32) *pb.GetReplicasResponse {
		t.Helper()
		r, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{ServerType: pb.ServerType_PS, Task: task})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first, r0 := hb(), reps(0)
	calls := w.calls.Load()
	if hb() != first || reps(0) != r0 || w.calls.Load() != calls {
		t.Error("unchanged data: responses were built again")
	}
	if reps(1) == r0 || w.calls.Load() != calls+1 {
		t.Error("a different task must be built")
	}
	w.set("/bz/service/m/ps:0/1", meta("a:2", datadef.StateAvailable))
	if got := table(hb()); !reflect.DeepEqual(got, map[string][]string{"ps:0": {"a:1", "a:2"}}) {
		t.Errorf("after a change HeartBeat = %v", got)
	}
	if got := reps(0).GetAddressList().GetAddress(); !reflect.DeepEqual(got, []string{"a:1", "a:2"}) {
		t.Errorf("after a change GetReplicas = %v", got)
	}

	// Without DataVersion every call asks the source.
	plain := NewWatcherService(w, WatcherConfig{}, WithLogger(quiet))
	calls = w.calls.Load()
	for i := 0; i < 3; i++ {
		if _, err := plain.HeartBeat(bg(), &pb.HeartBeatRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if w.calls.Load() != calls+3 {
		t.Errorf("unversioned source asked %d times, want 3", w.calls.Load()-calls)
	}
}

// movingSource changes its version while each answer is being built.
type movingSource struct {
	*fakeWatcher
	n uint64
}

func (m *movingSource) DataVersion() uint64 { m.n++; return m.n }

func TestCacheSkipsAnswersBuiltDuringAChange(t *testing.T) {
	src := &movingSource{fakeWatcher: newFakeWatcher(false)}
	svc := NewWatcherService(src, WatcherConfig{}, WithLogger(quiet))
	for i := 0; i < 3; i++ {
		if _, err := svc.HeartBeat(bg(), &pb.HeartBeatRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls.Load(); n != 3 {
		t.Errorf("source asked %d times, want 3 (nothing may be cached)", n)
	}
	if len(svc.hb.m) != 0 {
		t.Errorf("cached %d answers built while the data moved", len(svc.hb.m))
	}
}

func TestCacheIsBounded(t *testing.T) {
	w := newFakeWatcher(false)
	svc := NewWatcherService(versionedWatcher{w}, WatcherConfig{}, WithLogger(quiet))
	for task := int32(0); task < maxCachedKeys+10; task++ {
		if _, err := svc.GetReplicas(bg(), &pb.GetReplicasRequest{Task: task}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(svc.reps.m); n != maxCachedKeys {
		t.Errorf("cache holds %d answers, want at most %d", n, maxCachedKeys)
	}
}

func TestServerTypeNames(t *testing.T) {
	for st, want := range map[pb.ServerType]string{pb.ServerType_PS: "ps", pb.ServerType_ENTRY: "entry", pb.ServerType_DENSE: "dense", 5: ""} {
		if got := ServerTypeName(st); got != want {
			t.Errorf("ServerTypeName(%d) = %q, want %q", st, got, want)
		}
	}
	tests := []struct {
		in   string
		want pb.ServerType
		ok   bool
	}{{"ps", pb.ServerType_PS, true}, {"ENTRY", pb.ServerType_ENTRY, true}, {" dense ", pb.ServerType_DENSE, true}, {"proxy", 0, false}, {"", 0, false}}
	for _, tc := range tests {
		got, err := ParseServerType(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseServerType(%q) = %v, %v", tc.in, got, err)
		}
	}
}
