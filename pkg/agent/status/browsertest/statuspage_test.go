package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	agentv3 "github.com/monolith-go/monolith/pkg/agent/v3"
	"github.com/monolith-go/monolith/pkg/agent/v3/inproc"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// budget is the virtual time Chromium gives the page: long enough for two of its self-refreshes.
const budget = 2*agentstatus.PageRefresh + agentstatus.PageRefresh/2

// demo is a running agent as the demo runs it (agent v3 on zkfake with the in-process fake TF
// Serving), with the status endpoint the agent command serves and its log tapped by an
// ErrorRing.
type demo struct {
	agent *agentv3.Agent
	ctl   zk.Client
	url   string
	tfs   *failingTFS
}

// failingTFS is the in-process fake TF Serving with versions that failed to load added to what
// it reports (the fake loads every version): the model server reports a corrupt export so.
type failingTFS struct {
	*inproc.TFS
	mu sync.Mutex
	// failed: model -> its version statuses instead of the fake's (nil: the fake's).
	failed map[string][]*servingapis.ModelVersionStatus
}

func (f *failingTFS) ListModelVersions(ctx context.Context) (map[string][]*servingapis.ModelVersionStatus, error) {
	out, err := f.TFS.ListModelVersions(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, list := range f.failed {
		if _, ok := out[name]; ok && err == nil {
			out[name] = list
		}
	}
	return out, err
}

func (f *failingTFS) setFailed(failed map[string][]*servingapis.ModelVersionStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = failed
}

// failedVersion is the status of a version whose export is corrupt, as the model server reports
// it.
func failedVersion(model string, v int64) *servingapis.ModelVersionStatus {
	msg := fmt.Sprintf("load %s version %d from /models/%s/%d: export manifest /models/%[3]s/%[2]d/model.json: unexpected EOF", model, v, strings.ReplaceAll(model, ":", "/"), v)
	return modelconfig.VersionStatus(v, servingapis.ModelVersionStatus_END, tfprotobuf.Code_INVALID_ARGUMENT, &msg)
}

func startDemo(t *testing.T, ctx context.Context) *demo {
	t.Helper()
	f := utilsspec.DefaultAgentConfig()
	f.Bzid, f.DeployType, f.AgentVersion, f.LayoutPattern = ptr("demo"), ptr("unified"), 3, ptr("demo_layout")
	f.ZKServers = ptr("in-process")
	// The demo's filters (entry, and the PS shards of shard 0 of 2) and one that fails on
	// dense_0 (division by zero), to put an error on the page.
	f.LayoutFilters = []string{"entry; True", "ps_{i}; ${shard_id} == i % ${shard_num}", "dense_{i}; 10 // i == 5"}
	env := agentconf.MapEnv(map[string]string{"MY_POD_NAME": "demo-0", "SHARD_ID": "0", "MONOLITH_HOST_SHARD_N": "2",
		"TCE_PSM": "monolith.demo", "MY_HOST_IP": "127.0.0.1"})
	ring := agentstatus.NewErrorRing(agentstatus.DefaultRecentErrors)
	log := slog.New(ring.Handler(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})))
	conf, err := agentconf.New(f, agentconf.Options{Env: env, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	t.Cleanup(func() { agentZK.Close(); ctl.Close() })
	port := *conf.TFSPortGRPC
	reloader, err := agentv3.DialReloader(fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	m := agentstatus.NewMetrics()
	proc := &failingTFS{}
	a, err := agentv3.New(conf, agentv3.Options{
		ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: t.TempDir(), Metrics: m, Logger: log, Reloader: reloader,
		TFS: func(file string) (tfs.Process, error) {
			proc.TFS = inproc.New(file, inproc.Options{Port: port, StepInterval: 20 * time.Millisecond, Logger: log})
			return proc, nil
		},
		SyncInterval: 100 * time.Millisecond, PendingSyncInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	status, err := agentstatus.Listen("127.0.0.1:0", agentstatus.NewHandler(a, m, agentstatus.WithRecentErrors(ring)), log)
	if err != nil {
		t.Fatal(err)
	}
	status.Start()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		if err := status.Stop(context.Background()); err != nil {
			t.Errorf("stop status endpoint: %v", err)
		}
	})
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(context.Background()); err != nil {
			t.Errorf("stop agent: %v", err)
		}
	})
	d := &demo{agent: a, ctl: ctl, url: status.URL(), tfs: proc}
	for _, sub := range []string{"entry", "ps_0", "ps_1", "ps_2", "ps_3", "dense_2"} {
		d.publish(t, ctx, sub)
	}
	return d
}

// publish declares demo_model's sub graph and adds it to the layout, as agentctl decl and pub do.
func (d *demo) publish(t *testing.T, ctx context.Context, sub string) {
	t.Helper()
	cfg := fmt.Sprintf(`{"model_base_path": "/models/demo_model/%s", "version_policy": "latest"}`, sub)
	if _, err := d.ctl.Create(ctx, "/demo/saved_models/demo_model/"+sub, []byte(cfg), zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.ctl.EnsurePath(ctx, "/demo/layouts/demo_layout/demo_model:"+sub); err != nil {
		t.Fatal(err)
	}
}

// readiness is /readyz's answer.
func (d *demo) readiness(t *testing.T) agentstatus.Readiness {
	t.Helper()
	resp, err := http.Get(d.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd agentstatus.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		t.Fatal(err)
	}
	return rd
}

// TestStatusPageInBrowser loads the status page of a running demo agent in headless Chromium and
// checks the DOM the browser rendered once the page's own script had refreshed it: the models
// with their TF Serving states, the layout with the entries the filters passed, the bindings,
// ZooKeeper's state, the readiness; then, after a layout the agent cannot apply, the error, the
// readiness reason and the recent error record; in between, versions that failed to load (the
// failed loads table, the readiness reason of the saved model left with no AVAILABLE version, the
// WARN records, once each). It keeps a screenshot of each.
func TestStatusPageInBrowser(t *testing.T) {
	leakcheck.Check(t)
	chromium := Require(t)
	out := OutputDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := startDemo(t, ctx)

	loaded := []string{"demo_model:dense_2", "demo_model:entry", "demo_model:ps_0", "demo_model:ps_2"}
	waitFor(t, "the layout's models to be AVAILABLE and bound, and the agent ready", func() bool {
		rep := d.agent.Status(ctx)
		n := 0
		for _, m := range rep.Models {
			if m.State == "AVAILABLE" {
				n++
			}
		}
		return n == len(loaded) && slices.Equal(rep.Bound, loaded) && len(d.agent.AddrsMap()) == len(loaded) && d.readiness(t).Ready
	})

	dom, err := chromium.DumpDOM(ctx, d.url+"/", budget)
	if err != nil {
		t.Fatal(err)
	}
	page := parse(t, dom)
	if page.refreshes < 1 || !refreshedRE.MatchString(dom) {
		t.Errorf("the page's script did not refresh it (data-refreshes=%d):\n%s", page.refreshes, dom)
	}
	wantModels := map[string]string{}
	for _, name := range loaded {
		wantModels[name] = "AVAILABLE 1"
	}
	check(t, "models", page.rows("model", "data-name", "data-state", "data-version"), wantModels)
	check(t, "layout entries", page.rows("layout-entry", "data-saved-model", "data-loaded"), map[string]string{
		"demo_model:entry": "true", "demo_model:ps_0": "true", "demo_model:ps_1": "false", "demo_model:ps_2": "true",
		"demo_model:ps_3": "false", "demo_model:dense_2": "true"})
	check(t, "bindings", page.rows("binding", "data-sub-graph", "data-model"), map[string]string{
		"entry": "demo_model", "ps_0": "demo_model", "ps_2": "demo_model", "dense_2": "demo_model"})
	for _, want := range []string{
		`<td id="readiness" data-ready="true">`,
		`<td id="zk-servers" class="mono">in-process</td>`,
		`<span class="badge ok">CONNECTED</span>`,
		// The filter, escaped as text: the browser shows "ps_(?P<i>\d+); 0 == i % 2".
		`<code class="filter">ps_(?P&lt;i&gt;\d+); 0 == i % 2</code>`,
		`<span class="badge ok">ok</span>`, // the last reload
		`monolith.demo;None;None:demo-0`,   // the container
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %s", want)
		}
	}
	if !regexp.MustCompile(`<span id="build" class="mono">[^<]+ \(rev [^<]+, go1\.[^<]+\)</span>`).MatchString(dom) {
		t.Error("rendered page lacks the build version")
	}
	shot := filepath.Join(out, "status-page.png")
	if err := chromium.Screenshot(ctx, d.url+"/", shot, budget); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page: %s", shot)

	// Failed loads: a corrupt new version of ps_2 (its version 1 still serves) and the entry's
	// only version corrupt (nothing serves it: not ready).
	d.tfs.setFailed(map[string][]*servingapis.ModelVersionStatus{
		"demo_model:ps_2":  {failedVersion("demo_model:ps_2", 2), modelconfig.VersionStatus(1, servingapis.ModelVersionStatus_AVAILABLE, tfprotobuf.Code_OK, nil)},
		"demo_model:entry": {failedVersion("demo_model:entry", 1)},
	})
	waitFor(t, "the failed loads, the agent not ready", func() bool {
		return len(d.agent.Status(ctx).FailedLoads) == 2 && !d.readiness(t).Ready
	})
	dom, err = chromium.DumpDOM(ctx, d.url+"/", budget)
	if err != nil {
		t.Fatal(err)
	}
	page = parse(t, dom)
	if page.refreshes < 1 {
		t.Errorf("the page's script did not refresh it:\n%s", dom)
	}
	check(t, "failed loads", page.rows("failed-load", "data-model", "data-version", "data-serving", "data-code"), map[string]string{
		"demo_model:entry": "1 0 INVALID_ARGUMENT", "demo_model:ps_2": "2 1 INVALID_ARGUMENT"})
	for _, want := range []string{
		`<td id="readiness" data-ready="false">`,
		`<li class="reason err">saved model demo_model:entry: no AVAILABLE version (version 1 END: INVALID_ARGUMENT: load demo_model:entry version 1 from /models/demo_model/entry/1: `,
		`<td>version 1</td>`, `<td><span class="badge bad">nothing</span></td>`,
		`INVALID_ARGUMENT: load demo_model:ps_2 version 2 from /models/demo_model/ps_2/2: export manifest /models/demo_model/ps_2/2/model.json: unexpected EOF`,
		`<tr class="recent-error" data-level="WARN">`,
		`tf serving failed to load a version of a saved model`,
		`<td id="tfs" data-running="true" data-restarts="0">`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page with failed loads lacks %s", want)
		}
	}
	if strings.Count(dom, "tf serving failed to load a version of a saved model") != 2 {
		t.Errorf("the failed loads are not logged once each:\n%s", dom)
	}
	shot = filepath.Join(out, "status-page-failed-loads.png")
	if err := chromium.Screenshot(ctx, d.url+"/", shot, budget); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page with failed loads: %s", shot)
	d.tfs.setFailed(nil)
	waitFor(t, "the agent ready again", func() bool { return d.readiness(t).Ready && len(d.agent.Status(ctx).FailedLoads) == 0 })

	// A layout the agent cannot apply: the filter fails on dense_0. The previous config stays.
	d.publish(t, ctx, "dense_0")
	waitFor(t, "the layout error", func() bool {
		l := d.agent.Status(ctx).Layout
		return l != nil && l.Error != "" && !d.readiness(t).Ready
	})
	dom, err = chromium.DumpDOM(ctx, d.url+"/", budget)
	if err != nil {
		t.Fatal(err)
	}
	page = parse(t, dom)
	if page.refreshes < 1 {
		t.Errorf("the page's script did not refresh it:\n%s", dom)
	}
	check(t, "models after the bad layout", page.rows("model", "data-name", "data-state", "data-version"), wantModels)
	for _, want := range []string{
		`<td id="readiness" data-ready="false">`,
		`<li class="reason err">layout /demo/layouts/demo_layout: not applied: `,
		`<p id="layout-error" class="err">Not applied (the previous model server config stays): `,
		`integer division or modulo by zero`,
		`<tr class="recent-error" data-level="ERROR">`,
		`layout not applied, the previous model server config stays`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page after the bad layout lacks %s", want)
		}
	}
	shot = filepath.Join(out, "status-page-layout-error.png")
	if err := chromium.Screenshot(ctx, d.url+"/", shot, budget); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the status page with a layout error: %s", shot)
}

// renderedPage is the DOM Chromium dumped.
type renderedPage struct {
	dom       string
	refreshes int
}

var (
	refreshesRE = regexp.MustCompile(`<body data-refresh-ms="\d+" data-refreshes="(\d+)">`)
	// refreshedRE: the script's note of its last refresh.
	refreshedRE = regexp.MustCompile(`<span id="refresh-status"[^>]*>refreshed `)
)

func parse(t *testing.T, dom string) renderedPage {
	t.Helper()
	m := refreshesRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no status page in the DOM:\n%s", dom)
	}
	n, _ := strconv.Atoi(m[1])
	return renderedPage{dom: dom, refreshes: n}
}

// rows maps the key attribute of each <tr class="{class}"> row to its values attributes, joined
// by spaces.
func (p renderedPage) rows(class, key string, values ...string) map[string]string {
	out := map[string]string{}
	for _, tr := range regexp.MustCompile(`<tr class="`+regexp.QuoteMeta(class)+`"([^>]*)>`).FindAllStringSubmatch(p.dom, -1) {
		attrs := map[string]string{}
		for _, a := range attrRE.FindAllStringSubmatch(tr[1], -1) {
			attrs[a[1]] = a[2]
		}
		vs := make([]string, len(values))
		for i, v := range values {
			vs[i] = attrs[v]
		}
		out[attrs[key]] = strings.Join(vs, " ")
	}
	return out
}

var attrRE = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)

func check(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) { // fmt prints maps sorted
		t.Errorf("%s in the rendered page = %v, want %v", what, got, want)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
