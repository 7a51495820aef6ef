package discovery_test

import (
	"maps"
	"testing"

	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/errkind"
)

const (
	withChief = `{"cluster": {"chief": ["c0:7000"], "ps": ["p0:6000", "p1:6001"], "worker": ["w0:7001", "w1:7002"],
	  "evaluator": ["e0:8000"]}, "task": {"type": "%s", "index": %s}}`
	noChief = `{"cluster": {"ps": ["p0:6000"], "worker": ["w0:7001", "w1:7002", "w2:7003"]}, "task": {"type": "%s", "index": %s}}`
)

func tfc(t *testing.T, format, typ, index string) *discovery.TFConfig {
	t.Helper()
	d, err := discovery.NewTFConfig(sprintf(format, typ, index))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTFConfigTask(t *testing.T) {
	tests := []struct {
		name, config, typ, index string
		serverType               string
		wantIndex                int
		addr                     string
		indexKind, addrKind      errkind.Kind
	}{
		{name: "chief is worker 0", config: withChief, typ: "chief", index: "0", serverType: "worker", wantIndex: 0, addr: "c0:7000"},
		{name: "worker shifted by the chief", config: withChief, typ: "worker", index: "0", serverType: "worker", wantIndex: 1, addr: "w0:7001"},
		{name: "ps unshifted", config: withChief, typ: "ps", index: "1", serverType: "ps", wantIndex: 1, addr: "p1:6001"},
		{name: "evaluator unshifted", config: withChief, typ: "evaluator", index: "0", serverType: "evaluator", wantIndex: 0, addr: "e0:8000"},
		{name: "worker without chief", config: noChief, typ: "worker", index: "2", serverType: "worker", wantIndex: 2, addr: "w2:7003"},
		{name: "index out of range", config: noChief, typ: "worker", index: "5", serverType: "worker", wantIndex: 5, addrKind: errkind.NotFound},
		{name: "negative index", config: noChief, typ: "worker", index: "-1", serverType: "worker", wantIndex: -1, addrKind: errkind.NotFound},
		{name: "string index", config: withChief, typ: "worker", index: `"1"`, serverType: "worker", indexKind: errkind.Type, addrKind: errkind.Type},
		{name: "string index without chief", config: noChief, typ: "worker", index: `"1"`, serverType: "worker", indexKind: errkind.Type, addrKind: errkind.Type},
		{name: "unknown type", config: noChief, typ: "dsworker", index: "0", serverType: "dsworker", wantIndex: 0, addrKind: errkind.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tfc(t, tc.config, tc.typ, tc.index)
			if got, err := d.ServerType(); err != nil || got != tc.serverType {
				t.Errorf("ServerType = %q, %v; want %q", got, err, tc.serverType)
			}
			idx, err := d.Index()
			if tc.indexKind != errkind.Unknown {
				if errkind.Of(err) != tc.indexKind {
					t.Errorf("Index = %d, %v; want an error of kind %v", idx, err, tc.indexKind)
				}
			} else if err != nil || idx != tc.wantIndex {
				t.Errorf("Index = %d, %v; want %d", idx, err, tc.wantIndex)
			}
			addr, err := d.Addr()
			if tc.addrKind != errkind.Unknown {
				if errkind.Of(err) != tc.addrKind {
					t.Errorf("Addr = %q, %v; want an error of kind %v", addr, err, tc.addrKind)
				}
			} else if err != nil || addr != tc.addr {
				t.Errorf("Addr = %q, %v; want %q", addr, err, tc.addr)
			}
		})
	}
}

func TestTFConfigQuery(t *testing.T) {
	tests := []struct {
		name, config, query string
		want                map[int]string
		kind                errkind.Kind
	}{
		{"worker: chief first", sprintf(withChief, "ps", "0"), "worker", map[int]string{0: "c0:7000", 1: "w0:7001", 2: "w1:7002"}, 0},
		{"worker without chief", sprintf(noChief, "ps", "0"), "worker", map[int]string{0: "w0:7001", 1: "w1:7002", 2: "w2:7003"}, 0},
		{"ps", sprintf(withChief, "ps", "0"), "ps", map[int]string{0: "p0:6000", 1: "p1:6001"}, 0},
		{"empty ps", `{"cluster": {"ps": [], "worker": []}}`, "ps", map[int]string{}, 0},
		{"chief is not a server type", sprintf(withChief, "ps", "0"), "chief", nil, errkind.Value},
		{"unknown name before the cluster is read", `{"task": {}}`, "dsworker", nil, errkind.Value},
		{"missing ps", `{"cluster": {"worker": ["w0:1"]}}`, "ps", nil, errkind.NotFound},
		{"missing cluster", `{"task": {}}`, "worker", nil, errkind.NotFound},
		{"ps not a list", `{"cluster": {"ps": "p0:1"}}`, "ps", nil, errkind.Type},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := discovery.NewTFConfig(tc.config)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Query(tctx(t), tc.query)
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("Query(%s) = %v, %v; want an error of kind %v", tc.query, got, err, tc.kind)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) || got == nil {
				t.Fatalf("Query(%s) = %v, %v; want %v", tc.query, got, err, tc.want)
			}
		})
	}
}

func TestTFConfigMalformed(t *testing.T) {
	// Text json.loads rejects is its ValueError; JSON that is not an object (or a part that is not)
	// is the TypeError of indexing it with a key.
	for _, tc := range []struct {
		text string
		kind errkind.Kind
	}{
		{"", errkind.Value}, {"{", errkind.Value}, {"{'cluster': {}}", errkind.Value},
		{"[]", errkind.Type}, {"[1, 2]", errkind.Type}, {`"cluster"`, errkind.Type}, {"null", errkind.Type}, {"7", errkind.Type},
		{`{"cluster": []}`, errkind.Type}, {`{"cluster": null}`, errkind.Type}, {`{"task": "worker"}`, errkind.Type},
	} {
		if _, err := discovery.NewTFConfig(tc.text); errkind.Of(err) != tc.kind {
			t.Errorf("NewTFConfig(%q) = %v; want an error of kind %v", tc.text, err, tc.kind)
		}
	}
	d, err := discovery.NewTFConfig(`{"cluster": {"worker": ["w:1"]}, "task": {"index": 0}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ServerType(); errkind.Of(err) != errkind.NotFound {
		t.Errorf("ServerType of a task without type: %v, want kind NotFound", err)
	}
}
