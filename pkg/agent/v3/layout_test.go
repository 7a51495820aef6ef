package agentv3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/agent/filter"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

func entry(model, sub string, base, policy *string) backend.LayoutEntry {
	return backend.LayoutEntry{SavedModel: backend.SavedModel{ModelName: model, SubGraph: sub},
		DeployConfig: backend.SavedModelDeployConfig{ModelBasePath: base, VersionPolicy: policy}}
}

func TestBuildModelServerConfig(t *testing.T) {
	latest, specific, all, bogus, once := ptr("latest"), ptr("SPECIFIC"), ptr("all"), ptr("newest"), ptr("latest_once")
	// pinned resolves latest_once to version 7 under /v, and to none yet elsewhere.
	pinned := func(_, base string) (int64, error) {
		if base == "/v" {
			return 7, nil
		}
		return 0, fmt.Errorf("%w in %s", modelconfig.ErrNoVersion, base)
	}
	prevPS1 := &servingconfig.ModelConfig{Name: "m:ps_1", BasePath: "/old"}
	tests := []struct {
		name     string
		filters  []string
		shard    filter.Params
		entries  []backend.LayoutEntry
		previous map[string]*servingconfig.ModelConfig
		want     string            // the config file's text
		wantN    []string          // or only the names of its models
		wantErrs map[string]string // saved model -> what its Decision.Err contains
		waiting  []string          // saved models whose Decision is Waiting
		wantKind errkind.Kind      // of the layout's error
	}{
		{name: "empty layout", want: "model_config_list {\n}\n"},
		{name: "no filters: everything, in layout order",
			entries: []backend.LayoutEntry{entry("m", "ps_1", ptr("/b/ps_1"), latest), entry("m", "entry", ptr("/b/entry"), specific)},
			want: "model_config_list {\n" +
				"  config {\n    name: \"m:ps_1\"\n    base_path: \"/b/ps_1\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      latest {\n        num_versions: 1\n      }\n    }\n  }\n" +
				"  config {\n    name: \"m:entry\"\n    base_path: \"/b/entry\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      specific {\n        versions: 1\n      }\n    }\n  }\n}\n"},
		{name: "all policy and no base path",
			entries: []backend.LayoutEntry{entry("m", "dense", nil, all)},
			want:    "model_config_list {\n  config {\n    name: \"m:dense\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      all {\n      }\n    }\n  }\n}\n"},
		{name: "shard filters", filters: []string{"entry; True", "ps_{i}; ${shard_id} == i % ${shard_num}"}, shard: filter.Params{ShardID: 1, ShardNum: 2},
			entries: []backend.LayoutEntry{entry("m", "entry", ptr("/e"), latest), entry("m", "ps_0", ptr("/0"), latest),
				entry("m", "ps_1", ptr("/1"), latest), entry("m", "ps_2", ptr("/2"), latest), entry("m", "ps_3", ptr("/3"), latest), entry("m", "dense", ptr("/d"), latest)},
			wantN: []string{"m:entry", "m:ps_1", "m:ps_3"}},
		{name: "nothing accepted", filters: []string{"dense; False"}, entries: []backend.LayoutEntry{entry("m", "dense", ptr("/d"), latest)},
			want: "model_config_list {\n}\n"},
		{name: "a filter failing on a sub graph fails the layout", filters: []string{"ps_{i}; 1 // (i - 1)"},
			entries:  []backend.LayoutEntry{entry("m", "ps_0", ptr("/0"), latest), entry("m", "ps_1", ptr("/1"), latest)},
			wantKind: errkind.Value},
		{name: "no version policy: skipped, the rest loads",
			entries: []backend.LayoutEntry{entry("m", "entry", ptr("/e"), nil), entry("m", "ps_0", ptr("/0"), latest)},
			wantN:   []string{"m:ps_0"}, wantErrs: map[string]string{"m:entry": "saved model m:entry (/gip/saved_models/m/entry): deploy config has no version_policy"}},
		{name: "unknown version policy: skipped, the rest loads",
			entries: []backend.LayoutEntry{entry("m", "entry", ptr("/e"), latest), entry("m", "ps_0", ptr("/0"), bogus)},
			wantN:   []string{"m:entry"}, wantErrs: map[string]string{"m:ps_0": `saved model m:ps_0 (/gip/saved_models/m/ps_0): version_policy "newest": newest is not allowed!`}},
		{name: "a bad deploy config keeps the model's previous config",
			entries:  []backend.LayoutEntry{entry("m", "entry", ptr("/e"), latest), entry("m", "ps_1", ptr("/1"), bogus)},
			previous: map[string]*servingconfig.ModelConfig{"m:ps_1": prevPS1},
			wantN:    []string{"m:entry", "m:ps_1"}, wantErrs: map[string]string{"m:ps_1": "newest is not allowed"}},
		{name: "a model the filters reject needs no policy", filters: []string{"entry; True"},
			entries: []backend.LayoutEntry{entry("m", "entry", ptr("/e"), latest), entry("m", "ps_0", nil, nil)}, wantN: []string{"m:entry"}},
		{name: "latest_once: the pinned version, as specific",
			entries: []backend.LayoutEntry{entry("m", "ps_0", ptr("/v"), once)},
			want:    "model_config_list {\n  config {\n    name: \"m:ps_0\"\n    base_path: \"/v\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      specific {\n        versions: 7\n      }\n    }\n  }\n}\n"},
		{name: "latest_once without a version yet waits",
			entries: []backend.LayoutEntry{entry("m", "entry", ptr("/e"), latest), entry("m", "ps_0", ptr("/none"), once)},
			wantN:   []string{"m:entry"}, waiting: []string{"m:ps_0"},
			wantErrs: map[string]string{"m:ps_0": "saved model m:ps_0 (/gip/saved_models/m/ps_0): version_policy latest_once: no version directory in /none"}},
		{name: "latest_once without a base path is bad",
			entries: []backend.LayoutEntry{entry("m", "ps_0", nil, once)}, wantN: []string{},
			wantErrs: map[string]string{"m:ps_0": "no model_base_path"}},
		{name: "latest_once on a remote path is bad",
			entries: []backend.LayoutEntry{entry("m", "ps_0", ptr("hdfs://ns/m/ps_0"), once)}, wantN: []string{},
			wantErrs: map[string]string{"m:ps_0": "not a local path"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := filter.ParseAll(tc.filters, tc.shard)
			if err != nil {
				t.Fatal(err)
			}
			cfg, decisions, err := BuildModelServerConfig(fs, tc.entries, BuildOptions{Bzid: "gip", LatestOnce: pinned, Previous: tc.previous})
			if tc.wantKind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tc.wantKind {
					t.Fatalf("err = %v (kind %v), want kind %v", err, errkind.Of(err), tc.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantN != nil {
				if got := configNames(cfg); !slices.Equal(got, tc.wantN) {
					t.Errorf("models %v, want %v", got, tc.wantN)
				}
			} else if got := pytext.Format(cfg); got != tc.want {
				t.Errorf("config:\n%s\nwant:\n%s", got, tc.want)
			}
			if len(decisions) != len(tc.entries) {
				t.Fatalf("%d decisions for %d entries", len(decisions), len(tc.entries))
			}
			for _, d := range decisions {
				name := d.Entry.SavedModel.String()
				want, bad := tc.wantErrs[name]
				switch {
				case bad && (d.Err == nil || !strings.Contains(d.Err.Error(), want)):
					t.Errorf("%s: err %v, want it to contain %q", name, d.Err, want)
				case !bad && d.Err != nil:
					t.Errorf("%s: unexpected err %v", name, d.Err)
				}
				if w := slices.Contains(tc.waiting, name); d.Waiting != w {
					t.Errorf("%s: waiting %v, want %v", name, d.Waiting, w)
				}
				if name == "m:ps_1" && tc.previous != nil && d.Config != prevPS1 {
					t.Errorf("m:ps_1: config %v, want the previous one", d.Config)
				}
			}
		})
	}
}

func configNames(cfg *servingconfig.ModelServerConfig) []string {
	var out []string
	for _, c := range cfg.GetModelConfigList().GetConfig() {
		out = append(out, c.GetName())
	}
	return out
}

// fakeAgent starts an agent with the fake wrapper on zkfake and returns it with the operator's
// client; extra options are applied before New.
func fakeAgent(t *testing.T, env map[string]string, mutate func(*utilsspec.AgentConfig), opt func(*Options)) (*Agent, *zkfake.Fake) {
	t.Helper()
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	o := Options{ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: t.TempDir(), Logger: quiet,
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }}
	if opt != nil {
		opt(&o)
	}
	a, err := New(testConfig(t, env, mutate), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
		agentZK.Close()
		ctl.Close()
	})
	return a, ctl
}

func declare(t *testing.T, c zk.Client, model string, policy *string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		data := fmt.Sprintf(`{"model_base_path": "/base/%s", "version_policy": null}`, sub)
		if policy != nil {
			data = fmt.Sprintf(`{"model_base_path": "/base/%s", "version_policy": %q}`, sub, *policy)
		}
		p := "/gip/saved_models/" + model + "/" + sub
		if _, err := c.Create(context.Background(), p, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			if _, err := c.Set(context.Background(), p, []byte(data), zk.AnyVersion); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func publish(t *testing.T, c zk.Client, model string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if err := c.EnsurePath(context.Background(), "/gip/layout/"+model+":"+sub); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLayoutFilters runs the layout filters of a sharded deployment through the agent: which sub
// graphs of a published model each shard loads.
func TestLayoutFilters(t *testing.T) {
	shardFilters := []string{"entry; True", "ps_{i}; ${shard_id} == i % ${shard_num}"}
	tests := []struct {
		name      string
		filters   []string
		shardID   string
		numShard  int
		want      []string
		wantDebug string
	}{
		{"no filters", nil, "0", 1, []string{"m:dense", "m:entry", "m:ps_0", "m:ps_1", "m:ps_2", "m:ps_3"},
			`{"layout_path": "/gip/layout", "layout_filters": []}`},
		{"shard 0 of 2", shardFilters, "0", 2, []string{"m:entry", "m:ps_0", "m:ps_2"},
			`{"layout_path": "/gip/layout", "layout_filters": ["entry; True", "ps_(?P<i>\\d+); 0 == i % 2"]}`},
		{"shard 1 of 2", shardFilters, "1", 2, []string{"m:entry", "m:ps_1", "m:ps_3"},
			`{"layout_path": "/gip/layout", "layout_filters": ["entry; True", "ps_(?P<i>\\d+); 1 == i % 2"]}`},
		{"no shard id: shard 0", shardFilters, "", 4, []string{"m:entry", "m:ps_0"},
			`{"layout_path": "/gip/layout", "layout_filters": ["entry; True", "ps_(?P<i>\\d+); 0 == i % 4"]}`},
		{"dense only", []string{"dense;True"}, "3", 4, []string{"m:dense"},
			`{"layout_path": "/gip/layout", "layout_filters": ["dense;True"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			env := map[string]string{"MONOLITH_HOST_SHARD_N": fmt.Sprint(tc.numShard)}
			if tc.shardID != "" {
				env["SHARD_ID"] = tc.shardID
			}
			a, ctl := fakeAgent(t, env, func(f *utilsspec.AgentConfig) { f.LayoutFilters = tc.filters }, nil)
			if got := *a.ServiceInfo().DebugInfo; got != tc.wantDebug {
				t.Errorf("debug_info = %s, want %s", got, tc.wantDebug)
			}
			declare(t, ctl, "m", ptr("latest"), "entry", "ps_0", "ps_1", "ps_2", "ps_3", "dense")
			publish(t, ctl, "m", "entry", "ps_0", "ps_1", "ps_2", "ps_3", "dense")
			settle(t, a)
			got, err := a.TFS().ListSavedModels()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("loaded %v, want %v", got, tc.want)
			}
			if err := a.SyncAvailableSavedModels(context.Background()); err != nil {
				t.Fatal(err)
			}
			settle(t, a)
			var bound []string
			for model, subs := range a.Backend().ServiceMap() {
				for sub := range subs {
					bound = append(bound, model+":"+sub)
				}
			}
			slices.Sort(bound)
			if !slices.Equal(bound, tc.want) {
				t.Errorf("bound %v, want %v", bound, tc.want)
			}
		})
	}
}

// TestLayoutNotApplied: a layout the agent cannot apply (a filter fails on a sub graph) leaves
// the previous config in place and says why in the status; the next good layout is applied.
func TestLayoutNotApplied(t *testing.T) {
	leakcheck.Check(t)
	m := agentstatus.NewMetrics()
	a, ctl := fakeAgent(t, nil, func(f *utilsspec.AgentConfig) { f.LayoutFilters = []string{"ps_{i}; 10 // i"} },
		func(o *Options) { o.Metrics = m })
	declare(t, ctl, "m", ptr("latest"), "ps_0", "ps_1", "ps_2")
	publish(t, ctl, "m", "ps_1", "ps_2")
	settle(t, a)
	good := []string{"m:ps_1", "m:ps_2"}
	if got, _ := a.TFS().ListSavedModels(); !slices.Equal(got, good) {
		t.Fatalf("loaded %v, want %v", got, good)
	}
	before, _ := a.TFS().ModelConfigText()

	publish(t, ctl, "m", "ps_0") // the filter fails on ps_0
	settle(t, a)
	if now, _ := a.TFS().ModelConfigText(); now != before {
		t.Errorf("config changed to\n%s", now)
	}
	const wantErr = "integer division or modulo by zero"
	if rep := a.Status(context.Background()); !strings.Contains(rep.Layout.Error, wantErr) {
		t.Errorf("layout error %q, want it to contain %q", rep.Layout.Error, wantErr)
	}
	if err := ctl.Delete(context.Background(), "/gip/layout/m:ps_0", zk.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	settle(t, a)
	if rep := a.Status(context.Background()); rep.Layout.Error != "" {
		t.Errorf("error stays after the layout is fixed: %s", rep.Layout.Error)
	}
	body := scrape(t, m)
	for _, want := range []string{`monolith_agent_layout_updates_total{result="error"} 1`, `monolith_agent_layout_updates_total{result="unchanged"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestBadSavedModelSkipped: a saved model whose deploy config has no version policy or an unknown
// one is skipped, with an error naming its node and the bad value in the status, the log and the
// metrics, and the rest of the layout loads, new models included; fixing it loads it. (It used to
// fail the whole layout, so no new model loaded until the bad node was removed.)
func TestBadSavedModelSkipped(t *testing.T) {
	leakcheck.Check(t)
	m := agentstatus.NewMetrics()
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	a, ctl := fakeAgent(t, nil, nil, func(o *Options) { o.Metrics, o.Logger = m, logger })
	declare(t, ctl, "m", ptr("latest"), "entry", "ps_2", "ps_3")
	declare(t, ctl, "m", nil, "ps_0")
	declare(t, ctl, "m", ptr("newest"), "ps_1")
	publish(t, ctl, "m", "entry", "ps_0", "ps_1", "ps_2")
	settle(t, a)
	loaded := func(want ...string) {
		t.Helper()
		if got, _ := a.TFS().ListSavedModels(); !slices.Equal(got, want) {
			t.Errorf("loaded %v, want %v", got, want)
		}
	}
	loaded("m:entry", "m:ps_2")
	entryErrors := func() map[string]string {
		rep := a.Status(context.Background())
		if rep.Layout.Error != "" {
			t.Errorf("layout error %q: the layout should apply without the bad entries", rep.Layout.Error)
		}
		out := map[string]string{}
		for _, e := range rep.Layout.Entries {
			if e.Error != "" {
				out[e.SavedModel] = e.Error
			}
		}
		return out
	}
	want := map[string]string{
		"m:ps_0": "saved model m:ps_0 (/gip/saved_models/m/ps_0): deploy config has no version_policy",
		"m:ps_1": `saved model m:ps_1 (/gip/saved_models/m/ps_1): version_policy "newest": newest is not allowed!`,
	}
	if got := entryErrors(); !maps.Equal(got, want) {
		t.Errorf("entry errors %v, want %v", got, want)
	}
	if body := scrape(t, m); !strings.Contains(body, "monolith_agent_layout_entries_skipped_total 2\n") {
		t.Errorf("metrics lack layout_entries_skipped_total 2:\n%s", body)
	}
	for _, w := range []string{`"level":"ERROR"`, `"node":"/gip/saved_models/m/ps_1"`, `"version_policy":"newest"`, `"node":"/gip/saved_models/m/ps_0"`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %s:\n%s", w, logs.String())
		}
	}

	// The layout is not frozen: a new model loads, and the bad ones are not counted again.
	publish(t, ctl, "m", "ps_3")
	settle(t, a)
	loaded("m:entry", "m:ps_2", "m:ps_3")
	if body := scrape(t, m); !strings.Contains(body, "monolith_agent_layout_entries_skipped_total 2\n") {
		t.Errorf("skips counted again on an unrelated change:\n%s", body)
	}

	// Fixing a deploy config loads its model and clears its error.
	declare(t, ctl, "m", ptr("latest"), "ps_1")
	settle(t, a)
	loaded("m:entry", "m:ps_1", "m:ps_2", "m:ps_3")
	delete(want, "m:ps_1")
	if got := entryErrors(); !maps.Equal(got, want) {
		t.Errorf("entry errors %v, want %v", got, want)
	}

	// Breaking the deploy config of a served model keeps it served (its previous config stays).
	declare(t, ctl, "m", ptr("lastest"), "ps_1")
	settle(t, a)
	loaded("m:entry", "m:ps_1", "m:ps_2", "m:ps_3")
	if got := entryErrors()["m:ps_1"]; !strings.Contains(got, `version_policy "lastest"`) {
		t.Errorf("m:ps_1's error %q", got)
	}
}

// TestWaitForTermination: the agent stops when its context ends (no error) or when TF Serving
// exits (an error naming the exit code), whether the process offers a Done channel or is polled.
func TestWaitForTermination(t *testing.T) {
	tests := []struct {
		name     string
		done     bool // the process has Done()
		exitCode int  // -1: the context is cancelled instead; -2: Stop is called
		wantErr  string
	}{
		{"context cancelled", false, -1, ""},
		{"stopped from another goroutine", false, -2, ""},
		{"tf serving exits, polled", false, 3, "tf serving exited with code 3"},
		{"tf serving exits, done channel", true, 7, "tf serving exited with code 7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			var proc *exitingTFS
			a, _ := fakeAgent(t, nil, nil, func(o *Options) {
				o.PollInterval = time.Millisecond
				o.TFS = func(file string) (tfs.Process, error) {
					proc = &exitingTFS{FakeWrapper: &tfs.FakeWrapper{ModelConfigFile: file}, done: make(chan struct{})}
					if tc.done {
						return &doneTFS{proc}, nil
					}
					return proc, nil
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			switch {
			case tc.exitCode >= 0:
				go proc.exit(tc.exitCode)
			case tc.exitCode == -2:
				go a.Stop(context.Background())
			default:
				cancel()
			}
			err := a.WaitForTermination(ctx)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !proc.stopped() {
				t.Error("TF Serving not stopped")
			}
			if err := a.Healthy(); err == nil {
				t.Error("healthy after termination")
			}
		})
	}
}

// exitingTFS is the fake wrapper with an exit the test triggers.
type exitingTFS struct {
	*tfs.FakeWrapper
	mu     sync.Mutex
	code   int
	exited bool
	stop   bool
	done   chan struct{}
}

func (e *exitingTFS) exit(code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.code, e.exited = code, true
	close(e.done)
}

func (e *exitingTFS) Exited() (bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exited, e.code
}

func (e *exitingTFS) Stop(time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stop = true
	return nil
}

func (e *exitingTFS) stopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stop
}

// doneTFS adds tfs.Wrapper's Done channel.
type doneTFS struct{ *exitingTFS }

func (d *doneTFS) Done() <-chan struct{} { return d.done }

// TestNewErrors: configurations agent v3 refuses, with the reference's assertion as the kind.
func TestNewErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*utilsspec.AgentConfig)
		kind   errkind.Kind
		msg    string
	}{
		{"not unified", func(f *utilsspec.AgentConfig) { f.DeployType = ptr("entry") }, errkind.Precondition, "only supports unified"},
		{"version 1", func(f *utilsspec.AgentConfig) { f.AgentVersion = 1 }, errkind.Precondition, "agent version 1 unexpected"},
		{"no layout", func(f *utilsspec.AgentConfig) { f.LayoutPattern = nil }, errkind.Attribute, "layout_pattern"},
		{"bad filter", func(f *utilsspec.AgentConfig) { f.LayoutFilters = []string{"ps_{i}; import os"} }, errkind.Value, "layout filter"},
		{"filter without ';'", func(f *utilsspec.AgentConfig) { f.LayoutFilters = []string{"ps_0"} }, errkind.Value, "no ';'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf := testConfig(t, nil, tc.mutate)
			dir := t.TempDir()
			r := &countingReloader{}
			_, err := New(conf, Options{ModelConfigDir: dir, Logger: quiet, Reloader: r,
				TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }})
			if err == nil || errkind.Of(err) != tc.kind || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v (kind %v), want kind %v containing %q", err, errkind.Of(err), tc.kind, tc.msg)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("files left: %v", left)
			}
			if !r.closed {
				t.Error("the reloader handed to New was not closed")
			}
		})
	}
}

// countingReloader fails its first fails calls that carry models, then accepts; it records what
// it was sent.
type countingReloader struct {
	mu     sync.Mutex
	fails  int
	failed int
	calls  int
	sent   [][]string
	closed bool
	called chan struct{}
	// entered, when set, is closed as the first call starts, which then waits for hold.
	entered, hold chan struct{}
}

func (r *countingReloader) Reload(ctx context.Context, cfg *servingconfig.ModelServerConfig) error {
	r.mu.Lock()
	defer func() {
		r.mu.Unlock()
		if r.called != nil {
			select {
			case r.called <- struct{}{}:
			default:
			}
		}
	}()
	r.calls++
	if r.entered != nil && r.calls == 1 {
		close(r.entered)
		<-r.hold
	}
	names := configNames(cfg)
	r.sent = append(r.sent, names)
	if len(names) > 0 && r.failed < r.fails {
		r.failed++
		return errors.New("connection refused")
	}
	return nil
}

func (r *countingReloader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *countingReloader) snapshot() (int, [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, slices.Clone(r.sent)
}

// TestReloadRetries: a reload that fails is retried with backoff until TF Serving accepts it; the
// status and the metrics count the attempts.
func TestReloadRetries(t *testing.T) {
	leakcheck.Check(t)
	m := agentstatus.NewMetrics()
	r := &countingReloader{fails: 3}
	a, ctl := fakeAgent(t, nil, nil, func(o *Options) {
		o.Reloader, o.Metrics, o.ReloadBackoff, o.ReloadBackoffMax = r, m, time.Millisecond, 4*time.Millisecond
	})
	declare(t, ctl, "m", ptr("latest"), "entry")
	publish(t, ctl, "m", "entry")
	settle(t, a)
	eventually(t, "the reload to be accepted", func() bool {
		s := a.Status(context.Background()).LastReload
		return s != nil && s.OK && s.Models == 1
	})
	// The empty layout of the start may or may not have been sent before m:entry superseded it.
	_, sent := r.snapshot()
	entryCalls := 0
	for _, s := range sent {
		if slices.Equal(s, []string{"m:entry"}) {
			entryCalls++
		} else if len(s) != 0 {
			t.Errorf("sent %v", s)
		}
	}
	if entryCalls != 4 {
		t.Errorf("m:entry sent %d times, want 4 (3 failures, then accepted)", entryCalls)
	}
	if s := a.Status(context.Background()).LastReload; s.Attempts != 4 || s.Models != 1 || s.Error != "" {
		t.Errorf("last reload = %+v", s)
	}
	body := scrape(t, m)
	for _, want := range []string{`monolith_agent_tfs_reloads_total{result="error"} 3`, `monolith_agent_tfs_reloads_total{result="ok"} `} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestReloadSendsNewest: configs submitted while a reload fails are not queued: the newest one is
// sent next.
func TestReloadSendsNewest(t *testing.T) {
	leakcheck.Check(t)
	r := &countingReloader{fails: 1 << 30, entered: make(chan struct{}), hold: make(chan struct{})}
	rl := newReloader(r, Options{ReloadTimeout: time.Second, ReloadBackoff: time.Hour, ReloadBackoffMax: time.Hour}, quiet, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rl.run(ctx) }()
	mk := func(names ...string) *servingconfig.ModelServerConfig {
		l := &servingconfig.ModelConfigList{}
		for _, n := range names {
			l.Config = append(l.Config, &servingconfig.ModelConfig{Name: n})
		}
		return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: l}}
	}
	rl.submit(mk("a"))
	<-r.entered // a's reload is in flight: b and c come while it fails
	rl.submit(mk("b"))
	rl.submit(mk("c"))
	close(r.hold)
	// a failed; the hour-long backoff is cut short by the configs that came meanwhile, and only
	// the newest is sent (a second failure then waits an hour).
	eventually(t, "a second reload", func() bool { calls, _ := r.snapshot(); return calls >= 2 })
	cancel()
	<-done
	_, sent := r.snapshot()
	if len(sent) != 2 || !slices.Equal(sent[0], []string{"a"}) || !slices.Equal(sent[1], []string{"c"}) {
		t.Errorf("sent %v, want [[a] [c]]", sent)
	}
}

// TestSessionExpiry: after its ZooKeeper session expires the agent's service info and bindings
// come back without a restart.
func TestSessionExpiry(t *testing.T) {
	leakcheck.Check(t)
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	defer agentZK.Close()
	defer ctl.Close()
	a, err := New(testConfig(t, nil, nil), Options{ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: t.TempDir(), Logger: quiet,
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(tctx(t)); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	declare(t, ctl, "m", ptr("latest"), "entry")
	publish(t, ctl, "m", "entry")
	settle(t, a)
	if err := a.SyncAvailableSavedModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	binding := "/gip/binding/m/entry:" + a.Container().String()
	svcInfo := "/gip/container_service/" + a.Container().String()
	if err := agentZK.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "binding and service info restored", func() bool {
		b, _ := ctl.Exists(context.Background(), binding)
		s, _ := ctl.Exists(context.Background(), svcInfo)
		return b != nil && s != nil
	})
}

// TestStopAbortsStart: Stop during a Start that waits for ZooKeeper (nothing listens at
// zk_servers) ends the Start at once; both return and nothing is left running.
func TestStopAbortsStart(t *testing.T) {
	leakcheck.Check(t)
	conf := testConfig(t, nil, func(f *utilsspec.AgentConfig) { f.ZKServers = ptr("127.0.0.1:1") })
	a, err := New(conf, Options{ModelConfigDir: t.TempDir(), Logger: quiet,
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- a.Start(ctx) }()
	time.Sleep(20 * time.Millisecond) // most likely Start is connecting by now
	if err := a.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
	select {
	case err := <-started:
		// Cancelled by Stop; or, if Stop came first, refused.
		if !errors.Is(err, context.Canceled) && (err == nil || !strings.Contains(err.Error(), "already started or stopped")) {
			t.Errorf("Start = %v, want it cancelled by Stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after Stop")
	}
	if err := a.Start(ctx); err == nil {
		t.Error("Start after Stop succeeded")
	}
}
