package backend

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// MarshalJSON writes the reference's bzid_info dict with the keys in the order Python keeps them:
// "model_info", "container_info", "layout_info"; each model's keys sorted (sub-graphs,
// "sub_graphs_available", "sub_graphs_total"); a sub-graph's "deploy_config" before its "bindings";
// a container's "service_info" before its "saved_models". Models, clusters and layouts (in
// ZooKeeper's child order in the reference, which a real server does not define) are sorted, as are
// containers within a cluster. Strings are escaped as json.dumps does (ASCII only), so
// json.Indent(out, "", "  ") gives exactly what the reference's json.dumps(info, indent=2) prints.
// countKeys are the keys bzid_info writes next to a model's sub-graphs.
var countKeys = []string{"sub_graphs_total", "sub_graphs_available"}

func (info BzidInfo) MarshalJSON() ([]byte, error) {
	var w jsonWriter
	w.open('{')
	w.key("model_info")
	w.open('{')
	for _, name := range slices.Sorted(maps.Keys(info.Models)) {
		m := info.Models[name]
		w.key(name)
		for _, k := range countKeys {
			if _, clash := m.SubGraphs[k]; clash {
				// The reference fails too (a TypeError adding to the dict it finds there).
				return nil, fmt.Errorf("bzid_info: model %q: a sub-graph named %q clashes with the count bzid_info writes under that key", name, k)
			}
		}
		keys := slices.Collect(maps.Keys(m.SubGraphs)) // sorted below, with the counts
		if m.SubGraphsTotal != nil {
			keys = append(keys, "sub_graphs_total")
		}
		if m.SubGraphsAvailable > 0 {
			keys = append(keys, "sub_graphs_available")
		}
		slices.Sort(keys)
		w.open('{')
		for _, k := range keys {
			w.key(k)
			switch sg, isSub := m.SubGraphs[k]; {
			case isSub:
				w.open('{')
				if sg.DeployConfig != nil {
					w.key("deploy_config")
					w.str(*sg.DeployConfig)
				}
				if sg.Bindings != nil {
					w.key("bindings")
					w.strs(sg.Bindings)
				}
				w.close('}')
			case k == "sub_graphs_total":
				w.raw(strconv.Itoa(*m.SubGraphsTotal))
			default:
				w.raw(strconv.Itoa(m.SubGraphsAvailable))
			}
		}
		w.close('}')
	}
	w.close('}')
	w.key("container_info")
	w.open('{')
	for _, cluster := range slices.Sorted(maps.Keys(info.Containers)) {
		w.key(cluster)
		w.open('{')
		for _, id := range slices.Sorted(maps.Keys(info.Containers[cluster])) {
			c := info.Containers[cluster][id]
			w.key(id)
			w.open('{')
			if c.ServiceInfo != nil {
				w.key("service_info")
				w.str(*c.ServiceInfo)
			}
			if c.SavedModels != nil {
				w.key("saved_models")
				w.strs(c.SavedModels)
			}
			w.close('}')
		}
		w.close('}')
	}
	w.close('}')
	w.key("layout_info")
	w.open('{')
	for _, l := range slices.Sorted(maps.Keys(info.Layouts)) {
		w.key(l)
		w.strs(info.Layouts[l])
	}
	w.close('}')
	w.close('}')
	return w.b.Bytes(), nil
}

// jsonWriter writes compact JSON with Python's string escapes, in the order it is told.
type jsonWriter struct {
	b        bytes.Buffer
	first    []bool // per open object or array: nothing written in it yet
	afterKey bool   // a member's key was written: its value needs no separator
}

// sep writes the separator before the next member or element of the innermost container.
func (w *jsonWriter) sep() {
	if n := len(w.first); n > 0 {
		if !w.first[n-1] {
			w.b.WriteByte(',')
		}
		w.first[n-1] = false
	}
}

func (w *jsonWriter) beforeValue() {
	if w.afterKey {
		w.afterKey = false
		return
	}
	w.sep()
}

func (w *jsonWriter) open(c byte) {
	w.beforeValue()
	w.b.WriteByte(c)
	w.first = append(w.first, true)
}

func (w *jsonWriter) close(c byte) {
	w.b.WriteByte(c)
	w.first = w.first[:len(w.first)-1]
}

func (w *jsonWriter) key(k string) {
	w.sep()
	w.b.WriteString(pyfmt.JSONString(k))
	w.b.WriteByte(':')
	w.afterKey = true
}

func (w *jsonWriter) str(s string) {
	w.beforeValue()
	w.b.WriteString(pyfmt.JSONString(s))
}

func (w *jsonWriter) raw(s string) {
	w.beforeValue()
	w.b.WriteString(s)
}

func (w *jsonWriter) strs(list []string) {
	w.open('[')
	for _, s := range list {
		w.str(s)
	}
	w.close(']')
}
