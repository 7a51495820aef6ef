package agentv3

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/agent/v3/inproc"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
)

// stubServable is a loaded version that answers nothing.
type stubServable struct{}

func (stubServable) Signatures() map[string]*tfprotobuf.SignatureDef {
	return map[string]*tfprotobuf.SignatureDef{modelserver.DefaultSignature: {MethodName: modelserver.PredictMethod}}
}

func (stubServable) Predict(context.Context, string, map[string]*tfframework.TensorProto) (map[string]*tfframework.TensorProto, error) {
	return nil, nil
}

func (stubServable) Close() error { return nil }

// manifestLoader loads a version whose model.json says "ok"; any other content is a corrupt
// export, as pkg/export's loaders report a truncated manifest (errkind.Value, naming the file).
func manifestLoader(_ context.Context, src modelserver.Source) (modelserver.Servable, error) {
	file := filepath.Join(src.Dir, "model.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, errkind.New(errkind.NotFound, "export manifest %s does not exist", file)
	}
	if string(b) != "ok" {
		return nil, errkind.New(errkind.Value, "export manifest %s: unexpected EOF", file)
	}
	return stubServable{}, nil
}

// writeVersion publishes version v of base whole (written as temp-v, then renamed, as the
// exporter does), good or corrupt.
func writeVersion(t *testing.T, base string, v int64, good bool) {
	t.Helper()
	tmp := filepath.Join(base, "temp-"+strconv.FormatInt(v, 10))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	content := "ok"
	if !good {
		content = `{"format": "monolith-go`
	}
	if err := os.WriteFile(filepath.Join(tmp, "model.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(base, strconv.FormatInt(v, 10))); err != nil {
		t.Fatal(err)
	}
}

// modelServerProc is the model server (pkg/modelserver, what cmd/model_server runs) as the
// agent's TF Serving, in this process on a free port, loading with manifestLoader.
func modelServerProc(file string, log *slog.Logger) *inproc.Process {
	return inproc.NewProcess("in-process model server", file, func() (inproc.Server, func(), error) {
		srv, err := modelserver.New(nil, modelserver.Options{
			Addr:    "127.0.0.1:0",
			Manager: modelserver.ManagerOptions{Loaders: modelserver.Loaders{modelserver.KindEntry: manifestLoader, modelserver.KindPS: manifestLoader}},
			// No reload RPC: the server reads the agent's config file as it changes.
			ConfigFile: file, ConfigPollInterval: 20 * time.Millisecond, FileSystemPollInterval: 20 * time.Millisecond, Logger: log,
		})
		if err != nil {
			return nil, nil, err
		}
		return inprocModelServer{srv}, nil, nil
	})
}

type inprocModelServer struct{ *modelserver.Server }

func (s inprocModelServer) Status(spec *servingapis.ModelSpec) []*servingapis.ModelVersionStatus {
	list, _ := s.Manager().Status(spec)
	return list
}

// declareAt declares model's sub graphs under latest with their base paths under base.
func declareAt(t *testing.T, c zk.Client, model, base string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		data := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest"}`, filepath.Join(base, sub))
		if _, err := c.Create(context.Background(), "/gip/saved_models/"+model+"/"+sub, []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// readyz is /readyz's answer for a.
func readyz(t *testing.T, a *Agent) (int, agentstatus.Readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	agentstatus.NewHandler(a, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	var rd agentstatus.Readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &rd); err != nil {
		t.Fatalf("/readyz: %v: %s", err, rec.Body)
	}
	return rec.Code, rd
}

// TestFailedLoadsReported runs agent v3 with the model server as its TF Serving on versions on
// disk, some corrupt: /readyz is 503 naming the saved model while one of the layout's saved
// models has no AVAILABLE version (its only version corrupt), and 200 once it has one; a corrupt
// version of a model that serves an older one (the newest at start, or a new one while serving)
// leaves it ready, and every failed load is on /status (with the version served instead), on
// /metrics, and logged once at WARN however many syncs see it.
func TestFailedLoadsReported(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	for _, sub := range []string{"entry", "ps_0"} {
		if err := os.MkdirAll(filepath.Join(base, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeVersion(t, filepath.Join(base, "entry"), 1, false) // the entry's only version: corrupt
	writeVersion(t, filepath.Join(base, "ps_0"), 1, true)
	writeVersion(t, filepath.Join(base, "ps_0"), 2, false) // ps_0's newest at start: corrupt

	ring := agentstatus.NewErrorRing(100)
	log := slog.New(ring.Handler(slog.DiscardHandler))
	m := agentstatus.NewMetrics()
	a, ctl := fakeAgent(t, nil, nil, func(o *Options) {
		o.TFS = func(file string) (tfs.Process, error) { return modelServerProc(file, quiet), nil }
		o.Logger, o.Metrics = log, m
		o.SyncInterval, o.PendingSyncInterval = 20*time.Millisecond, 10*time.Millisecond
	})
	declareAt(t, ctl, "m", base, "entry", "ps_0")
	publish(t, ctl, "m", "entry", "ps_0")
	settle(t, a)

	failures := func() []agentstatus.FailedLoad { return a.Status(context.Background()).FailedLoads }
	eventually(t, "the failed loads of m:entry 1 and m:ps_0 2", func() bool { return len(failures()) == 2 })
	got := failures()
	if f := got[0]; f.Model != "m:entry" || f.Version != 1 || f.ErrorCode != "INVALID_ARGUMENT" || f.ServingVersion != 0 ||
		!strings.Contains(f.ErrorMessage, filepath.Join(base, "entry", "1", "model.json")) {
		t.Errorf("failed load %+v", f)
	}
	eventually(t, "m:ps_0 to serve version 1", func() bool {
		f := failures()
		return len(f) == 2 && f[1].Model == "m:ps_0" && f[1].Version == 2 && f[1].ServingVersion == 1
	})
	code, rd := readyz(t, a)
	if code != 503 || len(rd.Reasons) != 1 || !strings.HasPrefix(rd.Reasons[0], "saved model m:entry: no AVAILABLE version (version 1 END: INVALID_ARGUMENT: ") {
		t.Errorf("/readyz = %d %q, want 503 for m:entry alone", code, rd.Reasons)
	}

	// A good entry version: ready. A corrupt ps_0 version while it serves: still ready, reported.
	writeVersion(t, filepath.Join(base, "entry"), 2, true)
	eventually(t, "ready", func() bool { c, _ := readyz(t, a); return c == 200 })
	writeVersion(t, filepath.Join(base, "ps_0"), 3, false)
	eventually(t, "m:ps_0 3's failure", func() bool {
		f := failures()
		return len(f) == 3 && f[1].Model == "m:ps_0" && f[1].Version == 3 && f[1].ServingVersion == 1
	})
	if c, rd := readyz(t, a); c != 200 {
		t.Errorf("/readyz = %d %q with m:ps_0 serving version 1", c, rd.Reasons)
	}
	eventually(t, "the bindings", func() bool {
		return slices.Equal(a.Status(context.Background()).Bound, []string{"m:entry", "m:ps_0"})
	})
	// Several syncs later each failure was logged once.
	n := syncCount(t, m)
	eventually(t, "more syncs", func() bool { return syncCount(t, m) >= n+5 })
	logged := map[string]int{}
	attrs := regexp.MustCompile(`saved_model=(\S+) version=(\d+) `)
	for _, r := range ring.Records() {
		if m := attrs.FindStringSubmatch(r.Attrs); r.Level == "WARN" && r.Message == "tf serving failed to load a version of a saved model" && m != nil {
			logged[m[1]+" "+m[2]]++
		}
	}
	if want := map[string]int{"m:entry 1": 1, "m:ps_0 2": 1, "m:ps_0 3": 1}; fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Errorf("WARN records of failed loads %v, want %v", logged, want)
	}
	body := scrape(t, m)
	for _, want := range []string{
		`monolith_agent_tfs_failed_loads{model="m:entry"} 1`,
		`monolith_agent_tfs_failed_loads{model="m:ps_0"} 2`,
		`monolith_agent_tfs_load_failures_total{model="m:entry"} 1`,
		`monolith_agent_tfs_load_failures_total{model="m:ps_0"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// syncCount is how many binding syncs the metrics counted.
func syncCount(t *testing.T, m *agentstatus.Metrics) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(scrape(t, m), "\n") {
		if strings.HasPrefix(line, "monolith_agent_binding_syncs_total{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

// TestLatestOnceFailedVersion: a latest_once saved model (agentctl decl's policy of the PS
// sub-graphs) is pinned to the newest version on disk; when TF Serving fails to load it the pin
// moves to the next older version, and on, so the model serves the newest version that loads
// instead of none, the failure reported. Newer versions that appear later stay unserved (latest
// once).
func TestLatestOnceFailedVersion(t *testing.T) {
	leakcheck.Check(t)
	base := filepath.Join(t.TempDir(), "ps_0")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	writeVersion(t, base, 1, true)
	writeVersion(t, base, 2, false)
	writeVersion(t, base, 3, false)
	ring := agentstatus.NewErrorRing(100)
	log := slog.New(ring.Handler(slog.DiscardHandler))
	a, ctl := fakeAgent(t, nil, nil, func(o *Options) {
		o.TFS = func(file string) (tfs.Process, error) { return modelServerProc(file, quiet), nil }
		o.Logger = log
		o.SyncInterval, o.PendingSyncInterval = 20*time.Millisecond, 10*time.Millisecond
	})
	data := fmt.Sprintf(`{"model_base_path": %q, "version_policy": "latest_once"}`, base)
	if _, err := ctl.Create(context.Background(), "/gip/saved_models/m/ps_0", []byte(data), zk.CreateOptions{MakePath: true}); err != nil {
		t.Fatal(err)
	}
	publish(t, ctl, "m", "ps_0")
	settle(t, a)
	eventually(t, "ready, m:ps_0 serving version 1", func() bool {
		c, _ := readyz(t, a)
		f := a.Status(context.Background()).FailedLoads
		return c == 200 && len(f) == 2 && f[0].Version == 3 && f[1].Version == 2 && f[0].ServingVersion == 1
	})
	text, err := a.TFS().ModelConfigText()
	if err != nil || !strings.Contains(text, "specific {\n        versions: 1\n") {
		t.Errorf("model config file (%v):\n%s", err, text)
	}
	moved := 0
	for _, r := range ring.Records() {
		if r.Message == "latest_once saved model moved to an older version: its pinned version failed to load" {
			moved++
		}
	}
	if moved != 2 {
		t.Errorf("%d pin moves logged, want 2 (3 -> 2 -> 1)", moved)
	}
	writeVersion(t, base, 4, true)
	time.Sleep(100 * time.Millisecond)
	if text2, _ := a.TFS().ModelConfigText(); text2 != text {
		t.Errorf("a newer version changed the latest_once config:\n%s", text2)
	}
}
