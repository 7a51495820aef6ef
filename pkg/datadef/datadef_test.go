package datadef

import (
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
	"google.golang.org/protobuf/proto"
)

func ptr[T any](v T) *T { return &v }

func TestSerializeRoundTrip(t *testing.T) {
	// Expected bytes are what the reference's serialize() writes for the same values.
	tests := []struct {
		name string
		rec  interface{ Serialize() []byte }
		want string
		back func([]byte) (interface{ Serialize() []byte }, error)
	}{
		{"model meta", ModelMeta{ModelName: ptr("m1"), NumShard: 3, Action: "ADD", SpecReplicas: []int{0, 2}},
			`{"model_name": "m1", "model_dir": null, "ckpt": null, "num_shard": 3, "action": "ADD", "spec_replicas": [0, 2]}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeModelMeta(b) }},
		{"resource spec floats", ResourceSpec{Address: ptr("h:1"), CPU: 5.6, Network: 0, WorkLoad: 1e-07},
			`{"address": "h:1", "shard_id": null, "replica_id": null, "memory": null, "cpu": 5.6, "network": 0.0, "work_load": 1e-07}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeResourceSpec(b) }},
		{"publish meta order", PublishMeta{ShardID: ptr(1), ReplicaID: 2, ModelName: ptr("m"), TotalPublishNum: 1, PType: PublishUnload,
			SubModels: []SubModel{{Name: "ps_1", Path: "/p/1"}, {Name: "entry", Path: "/e"}}},
			`{"shard_id": 1, "replica_id": 2, "model_name": "m", "num_ps": null, "total_publish_num": 1, "sub_models": {"ps_1": "/p/1", "entry": "/e"}, "ptype": 2, "is_spec": false}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializePublishMeta(b) }},
		{"replica meta", ReplicaMeta{Address: ptr("10.0.0.1:8500"), Stat: StateAvailable, ModelName: ptr("m"), ServerType: ptr("ps"), Task: 3, Replica: 1},
			`{"address": "10.0.0.1:8500", "address_ipv6": null, "stat": 30, "model_name": "m", "server_type": "ps", "task": 3, "replica": 1, "archon_address": null, "archon_address_ipv6": null}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeReplicaMeta(b) }},
		{"event", Event{Path: ptr("/x"), Data: []byte("ab"), EType: EventPublish},
			`{"path": "/x", "data": [97, 98], "etype": 3}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeEvent(b) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(tc.rec.Serialize())
			if got != tc.want {
				t.Fatalf("Serialize:\n got %s\nwant %s", got, tc.want)
			}
			back, err := tc.back([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			if again := string(back.Serialize()); again != got {
				t.Fatalf("round trip changed bytes:\n%s\n%s", got, again)
			}
		})
	}
}

func TestDeserializeErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func([]byte) error
		in   string
		kind errkind.Kind
		msg  string
	}{
		{"syntax", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `{"model_name": `, errkind.Value, "Expecting value: line 1 column 16 (char 15)"},
		{"not an object", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `[1]`, errkind.Attribute, "'list' object has no attribute 'items'"},
		{"wrong type", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `{"num_shard": "x"}`, errkind.Type, "ModelMeta.num_shard: want an int or null, got 'x' (str)"},
		{"float for int", func(b []byte) error { _, err := DeserializeReplicaMeta(b); return err }, `{"task": 1.5}`, errkind.Type, "ReplicaMeta.task"},
		{"list item", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `{"spec_replicas": [1, "a"]}`, errkind.Type, "spec_replicas[1]"},
		{"bad ptype", func(b []byte) error { _, err := DeserializePublishMeta(b); return err }, `{"ptype": 7}`, errkind.Value, "7 is not a valid PublishType"},
		{"sub model value", func(b []byte) error { _, err := DeserializePublishMeta(b); return err }, `{"sub_models": {"a": 1}}`, errkind.Type, `sub_models['a']: want a str`},
		{"byte range", func(b []byte) error { _, err := DeserializeEvent(b); return err }, `{"data": [256]}`, errkind.Value, "not a byte value"},
		{"bad utf8", func(b []byte) error { _, err := DeserializeEvent(b); return err }, "{\"path\": \"\xff\"}", errkind.Value, "UTF-8"},
		{"trailing data", func(b []byte) error { _, err := DeserializeEvent(b); return err }, `{} {}`, errkind.Value, "Extra data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fn([]byte(tc.in))
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v (kind %v), want kind %v containing %q", err, errkind.Of(err), tc.kind, tc.msg)
			}
		})
	}
}

func TestDefaultsAndUnknownKeys(t *testing.T) {
	p, err := DeserializePublishMeta([]byte(`{"model_name": "m", "extra": {"deep": [1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.ReplicaID != -1 || p.TotalPublishNum != 1 || p.PType != PublishLoad || p.SubModels != nil || *p.ModelName != "m" {
		t.Fatalf("defaults not applied: %+v", p)
	}
}

func TestAddressFor(t *testing.T) {
	r := ReplicaMeta{Address: ptr("0.0.0.0:1"), AddressIPv6: ptr("[fe80::1]:1"), ArchonAddress: ptr("10.0.0.1:2"), ArchonAddressIPv6: ptr("[::]:2")}
	tests := []struct {
		archon bool
		family string
		want   string
	}{
		{false, IPv4, "[fe80::1]:1"}, {false, IPv6, "[fe80::1]:1"}, {true, IPv4, "10.0.0.1:2"}, {true, IPv6, "10.0.0.1:2"},
	}
	for _, tc := range tests {
		got, err := r.AddressFor(tc.archon, tc.family)
		if err != nil || got == nil || *got != tc.want {
			t.Errorf("AddressFor(%v, %s) = %v, %v; want %s", tc.archon, tc.family, got, err, tc.want)
		}
	}
	if _, err := r.AddressFor(false, "ipx"); errkind.Of(err) != errkind.Precondition {
		t.Errorf("bad family: %v", err)
	}
}

func FuzzDeserialize(f *testing.F) {
	for _, s := range []string{`{}`, `{"model_name": "m", "spec_replicas": [1]}`, `{"sub_models": {"a": "b"}, "ptype": 2}`,
		`{"data": [1, 2], "etype": 4}`, `{"cpu": 1e400}`, `[`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// No input may panic; whatever deserializes must re-serialize to bytes that deserialize again.
		if m, err := DeserializeModelMeta(b); err == nil {
			if _, err := DeserializeModelMeta(m.Serialize()); err != nil {
				t.Fatalf("ModelMeta re-read: %v", err)
			}
		}
		if p, err := DeserializePublishMeta(b); err == nil {
			if _, err := DeserializePublishMeta(p.Serialize()); err != nil {
				t.Fatalf("PublishMeta re-read: %v", err)
			}
		}
		if r, err := DeserializeReplicaMeta(b); err == nil {
			if _, err := DeserializeReplicaMeta(r.Serialize()); err != nil {
				t.Fatalf("ReplicaMeta re-read: %v", err)
			}
		}
		if r, err := DeserializeResourceSpec(b); err == nil {
			_ = r.Serialize()
		}
		if e, err := DeserializeEvent(b); err == nil {
			if _, err := DeserializeEvent(e.Serialize()); err != nil {
				t.Fatalf("Event re-read: %v", err)
			}
		}
	})
}

// TestWrittenBackAsRead: values a Go field holds in another form (None in a field whose default is
// not None, an int in a float field, floats Go's encoding/json cannot read) are written back as the
// reference writes them; Go and Python agents share these nodes.
func TestWrittenBackAsRead(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		decode         func([]byte) (interface{ Serialize() []byte }, error)
	}{
		{"model meta nulls", `{"num_shard": null, "action": null, "spec_replicas": null}`,
			`{"model_name": null, "model_dir": null, "ckpt": null, "num_shard": null, "action": null, "spec_replicas": null}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeModelMeta(b) }},
		{"resource spec ints in float fields", `{"cpu": 2, "network": -0, "work_load": 100000000000000000000}`,
			`{"address": null, "shard_id": null, "replica_id": null, "memory": null, "cpu": 2, "network": 0, "work_load": 100000000000000000000}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeResourceSpec(b) }},
		{"resource spec non-finite floats", `{"cpu": NaN, "network": -Infinity, "work_load": 1e400}`,
			`{"address": null, "shard_id": null, "replica_id": null, "memory": null, "cpu": NaN, "network": -Infinity, "work_load": Infinity}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeResourceSpec(b) }},
		{"publish meta nulls and enum spellings", `{"replica_id": null, "total_publish_num": null, "ptype": null, "is_spec": null}`,
			`{"shard_id": null, "replica_id": null, "model_name": null, "num_ps": null, "total_publish_num": null, "sub_models": null, "ptype": null, "is_spec": null}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializePublishMeta(b) }},
		{"publish meta ptype 2.0", `{"ptype": 2.0}`,
			`{"shard_id": null, "replica_id": -1, "model_name": null, "num_ps": null, "total_publish_num": 1, "sub_models": null, "ptype": 2, "is_spec": false}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializePublishMeta(b) }},
		{"replica meta nulls", `{"stat": null, "task": null, "replica": null}`,
			`{"address": null, "address_ipv6": null, "stat": null, "model_name": null, "server_type": null, "task": null, "replica": null, "archon_address": null, "archon_address_ipv6": null}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeReplicaMeta(b) }},
		{"event nulls", `{"data": null, "etype": null}`, `{"path": null, "data": null, "etype": null}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeEvent(b) }},
		{"repeated key and lone surrogate", `{"model_name": "a", "ckpt": "x\ud800y", "model_name": "b"}`,
			`{"model_name": "b", "model_dir": null, "ckpt": "x\ud800y", "num_shard": -1, "action": "NONE", "spec_replicas": []}`,
			func(b []byte) (interface{ Serialize() []byte }, error) { return DeserializeModelMeta(b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := tc.decode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(rec.Serialize()); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestAssignedFieldsWin: a held value is written back only while the Go field keeps the value
// decoding gave it; once Go code assigns the field, its own value is written.
func TestAssignedFieldsWin(t *testing.T) {
	r, err := DeserializeReplicaMeta([]byte(`{"model_name": "m", "server_type": "ps", "stat": null, "task": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := r.Path("bz", "/"); p != "/bz/service/m/ps:None/-1" {
		t.Fatalf("path with task None: %s", p)
	}
	r.Stat, r.Task = StateAvailable, 3
	want := `{"address": null, "address_ipv6": null, "stat": 30, "model_name": "m", "server_type": "ps", "task": 3, "replica": -1, "archon_address": null, "archon_address_ipv6": null}`
	if got := string(r.Serialize()); got != want {
		t.Fatalf("after assignment:\n got %s\nwant %s", got, want)
	}
	if p, _ := r.Path("bz", "/"); p != "/bz/service/m/ps:3/-1" {
		t.Fatalf("path after assignment: %s", p)
	}
	rs, err := DeserializeResourceSpec([]byte(`{"cpu": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if rs.CPU != 2 {
		t.Fatalf("cpu 2 reads as %v", rs.CPU)
	}
	rs.CPU = 2.5
	if got := string(rs.Serialize()); !strings.Contains(got, `"cpu": 2.5,`) {
		t.Fatalf("assigned cpu: %s", got)
	}
	m, err := DeserializeModelMeta([]byte(`{"spec_replicas": null}`))
	if err != nil {
		t.Fatal(err)
	}
	m.SpecReplicas = append(m.SpecReplicas, 1)
	if got := string(m.Serialize()); !strings.Contains(got, `"spec_replicas": [1]`) {
		t.Fatalf("assigned spec_replicas: %s", got)
	}
}

func TestEmptyStatus(t *testing.T) {
	a, b := EmptyStatus(), EmptyStatus()
	if a == b {
		t.Fatal("EmptyStatus must return a new message each call")
	}
	if a.GetErrorCode() != 0 || a.GetErrorMessage() != "" || proto.Size(a) != 0 {
		t.Fatalf("EmptyStatus is not empty: %v", a)
	}
}
