package replica

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

const (
	avail   = datadef.StateAvailable
	loading = datadef.StateLoading
	unknown = datadef.StateUnknown
)

var (
	psType    = agentpb.ServerType_PS
	entryType = agentpb.ServerType_ENTRY
	denseType = agentpb.ServerType_DENSE
)

// summary renders the cache as task -> "key=STAT@address", in listing order.
func summary(w *Watcher) map[string][]string {
	out := map[string][]string{}
	for _, t := range w.Snapshot() {
		for _, r := range t.Replicas {
			addr := ""
			if r.Meta.Address != nil {
				addr = *r.Meta.Address
			}
			out[t.Path] = append(out[t.Path], fmt.Sprintf("%s=%s@%s", r.Key, r.Meta.Stat, addr))
		}
	}
	return out
}

func watcherConf(t testing.TB, dcAware bool) *agentconf.AgentConfig {
	return newConf(t, map[string]string{"MY_HOST_IP": "10.1.2.3", "TCE_INTERNAL_IDC": "LF", "TCE_LOGICAL_CLUSTER": "c1"},
		func(f *utilsspec.AgentConfig) {
			f.DeployType, f.NumPS, f.DCAware = ptr("ps"), 3, dcAware
		})
}

func startWatcher(t testing.TB, c zk.Client, conf *agentconf.AgentConfig, opts WatcherOptions) *Watcher {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = -1
	}
	opts.Logger = quiet
	w, err := NewWatcher(c, conf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// TestWatcherLayouts: the initial load under both layouts, the cache keys, the listing order
// (creation order, whatever the names' order) and the location filters.
func TestWatcherLayouts(t *testing.T) {
	leakcheck.Check(t)
	type node struct {
		path string
		m    datadef.ReplicaMeta
	}
	tests := []struct {
		name    string
		dcAware bool
		nodes   []node
		want    map[string][]string
		all     map[string][]string // GetAllReplicas(PS, nil)
		allHere map[string][]string // GetAllReplicas(PS, conf's location)
		ps0     []string            // GetReplicas(PS, 0, nil)
		ps0Here []string            // GetReplicas(PS, 0, conf's location)
	}{
		{
			name: "flat",
			nodes: []node{
				{"/bz/service/mdl/ps:1/00000000003", meta("a:1", avail)},
				{"/bz/service/mdl/ps:0/9", meta("b:1", avail)},
				{"/bz/service/mdl/ps:0/2", meta("c:1", loading)},
				{"/bz/service/mdl/ps:0/00000000004", meta("d:1", avail)},
				{"/bz/service/mdl/entry:0/00000000001", meta("e:1", avail)},
				{"/bz/service/mdl/ps:0/bogus", meta("x:1", avail)},
			},
			want: map[string][]string{
				"/bz/service/mdl/ps:1":    {"3=AVAILABLE@a:1"},
				"/bz/service/mdl/ps:0":    {"9=AVAILABLE@b:1", "2=LOADING@c:1", "4=AVAILABLE@d:1"},
				"/bz/service/mdl/entry:0": {"1=AVAILABLE@e:1"},
			},
			all:     map[string][]string{"ps:0": {"b:1", "d:1"}, "ps:1": {"a:1"}},
			allHere: map[string][]string{"ps:0": {"b:1", "d:1"}, "ps:1": {"a:1"}},
			ps0:     []string{"b:1", "d:1"},
			ps0Here: []string{"b:1", "d:1"},
		},
		{
			name:    "dc aware",
			dcAware: true,
			nodes: []node{
				{"/bz/service/mdl/lf:c1/ps:0/1", meta("a:1", avail)},
				{"/bz/service/mdl/hl:c1/ps:0/1", meta("b:1", avail)},
				{"/bz/service/mdl/lf:c1/ps:0/0", meta("c:1", avail)},
				{"/bz/service/mdl/lf:c1/ps:2/0", meta("d:1", loading)},
			},
			want: map[string][]string{
				"/bz/service/mdl/lf:c1/ps:0": {"1=AVAILABLE@a:1", "0=AVAILABLE@c:1"},
				"/bz/service/mdl/hl:c1/ps:0": {"1=AVAILABLE@b:1"},
				"/bz/service/mdl/lf:c1/ps:2": {"0=LOADING@d:1"},
			},
			all:     map[string][]string{"lf:c1/ps:0": {"a:1", "c:1"}, "hl:c1/ps:0": {"b:1"}, "lf:c1/ps:2": {}},
			allHere: map[string][]string{"lf:c1/ps:0": {"a:1", "c:1"}, "lf:c1/ps:2": {}},
			ps0:     []string{"a:1", "c:1", "b:1"}, // lf's task was created first
			ps0Here: []string{"a:1", "c:1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := zkfake.NewServer()
			writer, client := srv.Client(), srv.Client()
			defer writer.Close()
			defer client.Close()
			for _, n := range tc.nodes {
				put(t, writer, n.path, n.m)
			}
			conf := watcherConf(t, tc.dcAware)
			w := startWatcher(t, client, conf, WatcherOptions{})
			if got := summary(w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cache %v, want %v", got, tc.want)
			}
			here := ConfDC(conf)
			if here == nil || *here != (DC{"lf", "c1"}) {
				t.Fatalf("ConfDC = %v", here)
			}
			if got := w.GetAllReplicas(psType, nil); !reflect.DeepEqual(got, tc.all) {
				t.Errorf("GetAllReplicas(PS) = %v, want %v", got, tc.all)
			}
			if got := w.GetAllReplicas(psType, here); !reflect.DeepEqual(got, tc.allHere) {
				t.Errorf("GetAllReplicas(PS, here) = %v, want %v", got, tc.allHere)
			}
			if got := w.GetReplicas(psType, 0, nil); !reflect.DeepEqual(got, tc.ps0) {
				t.Errorf("GetReplicas(PS, 0) = %v, want %v", got, tc.ps0)
			}
			if got := w.GetReplicas(psType, 0, here); !reflect.DeepEqual(got, tc.ps0Here) {
				t.Errorf("GetReplicas(PS, 0, here) = %v, want %v", got, tc.ps0Here)
			}
			if got := w.GetAllReplicas(denseType, nil); len(got) != 0 {
				t.Errorf("GetAllReplicas(DENSE) = %v, want none", got)
			}
		})
	}
}

// TestWatcherFollowsChanges: each change made by another session reaches the cache (the
// reference's data_watch and children watch semantics).
func TestWatcherFollowsChanges(t *testing.T) {
	leakcheck.Check(t)
	const p = "/bz/service/mdl"
	tests := []struct {
		name    string
		dcAware bool
		seed    map[string]string // path -> payload ("" for empty)
		change  func(t *testing.T, c zk.Client)
		want    map[string][]string
	}{
		{
			name: "stat changes", seed: map[string]string{p + "/ps:0/1": "a:1/LOADING"},
			change: func(t *testing.T, c zk.Client) { put(t, c, p+"/ps:0/1", meta("a:1", avail)) },
			want:   map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1"}},
		},
		{
			name: "a new replica", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) { put(t, c, p+"/ps:0/00000000002", meta("b:1", avail)) },
			want:   map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1", "2=AVAILABLE@b:1"}},
		},
		{
			name: "a new task", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) { put(t, c, p+"/dense:0/0", meta("d:1", avail)) },
			want:   map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1"}, p + "/dense:0": {"0=AVAILABLE@d:1"}},
		},
		{
			name: "a new location", dcAware: true, seed: map[string]string{p + "/lf:c1/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) { put(t, c, p+"/hl:c2/ps:0/1", meta("h:1", avail)) },
			want:   map[string][]string{p + "/lf:c1/ps:0": {"1=AVAILABLE@a:1"}, p + "/hl:c2/ps:0": {"1=AVAILABLE@h:1"}},
		},
		{
			name: "the last replica goes, and its task", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE", p + "/ps:1/1": "b:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) { del(t, c, p+"/ps:0/1") },
			want:   map[string][]string{p + "/ps:1": {"1=AVAILABLE@b:1"}},
		},
		{
			name: "an empty payload makes a cached replica UNKNOWN", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) {
				if _, err := c.Set(tctx(t), p+"/ps:0/1", nil, zk.AnyVersion); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string][]string{p + "/ps:0": {"1=UNKNOWN@a:1"}},
		},
		{
			name: "an unreadable payload makes a cached replica UNKNOWN", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) {
				if _, err := c.Set(tctx(t), p+"/ps:0/1", []byte("{not json"), zk.AnyVersion); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string][]string{p + "/ps:0": {"1=UNKNOWN@a:1"}},
		},
		{
			name: "an empty payload of a new node is ignored", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) {
				if _, err := c.Create(tctx(t), p+"/ps:0/2", nil, zk.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1"}},
		},
		{
			name: "names that are not numbers are not replicas", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) { put(t, c, p+"/ps:0/lock", meta("x:1", avail)) },
			want:   map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1"}},
		},
		{
			name: "deleted then created again", seed: map[string]string{p + "/ps:0/1": "a:1/AVAILABLE", p + "/ps:0/2": "b:1/AVAILABLE"},
			change: func(t *testing.T, c zk.Client) {
				del(t, c, p+"/ps:0/1")
				put(t, c, p+"/ps:0/1", meta("a:2", loading))
				put(t, c, p+"/ps:0/1", meta("a:2", avail))
			},
			want: map[string][]string{p + "/ps:0": {"2=AVAILABLE@b:1", "1=AVAILABLE@a:2"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := zkfake.NewServer()
			writer, client := srv.Client(), srv.Client()
			defer writer.Close()
			defer client.Close()
			for path, payload := range tc.seed {
				addr, stat, _ := strings.Cut(payload, "/")
				st := avail
				if stat == "LOADING" {
					st = loading
				}
				put(t, writer, path, meta(addr, st))
			}
			w := startWatcher(t, client, watcherConf(t, tc.dcAware), WatcherOptions{})
			tc.change(t, writer)
			// zkfake calls watches before the change returns: the cache is current now.
			if got := summary(w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cache %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWatcherNoneDelivery: a NONE delivery (the state read again on a new session) is taken as the
// current state; the reference marked the replica UNKNOWN until the next poll.
func TestWatcherNoneDelivery(t *testing.T) {
	const path = "/bz/service/mdl/ps:0/1"
	srv := zkfake.NewServer()
	writer := srv.Client()
	defer writer.Close()
	h := newHookClient(srv.Client())
	defer h.Close()
	put(t, writer, path, meta("a:1", loading))
	w := startWatcher(t, h, watcherConf(t, false), WatcherOptions{})

	data, st, err := writer.Get(tctx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	fresh := meta("a:1", avail)
	if !h.deliver(path, fresh.Serialize(), &st, &zk.WatchEvent{Type: zk.EventNone, Path: path}) {
		t.Fatal("the watch stopped on NONE")
	}
	if got := w.GetReplicas(psType, 0, nil); !reflect.DeepEqual(got, []string{"a:1"}) {
		t.Errorf("after NONE with AVAILABLE data: %v, want [a:1]", got)
	}
	// NONE saying the node is gone: that watch ends; the node still being there (the read raced
	// with a re-creation), it is watched again and cached as it is now.
	if h.deliver(path, nil, nil, &zk.WatchEvent{Type: zk.EventNone, Path: path}) {
		t.Error("the watch of a vanished node should stop")
	}
	if got := summary(w); !reflect.DeepEqual(got, map[string][]string{"/bz/service/mdl/ps:0": {"1=LOADING@a:1"}}) {
		t.Errorf("cache %v, want the node as stored (%s)", got, data)
	}
	del(t, writer, path)
	if got := summary(w); len(got) != 0 {
		t.Errorf("cache %v after the deletion, want empty", got)
	}
}

// TestWatcherRewatchesRecreatedNode: a deletion noticed after the node was created again (a real
// client may coalesce the two) leaves the node watched.
func TestWatcherRewatchesRecreatedNode(t *testing.T) {
	const path = "/bz/service/mdl/ps:0/1"
	srv := zkfake.NewServer()
	writer := srv.Client()
	defer writer.Close()
	h := newHookClient(srv.Client())
	defer h.Close()
	put(t, writer, path, meta("a:1", avail))
	w := startWatcher(t, h, watcherConf(t, false), WatcherOptions{})

	if h.deliver(path, nil, nil, &zk.WatchEvent{Type: zk.EventDeleted, Path: path}) {
		t.Error("the watch should stop on DELETED")
	}
	// The node still exists, so the watcher watches it again and has it cached.
	if got := w.GetReplicas(psType, 0, nil); !reflect.DeepEqual(got, []string{"a:1"}) {
		t.Errorf("after a late DELETED of an existing node: %v, want [a:1]", got)
	}
	put(t, writer, path, meta("a:2", avail))
	if got := w.GetReplicas(psType, 0, nil); !reflect.DeepEqual(got, []string{"a:2"}) {
		t.Errorf("a change after re-watching: %v, want [a:2]", got)
	}
}

// TestWatcherOwnAbsenceConfirmed: after a re-registration (holdOwn, releaseOwn) a watch re-armed on
// the new session may deliver the absence it read before the own node was created again. The
// replica stays in the answers while that is checked (it exists: watched again) and leaves them
// only once the node is confirmed missing; a replica not this process's leaves at once.
func TestWatcherOwnAbsenceConfirmed(t *testing.T) {
	const own, other = "/bz/service/mdl/ps:0/1", "/bz/service/mdl/ps:1/1"
	srv := zkfake.NewServer()
	writer := srv.Client()
	defer writer.Close()
	h := newHookClient(srv.Client())
	defer h.Close()
	put(t, writer, own, meta("a:1", avail))
	put(t, writer, other, meta("b:1", avail))
	w := startWatcher(t, h, watcherConf(t, false), WatcherOptions{})
	w.holdOwn([]string{own})
	w.releaseOwn()

	var during [][]string
	h.mu.Lock()
	h.onExists = func(string) { during = append(during, w.GetReplicas(psType, 0, nil)) }
	h.mu.Unlock()
	stale := &zk.WatchEvent{Type: zk.EventNone}
	tests := []struct {
		name, path string
		task       int
		delete     bool
		during     []string // the answer while the absence is checked
		after      []string
	}{
		{"own, re-registered", own, 0, false, []string{"a:1"}, []string{"a:1"}},
		{"own, really gone", own, 0, true, []string{"a:1"}, nil},
		{"not own", other, 1, true, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			during = nil
			if tc.delete {
				del(t, writer, tc.path)
			}
			if h.deliver(tc.path, nil, nil, stale) {
				t.Error("the watch should stop on an absent node")
			}
			if len(during) != 1 {
				t.Fatalf("%d existence checks, want 1", len(during))
			}
			if got := during[0]; !reflect.DeepEqual(got, tc.during) && !(len(got) == 0 && len(tc.during) == 0) {
				t.Errorf("answer while checking: %v, want %v", got, tc.during)
			}
			if got := w.GetReplicas(psType, tc.task, nil); !reflect.DeepEqual(got, tc.after) && !(len(got) == 0 && len(tc.after) == 0) {
				t.Errorf("answer after: %v, want %v", got, tc.after)
			}
		})
	}
}

// TestReconcile: the reconciliation repairs what the watches missed, never overwrites fresher
// watch news, reports own nodes that are missing, and lists no empty task.
func TestReconcile(t *testing.T) {
	leakcheck.Check(t)
	const p = "/bz/service/mdl"
	tests := []struct {
		name     string
		blind    func(path string) bool
		seed     map[string]datadef.ReplicaMeta
		own      []string
		during   func(t *testing.T, c zk.Client)              // before Reconcile, after Start
		afterGet func(t *testing.T, c zk.Client, path string) // run once, after the read of target
		target   string
		want     map[string][]string
		missing  []string
	}{
		{
			name:  "a replica the watches missed",
			blind: func(path string) bool { return path == p+"/ps:0" },
			seed:  map[string]datadef.ReplicaMeta{p + "/ps:0/1": meta("a:1", avail)},
			during: func(t *testing.T, c zk.Client) {
				put(t, c, p+"/ps:0/2", meta("b:1", avail))
			},
			want: map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1", "2=AVAILABLE@b:1"}},
		},
		{
			name:  "a deletion the watches missed",
			blind: func(path string) bool { return path == p+"/ps:0/1" },
			seed:  map[string]datadef.ReplicaMeta{p + "/ps:0/1": meta("a:1", avail), p + "/ps:0/2": meta("b:1", avail)},
			during: func(t *testing.T, c zk.Client) {
				del(t, c, p+"/ps:0/1")
			},
			want: map[string][]string{p + "/ps:0": {"2=AVAILABLE@b:1"}},
		},
		{
			name:     "a change seen by a watch while reading wins over the stale read",
			seed:     map[string]datadef.ReplicaMeta{p + "/ps:0/1": meta("a:1", loading)},
			target:   p + "/ps:0/1",
			afterGet: func(t *testing.T, c zk.Client, path string) { put(t, c, path, meta("a:1", avail)) },
			want:     map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1"}},
		},
		{
			name:     "a deletion seen by a watch while reading wins over the stale read",
			seed:     map[string]datadef.ReplicaMeta{p + "/ps:0/1": meta("a:1", avail), p + "/ps:1/1": meta("b:1", avail)},
			target:   p + "/ps:0/1",
			afterGet: func(t *testing.T, c zk.Client, path string) { del(t, c, path) },
			want:     map[string][]string{p + "/ps:1": {"1=AVAILABLE@b:1"}},
		},
		{
			name:    "own nodes missing are reported",
			seed:    map[string]datadef.ReplicaMeta{p + "/ps:0/3": meta("a:1", avail)},
			own:     []string{p + "/ps:0/3", p + "/ps:1/3", p + "/entry:0/00000000003"},
			want:    map[string][]string{p + "/ps:0": {"3=AVAILABLE@a:1"}},
			missing: []string{p + "/ps:1/3", p + "/entry:0/00000000003"},
		},
		{
			name: "a task without replicas is not listed",
			seed: map[string]datadef.ReplicaMeta{p + "/ps:0/1": meta("a:1", avail)},
			during: func(t *testing.T, c zk.Client) {
				if err := c.EnsurePath(tctx(t), p+"/ps:7"); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string][]string{p + "/ps:0": {"1=AVAILABLE@a:1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := zkfake.NewServer()
			writer := srv.Client()
			defer writer.Close()
			h := newHookClient(srv.Client())
			defer h.Close()
			h.blind = tc.blind
			for path, m := range tc.seed {
				put(t, writer, path, m)
			}
			var mu sync.Mutex
			var missing []string
			opts := WatcherOptions{}
			if tc.own != nil {
				opts.OwnPaths = func() []string { return tc.own }
				opts.OnOwnMissing = func(p []string) { mu.Lock(); missing = append(missing, p...); mu.Unlock() }
			}
			w := startWatcher(t, h, watcherConf(t, false), opts)
			if tc.during != nil {
				tc.during(t, writer)
			}
			if tc.afterGet != nil {
				var once sync.Once
				h.afterGet = func(path string) {
					if path == tc.target {
						once.Do(func() { tc.afterGet(t, writer, path) })
					}
				}
			}
			if err := w.Reconcile(tctx(t)); err != nil {
				t.Fatal(err)
			}
			h.afterGet = nil
			if got := summary(w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cache %v, want %v", got, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if !reflect.DeepEqual(missing, tc.missing) {
				t.Errorf("own nodes reported missing %v, want %v", missing, tc.missing)
			}
		})
	}
}

// TestReconcileWatchesWhatItFinds: a task found by the reconciliation is watched from then on.
func TestReconcileWatchesWhatItFinds(t *testing.T) {
	const p = "/bz/service/mdl"
	srv := zkfake.NewServer()
	writer := srv.Client()
	defer writer.Close()
	h := newHookClient(srv.Client())
	defer h.Close()
	h.blind = func(path string) bool { return path == p } // new tasks go unnoticed
	put(t, writer, p+"/ps:0/1", meta("a:1", avail))
	w := startWatcher(t, h, watcherConf(t, false), WatcherOptions{})
	put(t, writer, p+"/ps:1/1", meta("b:1", loading))
	if got := w.GetAllReplicas(psType, nil); len(got) != 1 {
		t.Fatalf("the blind root watch saw the new task: %v", got)
	}
	if err := w.Reconcile(tctx(t)); err != nil {
		t.Fatal(err)
	}
	put(t, writer, p+"/ps:1/1", meta("b:1", avail))
	if got := w.GetReplicas(psType, 1, nil); !reflect.DeepEqual(got, []string{"b:1"}) {
		t.Errorf("a change in the task found by the reconciliation: %v, want [b:1]", got)
	}
}

// TestPollLoop: the periodic reconciliation runs by itself, and Stop does not wait for the next
// round however long the period.
func TestPollLoop(t *testing.T) {
	leakcheck.Check(t)
	const p = "/bz/service/mdl"
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{{"short period", 5 * time.Millisecond}, {"long period", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := zkfake.NewServer()
			writer := srv.Client()
			defer writer.Close()
			h := newHookClient(srv.Client())
			defer h.Close()
			h.blind = func(path string) bool { return path == p+"/ps:0" }
			put(t, writer, p+"/ps:0/1", meta("a:1", avail))
			w, err := NewWatcher(h, watcherConf(t, false), WatcherOptions{PollInterval: tc.interval, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			put(t, writer, p+"/ps:0/2", meta("b:1", avail))
			if tc.interval < time.Second {
				eventually(t, 5*time.Second, "the poll finds the missed replica", func() bool {
					return len(w.GetReplicas(psType, 0, nil)) == 2
				})
			}
			stopped := make(chan struct{})
			go func() { w.Stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				t.Fatal("Stop waited for the poll period")
			}
		})
	}
}

// TestWatcherStopStart: Stop empties the cache and ends every watch; Start loads again.
func TestWatcherStopStart(t *testing.T) {
	leakcheck.Check(t)
	const p = "/bz/service/mdl"
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	defer writer.Close()
	defer client.Close()
	put(t, writer, p+"/ps:0/1", meta("a:1", avail))
	w, err := NewWatcher(client, watcherConf(t, false), WatcherOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); errkind.Of(err) != errkind.Runtime {
		t.Errorf("second Start: %v, want a Runtime error", err)
	}
	w.Stop()
	if got := summary(w); len(got) != 0 {
		t.Errorf("cache after Stop: %v", got)
	}
	put(t, writer, p+"/ps:0/2", meta("b:1", avail)) // no watch may fire into the stopped watcher
	if got := summary(w); len(got) != 0 {
		t.Errorf("cache after a change while stopped: %v", got)
	}
	if err := w.Reconcile(tctx(t)); errkind.Of(err) != errkind.Runtime {
		t.Errorf("Reconcile while stopped: %v, want a Runtime error", err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := w.GetReplicas(psType, 0, nil); !reflect.DeepEqual(got, []string{"a:1", "b:1"}) {
		t.Errorf("after restart: %v", got)
	}
}

// TestWatcherStartFails: a root that cannot be watched fails Start and leaves it stopped.
func TestWatcherStartFails(t *testing.T) {
	client := zkfake.New()
	client.Close()
	w, err := NewWatcher(client, watcherConf(t, false), WatcherOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); !errors.Is(err, zk.ErrClosed) {
		t.Errorf("Start on a closed client: %v, want ErrClosed", err)
	}
	if err := w.Reconcile(tctx(t)); errkind.Of(err) != errkind.Runtime {
		t.Errorf("Reconcile after a failed Start: %v", err)
	}
}

// TestAddresses: the address kind and family, the IPv6-only switch, and replicas without an
// address of the asked kind (listed as "").
func TestAddresses(t *testing.T) {
	const path = "/bz/service/mdl/ps:0/1"
	full := datadef.NewReplicaMeta()
	full.Address, full.AddressIPv6 = ptr("10.0.0.1:1"), ptr("[fe80::1]:1")
	full.ArchonAddress, full.ArchonAddressIPv6 = ptr("0.0.0.0:2"), ptr("[fe80::1]:2")
	full.Stat = avail
	tests := []struct {
		name       string
		env        map[string]string
		archon     bool
		family     string
		m          datadef.ReplicaMeta
		wantFamily string
		want       string
	}{
		{"grpc ipv4", map[string]string{"MY_HOST_IP": "10.1.1.1"}, false, "", full, datadef.IPv4, "10.0.0.1:1"},
		{"grpc ipv6", map[string]string{"MY_HOST_IP": "10.1.1.1"}, false, datadef.IPv6, full, datadef.IPv6, "[fe80::1]:1"},
		{"archon ipv4 falls back to ipv6", map[string]string{"MY_HOST_IP": "10.1.1.1"}, true, datadef.IPv4, full, datadef.IPv4, "[fe80::1]:2"},
		{"ipv6-only host", map[string]string{"MY_HOST_IP": ""}, false, datadef.IPv4, full, datadef.IPv6, "[fe80::1]:1"},
		{"no address", map[string]string{"MY_HOST_IP": "10.1.1.1"}, false, "", meta("0.0.0.0:1", avail), datadef.IPv4, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := zkfake.New()
			defer client.Close()
			put(t, client, path, tc.m)
			conf := newConf(t, tc.env, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps") })
			w := startWatcher(t, client, conf, WatcherOptions{UseArchon: tc.archon, AddressFamily: tc.family, Env: agentconf.MapEnv(tc.env)})
			if w.AddressFamily() != tc.wantFamily {
				t.Errorf("family %s, want %s", w.AddressFamily(), tc.wantFamily)
			}
			if got := w.GetReplicas(psType, 0, nil); !reflect.DeepEqual(got, []string{tc.want}) {
				t.Errorf("GetReplicas = %q, want [%q]", got, tc.want)
			}
		})
	}
	if _, err := NewWatcher(zkfake.New(), newConf(t, nil, func(f *utilsspec.AgentConfig) { f.DeployType = ptr("ps") }),
		WatcherOptions{AddressFamily: "ipx"}); errkind.Of(err) != errkind.Value {
		t.Errorf("bad family: %v, want a Value error", err)
	}
}

// TestReplicaQueries: GetReplica, GetReplicasWithExtraInfo over every location, arguments that
// match nothing, and the sync backend built on them.
func TestReplicaQueries(t *testing.T) {
	const p = "/bz/service/mdl"
	client := zkfake.New()
	defer client.Close()
	put(t, client, p+"/lf:c1/ps:0/1", meta("a:1", avail))
	put(t, client, p+"/hl:c2/ps:0/1", meta("b:1", avail))
	put(t, client, p+"/hl:c2/ps:0/2", meta("c:1", loading))
	put(t, client, p+"/hl:c2/ps:0/3", meta("a:1", avail)) // same address as lf's: replaces it
	w := startWatcher(t, client, watcherConf(t, true), WatcherOptions{})

	if got := w.GetReplica(psType, 0, 1, nil); !reflect.DeepEqual(got, []string{"a:1", "b:1"}) {
		t.Errorf("GetReplica(PS, 0, 1) = %v", got)
	}
	if got := w.GetReplica(psType, 0, 1, &DC{"hl", "c2"}); !reflect.DeepEqual(got, []string{"b:1"}) {
		t.Errorf("GetReplica(PS, 0, 1, hl:c2) = %v", got)
	}
	if got := w.GetReplica(psType, 0, 2, nil); got != nil {
		t.Errorf("GetReplica of a LOADING replica = %v", got)
	}
	for _, st := range []agentpb.ServerType{agentpb.ServerType(42)} {
		if got := w.GetReplicas(st, 0, nil); len(got) != 0 {
			t.Errorf("GetReplicas of server type %d = %v", st, got)
		}
	}
	if got := w.GetReplicas(psType, -1, nil); len(got) != 0 {
		t.Errorf("GetReplicas(PS, -1) = %v", got)
	}

	// TestExtraInfoEveryLocation: with no location every location is listed.
	want := map[string]string{
		"a:1": "idc: \"hl\"\ncluster: \"c2\"\nreplica_id: 3\n",
		"b:1": "idc: \"hl\"\ncluster: \"c2\"\nreplica_id: 1\n",
	}
	got := map[string]string{}
	for a, info := range w.GetReplicasWithExtraInfo(psType, 0, nil) {
		got[a] = info.TextFormat()
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GetReplicasWithExtraInfo(PS, 0) = %v, want %v", got, want)
	}

	sb := w.SyncBackend()
	sb.SubscribeModel("m")
	if sb.Model() != "m" {
		t.Errorf("Model() = %q", sb.Model())
	}
	for _, tc := range []struct {
		sub     string
		kind    errkind.Kind
		targets int
	}{
		{"ps_0", errkind.Unknown, 2},
		{"ps_0_extra", errkind.Unknown, 2},
		{"ps_5", errkind.Unknown, 0},
		{"entry_0", errkind.Precondition, 0},
		{"ps", errkind.Value, 0},
		{"ps_x", errkind.Value, 0},
		{"ps_\u0660", errkind.Unknown, 2}, // int("٠") is 0
	} {
		name, targets, err := sb.GetSyncTargets(tc.sub)
		if errkind.Of(err) != tc.kind || (err == nil && (name != tc.sub || len(targets) != tc.targets)) {
			t.Errorf("GetSyncTargets(%q) = %q, %d targets, %v; want kind %v and %d targets", tc.sub, name, len(targets), err, tc.kind, tc.targets)
		}
	}
}

func TestTargetExtraInfoTextFormat(t *testing.T) {
	for _, tc := range []struct {
		info TargetExtraInfo
		want string
	}{
		{TargetExtraInfo{ReplicaID: 0}, "replica_id: 0\n"},
		{TargetExtraInfo{IDC: ptr("lf"), Cluster: ptr("default"), ReplicaID: 7}, "idc: \"lf\"\ncluster: \"default\"\nreplica_id: 7\n"},
		{TargetExtraInfo{IDC: ptr("a\"b\n\xff"), ReplicaID: -1}, "idc: \"a\\\"b\\n\\377\"\nreplica_id: -1\n"},
	} {
		if got := tc.info.TextFormat(); got != tc.want {
			t.Errorf("TextFormat(%+v) = %q, want %q", tc.info, got, tc.want)
		}
	}
}

func TestReplicaKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		ok   bool
	}{{"0", "0", true}, {"00000000001", "1", true}, {"+5", "5", true}, {"-1", "-1", true}, {"x1", "", false}, {"", "", false}, {"99999999999999999999", "", false},
		// Python's int(): underscores between digits, white space around, any Unicode decimal digit.
		{"1_0", "10", true}, {" 7\n", "7", true}, {"\u0663", "3", true}, {"1__0", "", false}, {"\u00b2", "", false}} {
		key, ok := replicaKey(tc.name)
		if key != tc.key || ok != tc.ok {
			t.Errorf("replicaKey(%q) = %q, %v; want %q, %v", tc.name, key, ok, tc.key, tc.ok)
		}
	}
}

// TestWatcherDuplicateReplicaNames: two nodes naming the same replica (1 and 00000000001) share
// one cache key; the newer node's data is cached whatever order the load reads them in, as the
// reference's watches (set in creation order) left it. A later change of the older node does not
// replace it; deleting either node removes the replica, as in the reference.
func TestWatcherDuplicateReplicaNames(t *testing.T) {
	leakcheck.Check(t)
	const task = "/bz/service/mdl/ps:0"
	for i := 0; i < 20; i++ { // the load reads children in parallel: any order must give the same
		srv := zkfake.NewServer()
		writer, client := srv.Client(), srv.Client()
		put(t, writer, task+"/1", meta("old:1", avail))
		put(t, writer, task+"/00000000001", meta("new:1", avail))
		w := startWatcher(t, client, watcherConf(t, false), WatcherOptions{Parallelism: 4})
		if got, want := summary(w), map[string][]string{task: {"1=AVAILABLE@new:1"}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("load %d: cache %v, want %v", i, got, want)
		}
		if err := w.Reconcile(tctx(t)); err != nil {
			t.Fatal(err)
		}
		if got, want := summary(w), map[string][]string{task: {"1=AVAILABLE@new:1"}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after a reconciliation: cache %v, want %v", got, want)
		}
		put(t, writer, task+"/1", meta("old:2", avail))
		if got, want := summary(w), map[string][]string{task: {"1=AVAILABLE@new:1"}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after the older node changed: cache %v, want %v", got, want)
		}
		del(t, writer, task+"/1")
		if got := summary(w); len(got) != 0 {
			t.Fatalf("after a deletion: cache %v, want empty", got)
		}
		w.Stop()
		writer.Close()
		client.Close()
	}
}
