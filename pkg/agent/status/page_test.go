package agentstatus

import (
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// TestPage renders the page for a full report and checks every part an on-call reader needs is
// there, escaped (the page is built by html/template from ZooKeeper's and TF Serving's text).
func TestPage(t *testing.T) {
	base, policy := "/models/m/entry", "latest"
	started := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	rep := Report{
		Agent: AgentSummary{Version: 3, BuildVersion: "v9.9.9 (rev abc, go1.26.0)", DeployType: "unified", Bzid: "b",
			Container: "c:1", StartedAt: started, Running: true, AgentService: "[::]:1234",
			Addresses: map[string]string{"grpc": "127.0.0.1:8500"}},
		ZooKeeper: ZKSummary{Servers: "in-process", State: "SUSPENDED", SessionID: "0x1f"},
		Layout: &LayoutSummary{Path: "/b/layouts/l", Filters: []string{"ps_(?P<i>\\d+); 0 == i % 2"}, UpdatedAt: started,
			Entries: []LayoutEntry{
				{SavedModel: "m:entry", BasePath: &base, VersionPolicy: &policy, Loaded: true, Filter: "entry; True"},
				{SavedModel: "m:ps_1", BasePath: &base, VersionPolicy: &policy},
				{SavedModel: "m:ps_2", Loaded: true, Error: "saved model m:ps_2: version_policy \"x\""},
			}},
		Models: []ModelStatus{{Name: "m:entry", Version: 2, State: "AVAILABLE"},
			{Name: "<script>alert(1)</script>", Version: 1, State: "END", ErrorCode: "NOT_FOUND", ErrorMessage: "gone & <away>"}},
		Bound:      []string{"m:entry"},
		Bindings:   map[string]map[string][]string{"m": {"ps_0": {"h:2"}, "entry": {"h:1", "h:3"}}},
		LastReload: &ReloadSummary{At: started, Models: 2, Attempts: 3, Error: "tfs reload: unavailable"},
		FailedLoads: []FailedLoad{
			{Model: "m:entry", Version: 3, ErrorCode: "INVALID_ARGUMENT", ErrorMessage: "export manifest /models/m/entry/3/model.json: <EOF>", ServingVersion: 2},
			{Model: "m:ps_2", Version: 7, ErrorCode: "NOT_FOUND", ErrorMessage: "no shard.json"},
		},
		TFS: &TFSSummary{Restart: true, Running: false, Restarts: 2, RestartFailures: 1, LastExit: "exited with code -1 (killed)",
			LastExitAt: started, NextRestartAt: started.Add(4 * time.Second)},
	}
	src := &readySource{fakeSource: fakeSource{rep: rep}, reasons: []string{"zookeeper: SUSPENDED"}}
	ring := NewErrorRing(5)
	log := slog.New(ring.Handler(slog.DiscardHandler))
	log.Warn("first", "n", 1)
	log.Error("second <b>", "err", "x")

	rec := httptest.NewRecorder()
	NewHandler(src, nil, WithRecentErrors(ring)).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("/: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	page := rec.Body.String()
	for _, want := range []string{
		`<span id="build" class="mono">v9.9.9 (rev abc, go1.26.0)</span>`,
		`<td id="readiness" data-ready="false">`, `<li class="reason err">zookeeper: SUSPENDED</li>`,
		`<td id="zk-servers" class="mono">in-process</td>`, `>SUSPENDED</span>`, `<td id="zk-session" class="mono">0x1f</td>`,
		`<code class="filter">ps_(?P&lt;i&gt;\d&#43;); 0 == i % 2</code>`,
		`<tr class="layout-entry" data-saved-model="m:entry" data-loaded="true">`,
		`<tr class="layout-entry" data-saved-model="m:ps_1" data-loaded="false">`,
		`<span class="badge bad">skipped</span>`, `version_policy &#34;x&#34;`,
		`<tr class="model" data-name="m:entry" data-state="AVAILABLE" data-version="2">`,
		`data-name="&lt;script&gt;alert(1)&lt;/script&gt;" data-state="END"`, `NOT_FOUND: gone &amp; &lt;away&gt;`,
		`<tr class="binding" data-model="m" data-sub-graph="entry">`, `h:1 h:3`,
		`<code class="bound">m:entry</code>`,
		`after 3 attempt(s), 2 model(s)`, `<td id="reload-error" class="err">tfs reload: unavailable</td>`,
		`(newest 2 of 2)`, `<tr class="recent-error" data-level="ERROR">`, `second &lt;b&gt;`, `err=x`,
		`since 2025-01-02 03:04:05Z`,
		`<tr class="failed-load" data-model="m:entry" data-version="3" data-serving="2" data-code="INVALID_ARGUMENT">`,
		`<td>version 2</td>`, `INVALID_ARGUMENT: export manifest /models/m/entry/3/model.json: &lt;EOF&gt;`,
		`<tr class="failed-load" data-model="m:ps_2" data-version="7" data-serving="0" data-code="NOT_FOUND">`,
		`<td><span class="badge bad">nothing</span></td>`,
		`<td id="tfs" data-running="false" data-restarts="2">`, `2 restart(s), 1 failed`,
		`last exit: exited with code -1 (killed)`, `restart due 2025-01-02 03:04:09Z`,
		`<meta http-equiv="refresh" content="3">`, `<body data-refresh-ms="3000" data-refreshes="0">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "not evaluated") {
		t.Error("page has unescaped text")
	}
	// Bindings sorted by model then sub graph; recent errors newest first.
	if i, j := strings.Index(page, `data-sub-graph="entry"`), strings.Index(page, `data-sub-graph="ps_0"`); i < 0 || j < i {
		t.Error("bindings not sorted")
	}
	if i, j := strings.Index(page, "second &lt;b&gt;"), strings.Index(page, ">first<"); i < 0 || j < i {
		t.Error("recent errors not newest first")
	}
	// A layout that could not be applied: its entries were not evaluated (the previous config
	// stays), whatever their Loaded says.
	src.rep.Layout.Error = "filter <boom>"
	rec = httptest.NewRecorder()
	NewHandler(src, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	for _, want := range []string{
		`<p id="layout-error" class="err">Not applied (the previous model server config stays): filter &lt;boom&gt;</p>`,
		`<span class="muted">not evaluated</span>`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("page with a layout error lacks %s", want)
		}
	}
	if strings.Contains(rec.Body.String(), "<boom>") || strings.Contains(rec.Body.String(), `"badge ok">loaded`) {
		t.Error("page with a layout error shows entries as loaded, or unescaped text")
	}

	// Nothing loaded from elsewhere: the page works offline.
	for _, ext := range []string{"http://", "https://", "src=", "<link"} {
		if strings.Contains(page, ext) {
			t.Errorf("page references an external asset (%s)", ext)
		}
	}
}

func TestZKSessionID(t *testing.T) {
	srv := zkfake.NewServer()
	c := srv.Client()
	defer c.Close()
	m := NewMetrics()
	tests := []struct {
		name string
		c    zk.Client
		want string
	}{
		{"zkfake", c, fmtID(c.SessionID())},
		{"instrumented", m.InstrumentZK(c), fmtID(c.SessionID())},
		{"a client that does not tell", &registrar{Client: c}, ""},
		{"nil", nil, ""},
	}
	if c.SessionID() == 0 {
		t.Fatal("zkfake client without a session id")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ZKSessionID(tc.c); got != tc.want {
				t.Errorf("ZKSessionID = %q, want %q", got, tc.want)
			}
		})
	}
	before := ZKSessionID(c)
	if err := c.ExpireSession(); err != nil {
		t.Fatal(err)
	}
	if after := ZKSessionID(c); after == before || after == "" {
		t.Errorf("session id %s after expiry, %s before", after, before)
	}
}

func fmtID(id int64) string { return "0x" + strconv.FormatInt(id, 16) }
