package replica

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// FuzzReplicaNode: a replica node path splits into its task path and the reference's key
// str(int(name)), which is canonical (it is its own key) and names the same replica as the node; a
// node whose payload decodes is cached under that key with its metadata, its task parsed as
// ZKPath parses it. Seeds are the replica_manager goldens' paths and payloads; run with
//
//	go test ./pkg/replica -run='^$' -fuzz='^FuzzReplicaNode$' -fuzztime=60s
func FuzzReplicaNode(f *testing.F) {
	cases := fuzzseed.PythonCases(f, "replica_manager", "agent_service")
	strs := fuzzseed.AllStrings(cases)
	var payloads []string
	for _, c := range cases {
		seed, _ := c.Input["seed"].([]any)
		for _, s := range seed {
			if pair, ok := s.([]any); ok && len(pair) == 2 {
				if m, ok := pair[1].(map[string]any); ok {
					payloads = append(payloads, datadefJSON(m))
				}
			}
		}
	}
	payloads = append(payloads, `{}`, `null`, `{"stat": 30, "address": "127.0.0.1:1"}`, `{"stat": "x"}`)
	paths := fuzzseed.Matching(strs, func(s string) bool { return strings.HasPrefix(s, "/") && len(s) < 200 })
	paths = append(paths, "/bz/service/m/ps:0/01", "/bz/service/m/ps:0/\u0661", "/bz/service/m/ps:0/ 1_0 ", "/a/x", "/x", "x/1", "/1")
	for i, p := range paths {
		f.Add(p, []byte(payloads[i%len(payloads)]))
	}
	f.Fuzz(func(t *testing.T, path string, payload []byte) {
		task, key, ok := splitReplicaPath(path)
		i := strings.LastIndexByte(path, '/')
		n, perr := int64(0), error(nil)
		if i > 0 {
			n, perr = pyint.Parse(path[i+1:])
		}
		if ok != (i > 0 && perr == nil) {
			t.Fatalf("splitReplicaPath(%q) ok = %v", path, ok)
		}
		if !ok {
			return
		}
		if task != path[:i] || key != strconv.FormatInt(n, 10) {
			t.Fatalf("splitReplicaPath(%q) = %q, %q", path, task, key)
		}
		if again, ok := replicaKey(key); !ok || again != key {
			t.Fatalf("key %q of %q is not canonical: %q %v", key, path, again, ok)
		}
		meta, err := datadef.DeserializeReplicaMeta(payload)
		if err != nil {
			return
		}
		c := newCache()
		c.put(task, key, meta, 5)
		r, ok := c.get(task, key)
		if !ok || !reflect.DeepEqual(r.meta, meta) || r.czxid != 5 {
			t.Fatalf("cached %+v %v", r, ok)
		}
		ts := c.ordered()
		if len(ts) != 1 || ts[0].path != task || !reflect.DeepEqual(ts[0].zkPath, agentconf.ParseZKPath(task)) {
			t.Fatalf("tasks %+v", ts)
		}
		c.markUnknown(task, key)
		if r, _ := c.get(task, key); r.meta.Stat != datadef.StateUnknown {
			t.Fatalf("markUnknown left stat %v", r.meta.Stat)
		}
		c.remove(task, key)
		if len(c.ordered()) != 0 {
			t.Fatalf("task left after its last replica: %+v", c.ordered())
		}
	})
}

// datadefJSON writes a golden's ReplicaMeta fields as the node's JSON.
func datadefJSON(m map[string]any) string {
	var b strings.Builder
	b.WriteString("{")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(k) + ": ")
		switch v := m[k].(type) {
		case string:
			b.WriteString(strconv.Quote(v))
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		case nil:
			b.WriteString("null")
		default:
			b.WriteString(`"?"`)
		}
	}
	return b.String() + "}"
}

// FuzzReplicaCache: after any sequence of puts, stat changes and removes (node names that differ but
// are the same integer name one replica), the cache lists the tasks and replicas a simple model
// lists: a task while it has replicas, ordered by the smallest creation zxid put since it appeared,
// its replicas oldest first, a replica named by two nodes holding the newer node's.
func FuzzReplicaCache(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0x41, 0x83, 0x12, 0xc0, 5})
	f.Add([]byte("\x00\x10\x20\x30\x80\x90\xa0\xb0"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		tasks := []string{"/bz/service/m/ps:0", "/bz/service/m/ps:1", "/bz/service/m/lf:c/ps:0", "/bz/service/m/entry:0"}
		names := []string{"0", "1", "01", "+1", " 2 ", "\u0663", "x", "-0"}
		type rep struct {
			stat  datadef.ModelState
			czxid int64
		}
		type mtask struct {
			order int64
			reps  map[string]rep
		}
		model := map[string]*mtask{}
		c := newCache()
		for i, op := range ops {
			task := tasks[op&3]
			key, ok := replicaKey(names[op>>2&7])
			if !ok {
				continue
			}
			czxid := int64(len(ops) - i) // later ops get smaller zxids too: order must follow zxids, not calls
			switch op >> 5 & 3 {
			case 0, 1:
				meta := datadef.NewReplicaMeta()
				meta.Stat = datadef.StateAvailable
				c.put(task, key, meta, czxid)
				mt := model[task]
				if mt == nil {
					mt = &mtask{order: czxid, reps: map[string]rep{}}
					model[task] = mt
				}
				mt.order = min(mt.order, czxid)
				// An older node naming a cached replica (1 beside 01) leaves the newer one.
				if r, ok := mt.reps[key]; !ok || czxid >= r.czxid {
					mt.reps[key] = rep{datadef.StateAvailable, czxid}
				}
			case 2:
				c.markUnknown(task, key)
				if mt := model[task]; mt != nil {
					if r, ok := mt.reps[key]; ok {
						r.stat = datadef.StateUnknown
						mt.reps[key] = r
					}
				}
			case 3:
				c.remove(task, key)
				if mt := model[task]; mt != nil {
					delete(mt.reps, key)
					if len(mt.reps) == 0 {
						delete(model, task)
					}
				}
			}
		}
		var want []string
		for task := range model {
			want = append(want, task)
		}
		slices.SortFunc(want, func(a, b string) int {
			if model[a].order != model[b].order {
				return int(model[a].order - model[b].order)
			}
			return strings.Compare(a, b)
		})
		got := c.ordered()
		if len(got) != len(want) {
			t.Fatalf("%d tasks, want %d", len(got), len(want))
		}
		for i, te := range got {
			mt := model[want[i]]
			if te.path != want[i] || te.order != mt.order || len(te.replicas) != len(mt.reps) {
				t.Fatalf("task %d: %s order %d, want %s order %d", i, te.path, te.order, want[i], mt.order)
			}
			var last *keyedReplica
			for _, r := range te.ordered() {
				m, ok := mt.reps[r.key]
				if !ok || m.czxid != r.czxid || m.stat != r.meta.Stat {
					t.Fatalf("%s/%s: %+v, model %+v %v", te.path, r.key, r.replicaEntry, m, ok)
				}
				if last != nil && (last.czxid > r.czxid || (last.czxid == r.czxid && last.key >= r.key)) {
					t.Fatalf("%s: replicas out of order", te.path)
				}
				last = &r
			}
		}
	})
}
