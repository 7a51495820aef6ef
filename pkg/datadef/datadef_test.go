package datadef

import (
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
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
			SubModels: []SubModel{{"ps_1", "/p/1"}, {"entry", "/e"}}},
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
		{"syntax", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `{"model_name": `, errkind.Value, "invalid JSON"},
		{"not an object", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `[1]`, errkind.Type, "want a JSON object"},
		{"wrong type", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `{"num_shard": "x"}`, errkind.Type, "ModelMeta.num_shard: want an integer"},
		{"float for int", func(b []byte) error { _, err := DeserializeReplicaMeta(b); return err }, `{"task": 1.5}`, errkind.Type, "ReplicaMeta.task"},
		{"list item", func(b []byte) error { _, err := DeserializeModelMeta(b); return err }, `{"spec_replicas": [1, "a"]}`, errkind.Type, "spec_replicas[1]"},
		{"bad ptype", func(b []byte) error { _, err := DeserializePublishMeta(b); return err }, `{"ptype": 7}`, errkind.Value, "7 is not a valid PublishType"},
		{"sub model value", func(b []byte) error { _, err := DeserializePublishMeta(b); return err }, `{"sub_models": {"a": 1}}`, errkind.Type, `sub_models["a"]`},
		{"byte range", func(b []byte) error { _, err := DeserializeEvent(b); return err }, `{"data": [256]}`, errkind.Value, "not a byte value"},
		{"bad utf8", func(b []byte) error { _, err := DeserializeEvent(b); return err }, "{\"path\": \"\xff\"}", errkind.Value, "UTF-8"},
		{"trailing data", func(b []byte) error { _, err := DeserializeEvent(b); return err }, `{} {}`, errkind.Value, "extra data"},
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
