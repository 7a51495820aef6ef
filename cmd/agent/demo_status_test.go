package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
)

// TestDemoStatus: the demo's status names the ZooKeeper it really uses (the in-process one, not
// example.conf's 127.0.0.1:2181 where nothing listens), becomes ready, and serves the status page
// and the debug endpoints.
func TestDemoStatus(t *testing.T) {
	leakcheck.Check(t)
	var stdout, stderr syncbuf.Buffer
	r, stop := started(t, nil, &stdout, &stderr)
	defer func() {
		if code := stop(); code != 0 {
			t.Errorf("exit %d\nstderr:\n%s", code, stderr.String())
		}
	}()
	var rep agentstatus.Report
	getJSON(t, r.StatusURL+"/status", &rep)
	if rep.ZooKeeper.Servers != "in-process" || rep.ZooKeeper.State != "CONNECTED" {
		t.Errorf("zookeeper = %+v, want in-process, CONNECTED", rep.ZooKeeper)
	}
	var rd agentstatus.Readiness
	eventually(t, "the demo to be ready", func() bool {
		resp, err := http.Get(r.StatusURL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode == 200 && rd.Ready
	})
	for path, want := range map[string]string{
		"/":             `<td id="zk-servers" class="mono">in-process</td>`,
		"/debug/pprof/": "goroutine",
		"/debug/vars":   `"memstats"`,
	} {
		resp, err := http.Get(r.StatusURL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, lacks %s", path, resp.StatusCode, want)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	for _, w := range []string{"status page;", "/readyz", "in a browser"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
		}
	}
}
