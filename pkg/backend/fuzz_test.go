package backend

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The backend's fuzz targets: its znode payloads, the node names it splits, and the bzid_info JSON
// it prints. Seeds come from the backends goldens; run one with
//
//	go test ./pkg/backend -run='^$' -fuzz='^FuzzDeployConfigPayload$' -fuzztime=60s

func backendStrings(f *testing.F) []string {
	return fuzzseed.AllStrings(fuzzseed.PythonCases(f, "backends", "agent_service"))
}

func addJSONSeeds(f *testing.F, extra ...string) {
	for _, s := range fuzzseed.Matching(backendStrings(f), func(s string) bool {
		s = strings.TrimSpace(s)
		return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
	}) {
		f.Add([]byte(s))
	}
	for _, s := range append(extra, `{}`, `null`, `[]`, `{"x": {"y": [null]}}`, "{\"grpc\": \"\xff\"}", `{} x`, `1`) {
		f.Add([]byte(s))
	}
}

// checkJSONPayload: a payload decodes or fails with a kind; what is written back decodes to the
// same value and is written the same again.
func checkJSONPayload[T any](t *testing.T, b []byte, decode func([]byte) (T, error), encode func(T) []byte) {
	t.Helper()
	v, err := decode(b)
	if err != nil {
		if errkind.Of(err) == errkind.Unknown {
			t.Fatalf("decode(%q): error without a kind: %v", b, err)
		}
		return
	}
	out := encode(v)
	v2, err := decode(out)
	if err != nil {
		t.Fatalf("decode(%q) = %+v, written %q, which does not decode: %v", b, v, out, err)
	}
	if !reflect.DeepEqual(v, v2) || !bytes.Equal(out, encode(v2)) {
		t.Fatalf("decode(%q) = %+v, written %q, read back %+v", b, v, out, v2)
	}
}

func FuzzDeployConfigPayload(f *testing.F) {
	addJSONSeeds(f, `{"model_base_path": "/x", "version_policy": "latest"}`, `{"model_base_path": null, "extra": 1}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkJSONPayload(t, b, DeserializeSavedModelDeployConfig, SavedModelDeployConfig.Serialize)
	})
}

func FuzzServiceInfoPayload(f *testing.F) {
	addJSONSeeds(f, `{"grpc": "g", "http": null, "archon": "a", "agent": "127.0.0.1:1", "idc": "lf", "debug_info": "{}"}`)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkJSONPayload(t, b, DeserializeContainerServiceInfo, ContainerServiceInfo.Serialize)
	})
}

// FuzzNodeNames: saved model ("model:sub_graph"), container ("cluster:id") and binding
// ("sub_graph:cluster:id") node names split as the reference's split(":") does, fields beyond those
// ignored; a name with too few fields is an error (saved model) or not ok; and a name printed from
// parts without ':' parses back to them.
func FuzzNodeNames(f *testing.F) {
	for _, s := range fuzzseed.Matching(backendStrings(f), func(s string) bool { return strings.Contains(s, ":") && len(s) < 200 }) {
		f.Add(s)
	}
	for _, s := range []string{"m:entry", "m:ps_0:extra", "m", ":", "::", "entry:psm;idc;cluster:c1", "é:\u2028:x", ""} {
		f.Add(s)
	}
	b := &ZKBackend{log: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, name string) {
		parts := strings.Split(name, ":")
		sm, err := ParseSavedModel(name)
		switch {
		case len(parts) < 2:
			if err == nil || errkind.Of(err) != errkind.Value {
				t.Fatalf("ParseSavedModel(%q) = %+v, %v", name, sm, err)
			}
		case err != nil || sm.ModelName != parts[0] || sm.SubGraph != parts[1]:
			t.Fatalf("ParseSavedModel(%q) = %+v, %v", name, sm, err)
		case !strings.HasPrefix(name, sm.String()):
			t.Fatalf("ParseSavedModel(%q) prints as %q", name, sm.String())
		}
		if len(parts) == 2 {
			if again, err := ParseSavedModel(sm.String()); err != nil || again != sm {
				t.Fatalf("%q -> %+v -> %q -> %+v, %v", name, sm, sm.String(), again, err)
			}
		}
		cluster, id, ok := splitContainer(name)
		if ok != (len(parts) >= 2) || (ok && (cluster != parts[0] || id != parts[1])) {
			t.Fatalf("splitContainer(%q) = %q, %q, %v", name, cluster, id, ok)
		}
		if ok && len(parts) == 2 {
			if c := (Container{Cluster: cluster, ID: id}); c.String() != name {
				t.Fatalf("container %q prints as %q", name, c.String())
			}
		}
		sg, c, ok := b.parseBinding("m", name)
		if ok != (len(parts) >= 3) || (ok && (sg != parts[0] || c.Cluster != parts[1] || c.ID != parts[2])) {
			t.Fatalf("parseBinding(%q) = %q, %+v, %v", name, sg, c, ok)
		}
		if ok && len(parts) == 3 && sg+":"+c.String() != name {
			t.Fatalf("binding %q prints as %q", name, sg+":"+c.String())
		}
	})
}

// reservedModelKeys are the keys bzid_info puts next to a model's sub-graphs: a sub-graph of one
// of these names is an error (the reference fails with a TypeError).
var reservedModelKeys = map[string]bool{"sub_graphs_total": true, "sub_graphs_available": true}

// FuzzBzidInfoJSON: the bzid_info JSON is valid, ASCII-only JSON with no key written twice, holds
// exactly what BzidInfo holds, and indents as json.dumps(indent=2) would lay it out.
func FuzzBzidInfoJSON(f *testing.F) {
	f.Add("m", "m2", "entry", `{"model_base_path": "/x"}`, "psm;idc;c", "c1", `{"grpc": "g"}`, "/bz/layouts/l", 2, 1, uint8(0xff))
	f.Add("", "\u00e9", "ps_0", "", "", "", "", "", 0, 0, uint8(0))
	f.Add("m", "m", "sg", "\x00\"\\", "a", "b", "\U0001F600", "l", -1, 5, uint8(0x5a))
	f.Add("m", "m2", "sub_graphs_total", "", "psm;idc;c", "c1", "", "l", 2, 1, uint8(0x05)) // fuzzing found it
	f.Fuzz(func(t *testing.T, m1, m2, sg, cfg, cluster, id, svc, layout string, total, avail int, flags uint8) {
		for _, s := range []string{m1, m2, sg, cfg, cluster, id, svc, layout} {
			if !utf8.ValidString(s) { // ZooKeeper node names and the stored JSON are text
				return
			}
		}
		info := BzidInfo{Models: map[string]ModelInfo{}, Containers: map[string]map[string]ContainerInfo{}, Layouts: map[string][]string{}}
		sub := SubGraphInfo{}
		if flags&1 != 0 {
			sub.DeployConfig = &cfg
		}
		if flags&2 != 0 {
			sub.Bindings = []string{cluster + ":" + id}
		}
		mi := ModelInfo{SubGraphs: map[string]SubGraphInfo{sg: sub}, SubGraphsAvailable: avail}
		if flags&4 != 0 {
			mi.SubGraphsTotal = &total
		}
		info.Models[m1] = mi
		if flags&8 != 0 {
			info.Models[m2] = ModelInfo{SubGraphs: map[string]SubGraphInfo{}}
		}
		ci := ContainerInfo{}
		if flags&16 != 0 {
			ci.ServiceInfo = &svc
		}
		if flags&32 != 0 {
			ci.SavedModels = []string{m1 + ":" + sg}
		}
		if flags&64 != 0 {
			info.Containers[cluster] = map[string]ContainerInfo{id: ci}
		}
		if flags&128 != 0 {
			info.Layouts[layout] = []string{m1 + ":" + sg, m2 + ":" + sg}
		} else {
			info.Layouts[layout] = []string{}
		}
		out, err := json.Marshal(info)
		if reservedModelKeys[sg] {
			if err == nil {
				t.Fatalf("sub-graph %q: no error, JSON %s", sg, out)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range out {
			if c >= 0x80 {
				t.Fatalf("non-ASCII byte in %s", out)
			}
		}
		if err := noDuplicateKeys(json.NewDecoder(bytes.NewReader(out))); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if want := bzidInfoValue(info); !reflect.DeepEqual(got, want) {
			t.Fatalf("JSON %s\nholds %#v\nwant  %#v", out, got, want)
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, out, "", "  "); err != nil {
			t.Fatalf("indent %s: %v", out, err)
		}
	})
}

// bzidInfoValue is what the bzid_info JSON of info decodes to.
func bzidInfoValue(info BzidInfo) any {
	strs := func(l []string) []any {
		out := []any{}
		for _, s := range l {
			out = append(out, s)
		}
		return out
	}
	models := map[string]any{}
	for name, m := range info.Models {
		mv := map[string]any{}
		for sg, s := range m.SubGraphs {
			sv := map[string]any{}
			if s.DeployConfig != nil {
				sv["deploy_config"] = *s.DeployConfig
			}
			if s.Bindings != nil {
				sv["bindings"] = strs(s.Bindings)
			}
			mv[sg] = sv
		}
		if m.SubGraphsTotal != nil {
			mv["sub_graphs_total"] = float64(*m.SubGraphsTotal)
		}
		if m.SubGraphsAvailable > 0 {
			mv["sub_graphs_available"] = float64(m.SubGraphsAvailable)
		}
		models[name] = mv
	}
	containers := map[string]any{}
	for cl, ids := range info.Containers {
		cv := map[string]any{}
		for id, c := range ids {
			v := map[string]any{}
			if c.ServiceInfo != nil {
				v["service_info"] = *c.ServiceInfo
			}
			if c.SavedModels != nil {
				v["saved_models"] = strs(c.SavedModels)
			}
			cv[id] = v
		}
		containers[cl] = cv
	}
	layouts := map[string]any{}
	for l, sms := range info.Layouts {
		layouts[l] = strs(sms)
	}
	return map[string]any{"model_info": models, "container_info": containers, "layout_info": layouts}
}

// noDuplicateKeys reads one JSON value from dec and fails on an object holding a key twice.
func noDuplicateKeys(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key := k.(string)
			if seen[key] {
				return errors.New("key " + key + " written twice")
			}
			seen[key] = true
			if err := noDuplicateKeys(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if err := noDuplicateKeys(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
