package datadef

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The znode payload decoders' fuzz targets, one per dataclass, seeded from the data_def goldens
// (what the reference read and wrote) and from the payloads of the ZooKeeper scenarios; run one with
//
//	go test ./pkg/datadef -run='^$' -fuzz='^FuzzModelMetaPayload$' -fuzztime=60s

func addPayloadSeeds(f *testing.F, extra ...string) {
	cases := fuzzseed.PythonCases(f, "data_def", "zk_mirror", "replica_manager", "agent_service")
	for _, s := range fuzzseed.Matching(fuzzseed.AllStrings(cases), func(s string) bool {
		s = strings.TrimSpace(s)
		return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
	}) {
		f.Add([]byte(s))
	}
	for _, s := range append(extra, `{}`, `null`, `[]`, `{"x": {"y": [null]}}`, "{\"a\": \"\xff\"}", `{} x`, `{"num_shard": 2.0}`) {
		f.Add([]byte(s))
	}
}

// checkPayload: a payload decodes to a value or to an error with a kind (never a panic); a decoded
// value's bytes decode to the same value, and writing that gives the same bytes again (the bytes
// an agent writes back are a fixed point, whatever it read).
func checkPayload[T any](t *testing.T, b []byte, decode func([]byte) (T, error), encode func(T) []byte) T {
	t.Helper()
	v, err := decode(b)
	if err != nil {
		if errkind.Of(err) == errkind.Unknown {
			t.Fatalf("decode(%q): error without a kind: %v", b, err)
		}
		return v
	}
	out := encode(v)
	v2, err := decode(out)
	if err != nil {
		t.Fatalf("decode(%q) = %+v, written %q, which does not decode: %v", b, v, out, err)
	}
	if out2 := encode(v2); !bytes.Equal(out, out2) {
		t.Fatalf("decode(%q) written %q, read back and written %q", b, out, out2)
	}
	// NaN is the one value not equal to itself (ResourceSpec floats may hold it).
	if !bytes.Contains(out, []byte("NaN")) && !reflect.DeepEqual(v, v2) {
		t.Fatalf("decode(%q) = %+v, written %q, read back %+v", b, v, out, v2)
	}
	return v
}

func FuzzModelMetaPayload(f *testing.F) {
	addPayloadSeeds(f, `{"model_name": "m", "num_shard": 3, "spec_replicas": [1, -2]}`, `{"num_shard": null}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		m := checkPayload(t, b, DeserializeModelMeta, ModelMeta.Serialize)
		_, _ = m.Path("/base")
	})
}

func FuzzResourceSpecPayload(f *testing.F) {
	addPayloadSeeds(f, `{"cpu": 2, "network": -0.0, "work_load": 1e300}`, `{"cpu": NaN}`, `{"memory": 9223372036854775808}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := checkPayload(t, b, DeserializeResourceSpec, ResourceSpec.Serialize)
		_ = r.Path("/base")
	})
}

func FuzzPublishMetaPayload(f *testing.F) {
	addPayloadSeeds(f, `{"sub_models": {"ps_0": "a", "entry": "b", "ps_0": "c"}, "ptype": 2}`, `{"sub_models": {}}`, `{"ptype": 7}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		p := checkPayload(t, b, DeserializePublishMeta, PublishMeta.Serialize)
		_ = p.Path("/base")
	})
}

func FuzzReplicaMetaPayload(f *testing.F) {
	addPayloadSeeds(f, `{"address": "0.0.0.0:1", "address_ipv6": "[::1]:2", "stat": 30}`, `{"stat": -1}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := checkPayload(t, b, DeserializeReplicaMeta, ReplicaMeta.Serialize)
		_, _ = r.Path("bz", "/")
		for _, archon := range []bool{false, true} {
			for _, fam := range []string{IPv4, IPv6} {
				if _, err := r.AddressFor(archon, fam); err != nil {
					t.Fatalf("AddressFor(%v, %s): %v", archon, fam, err)
				}
			}
		}
	})
}

func FuzzEventPayload(f *testing.F) {
	addPayloadSeeds(f, `{"path": "/p", "data": [0, 255], "etype": 4}`, `{"data": [256]}`, `{"data": "abc"}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkPayload(t, b, DeserializeEvent, Event.Serialize)
	})
}
