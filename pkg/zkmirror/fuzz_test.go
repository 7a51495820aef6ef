package zkmirror

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The mirror's fuzz targets: the payloads it decodes when it stores a node, the node names it
// splits, and its ordered cache under any sequence of changes. Seeds come from the zk_mirror and
// data_def goldens; run one with
//
//	go test ./pkg/zkmirror -run='^$' -fuzz='^FuzzMirrorDecoders$' -fuzztime=60s

func mirrorStrings(f *testing.F) []string {
	return fuzzseed.AllStrings(fuzzseed.PythonCases(f, "zk_mirror", "data_def", "agent_service"))
}

// FuzzMirrorDecoders: what the mirror stores for a payload is the datadef decoder's answer (a value,
// or its error); valueOf hands the value out only when it decoded; clones equal the value and share
// nothing with it, so a caller changing a result cannot change the mirror.
func FuzzMirrorDecoders(f *testing.F) {
	for _, s := range fuzzseed.Matching(mirrorStrings(f), func(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), "{") }) {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{}`, `null`, `{"address": "1.1.1.1:1", "stat": 30, "model_name": "m"}`, `{"shard_id": 1, "cpu": 2}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rv, rerr := datadef.DeserializeReplicaMeta(b)
		e := &entry{data: b, memo: decodeReplica(b)}
		d, ok := valueOf[datadef.ReplicaMeta](e)
		if ok != (rerr == nil) || (ok && !reflect.DeepEqual(d.v, rv)) || (!ok && (d.err == nil || errkind.Of(d.err) != errkind.Of(rerr))) {
			t.Fatalf("replica %q: mirrored %+v, %v; decoder %+v, %v", b, d.v, d.err, rv, rerr)
		}
		if _, isRes := valueOf[datadef.ResourceSpec](e); isRes {
			t.Fatalf("replica %q read as a resource", b)
		}
		if ok {
			c := cloneReplica(d.v)
			if !reflect.DeepEqual(c, d.v) {
				t.Fatalf("clone %+v of %+v", c, d.v)
			}
			for _, p := range []**string{&c.Address, &c.AddressIPv6, &c.ModelName, &c.ServerType, &c.ArchonAddress, &c.ArchonAddressIPv6} {
				if *p != nil {
					**p += "x"
				}
			}
			if !reflect.DeepEqual(d.v, rv) {
				t.Fatalf("changing a clone changed the mirrored value: %+v", d.v)
			}
		}

		sv, serr := datadef.DeserializeResourceSpec(b)
		e = &entry{data: b, memo: decodeResource(b)}
		ds, ok := valueOf[datadef.ResourceSpec](e)
		if ok != (serr == nil) || (ok && !bytesEqual(ds.v.Serialize(), sv.Serialize())) {
			t.Fatalf("resource %q: mirrored %+v, %v; decoder %+v, %v", b, ds.v, ds.err, sv, serr)
		}
		if ok {
			c := cloneResource(ds.v)
			for _, p := range []**int{&c.ShardID, &c.ReplicaID, &c.Memory} {
				if *p != nil {
					**p++
				}
			}
			if c.Address != nil {
				*c.Address += "x"
			}
			if !bytesEqual(ds.v.Serialize(), sv.Serialize()) {
				t.Fatalf("changing a clone changed the mirrored value: %+v", ds.v)
			}
		}

		if p, err := datadef.DeserializePublishMeta(b); err == nil {
			want := p.Serialize()
			c := clonePublish(p)
			for i := range c.SubModels {
				c.SubModels[i].Path += "x"
			}
			for _, q := range []**int{&c.ShardID, &c.NumPS} {
				if *q != nil {
					**q++
				}
			}
			if !bytesEqual(p.Serialize(), want) {
				t.Fatalf("changing a clone changed the publish: %s", p.Serialize())
			}
		}
	})
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// FuzzMirrorNodeNames: a service path relative to the service root splits into model, server type
// and task only when it has exactly the reference's shape, and then the reference's
// replace('/', ':').split(':') gives the same parts; a publish node name gives its model as the
// reference reads it (the third field of "{shard}:{replica}:{model}", the last one of shorter
// names); a server type parses in any case to its lower-case form.
func FuzzMirrorNodeNames(f *testing.F) {
	for _, s := range fuzzseed.Matching(mirrorStrings(f), func(s string) bool { return strings.ContainsAny(s, ":/") && len(s) < 200 }) {
		f.Add(s)
	}
	for _, s := range []string{"m/ps:0/1", "m/ps:0/1/2", "m:x/ps:0/1", "m/ps:0:1/2", "0:1:m", "1:m", "m", "0:1:m:x", "", "PS", "Entry", "dense", "pſ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		model, st, task, ok := splitServicePath(s)
		if ok {
			parts := strings.Split(strings.ReplaceAll(s, "/", ":"), ":")
			if len(parts) != 4 || parts[0] != model || parts[1] != st || parts[2] != task {
				t.Fatalf("splitServicePath(%q) = %q %q %q; the reference splits %q", s, model, st, task, parts)
			}
			if !strings.HasPrefix(s, model+"/"+st+":"+task+"/") {
				t.Fatalf("splitServicePath(%q) = %q %q %q", s, model, st, task)
			}
			if taskType(st+":"+task) != st {
				t.Fatalf("taskType(%q) = %q", st+":"+task, taskType(st+":"+task))
			}
		}

		parts := strings.Split(s, ":")
		want := parts[len(parts)-1]
		if len(parts) >= 3 {
			want = strings.Join(parts[2:], ":") // a model name may hold ':'
		}
		if got := publishModel(s); got != want {
			t.Fatalf("publishModel(%q) = %q, want %q", s, got, want)
		}

		typ, err := ParseServerType(s)
		lower := ServerType(strings.ToLower(s))
		switch {
		case lower.Valid() != (err == nil):
			t.Fatalf("ParseServerType(%q) = %q, %v", s, typ, err)
		case err != nil && errkind.Of(err) != errkind.Value:
			t.Fatalf("ParseServerType(%q): %v", s, err)
		case err == nil && (typ != lower || typ.pathForm() != string(typ) || typ.String() != string(typ)):
			t.Fatalf("ParseServerType(%q) = %q", s, typ)
		}
	})
}

// FuzzMirrorCache: any sequence of sets and deletes leaves the cache in the order a Python dict
// would have (a new key at the end, a changed value in place, a deleted key forgotten); children and
// under see exactly the cached paths below a node, each child once.
func FuzzMirrorCache(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0x81, 3, 1, 0x82, 7})
	f.Add([]byte("\x00\x01\x10\x11\x80\x90\x05"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		// Each op: low 4 bits pick a path, bit 4 a value, bit 7 a delete.
		paths := []string{"/a", "/a/b", "/a/b/c", "/a/bc", "/a/bc/d", "/b", "/a/c", "/", "/a/b/c/d", "/ab", "/a/", "//a", "/a/b/e", "/c/a", "/a/a", "/b/a"}
		c := newCache()
		var order []string
		vals := map[string]string{}
		for _, op := range ops {
			p := paths[op&0xf]
			v := string([]byte{'v', '0' + op>>4&1})
			if op&0x80 != 0 {
				_, had := vals[p]
				if c.del(p) != had {
					t.Fatalf("del(%s) reported %v", p, !had)
				}
				delete(vals, p)
				order = slices.DeleteFunc(order, func(s string) bool { return s == p })
				continue
			}
			old, had := vals[p]
			if changed := c.set(p, []byte(v), nil); changed != (!had || old != v) {
				t.Fatalf("set(%s, %s) reported %v", p, v, changed)
			}
			if !had {
				order = append(order, p)
			}
			vals[p] = v
		}
		if got := c.paths(); !slices.Equal(got, order) || c.len() != len(order) {
			t.Fatalf("paths %q, want %q", got, order)
		}
		for _, parent := range []string{"/a", "/a/b", "", "/b"} {
			var under, kids []string
			seen := map[string]bool{}
			for _, p := range order {
				if rel, ok := strings.CutPrefix(p, parent+"/"); ok && rel != "" {
					under = append(under, rel)
					if k, _, _ := strings.Cut(rel, "/"); !seen[k] {
						seen[k] = true
						kids = append(kids, k)
					}
				}
			}
			var got []string
			c.under(parent, func(rel string, e *entry) {
				if string(e.data) != vals[e.path] {
					t.Fatalf("%s holds %q, want %q", e.path, e.data, vals[e.path])
				}
				got = append(got, rel)
			})
			if !slices.Equal(got, under) || !slices.Equal(c.children(parent), kids) {
				t.Fatalf("under(%q) %q children %q, want %q %q", parent, got, c.children(parent), under, kids)
			}
		}
	})
}
