package modelserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

func TestKindOf(t *testing.T) {
	tests := []struct{ model, base, want string }{
		{"m:entry", "/x/y", KindEntry},
		{"m:ps_0", "/x/y", KindPS},
		{"m:ps_12", "", KindPS},
		{"ps_3", "", KindPS},
		{"entry", "", KindEntry},
		{"default", "/opt/tiger/monolith_serving/dat/saved_models/entry", KindEntry},
		{"x", "/export/ps_1/", KindPS},
		{"m:ps_01", "/x", ""},
		{"m:dense", "/x/dense", ""},
		{"m:ps_", "/x", ""},
	}
	for _, tc := range tests {
		if got := KindOf(tc.model, tc.base); got != tc.want {
			t.Errorf("KindOf(%q, %q) = %q, want %q", tc.model, tc.base, got, tc.want)
		}
	}
}

// TestPolicies checks the versions each policy serves among those on disk; temporary directories
// and files are no versions.
func TestPolicies(t *testing.T) {
	leakcheck.Check(t)
	tests := []struct {
		name   string
		policy string
		data   []int64
		want   string
	}{
		{"latest 1", modelconfig.PolicyLatest, []int64{1}, "3:AVAILABLE"},
		{"latest 2", modelconfig.PolicyLatest, []int64{2}, "3:AVAILABLE 2:AVAILABLE"},
		{"latest 0 is 1", modelconfig.PolicyLatest, []int64{0}, "3:AVAILABLE"},
		{"latest more than there are", modelconfig.PolicyLatest, []int64{7}, "3:AVAILABLE 2:AVAILABLE 1:AVAILABLE"},
		{"all", modelconfig.PolicyAll, nil, "3:AVAILABLE 2:AVAILABLE 1:AVAILABLE"},
		{"specific (resolved latest_once)", modelconfig.PolicySpecific, []int64{2}, "2:AVAILABLE"},
		{"specific, one missing", modelconfig.PolicySpecific, []int64{1, 9}, "1:AVAILABLE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			mkVersions(t, base, 1, 2, 3)
			os.MkdirAll(filepath.Join(base, "temp-4"), 0o755)
			os.WriteFile(filepath.Join(base, "5"), nil, 0o644)
			l := newTestLoader()
			m := NewManager(ManagerOptions{Loaders: l.loaders()})
			defer closeManager(t, m)
			if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:ps_0", base, tc.policy, tc.data...)}); err != nil {
				t.Fatal(err)
			}
			waitStates(t, m, "m:ps_0", tc.want)
		})
	}
	t.Run("no policy is latest 1", func(t *testing.T) {
		base := t.TempDir()
		mkVersions(t, base, 4, 10)
		m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
		defer closeManager(t, m)
		if err := m.Reload([]*servingconfig.ModelConfig{{Name: "m:entry", BasePath: base}}); err != nil {
			t.Fatal(err)
		}
		waitStates(t, m, "m:entry", "10:AVAILABLE")
	})
}

// TestNewVersionReplacesOld: under latest 1 a new version loads while the old one serves, and the
// old one unloads (closed) only once the new one is available.
func TestNewVersionReplacesOld(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	l := newTestLoader()
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:entry", "1:AVAILABLE")
	gate := l.gate(filepath.Join(base, "2"))
	mkVersions(t, base, 2)
	m.Sync()
	waitStates(t, m, "m:entry", "2:LOADING 1:AVAILABLE")
	h, err := m.Acquire(&servingapis.ModelSpec{Name: "m:entry"})
	if err != nil || h.Version != 1 {
		t.Fatalf("while 2 loads: acquired %v, %v; want version 1", h, err)
	}
	h.Release()
	close(gate)
	waitStates(t, m, "m:entry", "2:AVAILABLE 1:END")
	if !l.servable(filepath.Join(base, "1")).closed.Load() {
		t.Error("version 1 ended but was not closed")
	}
	h, err = m.Acquire(&servingapis.ModelSpec{Name: "m:entry"})
	if err != nil || h.Version != 2 {
		t.Fatalf("after: acquired %v, %v; want version 2", h, err)
	}
	h.Release()
}

// TestFailedNewVersionKeepsOld: a new version that fails to load leaves the old one serving.
func TestFailedNewVersionKeepsOld(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	l := newTestLoader()
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:entry", "1:AVAILABLE")
	dir2 := filepath.Join(base, "2")
	l.failWith(dir2, errkind.New(errkind.Value, "export entry %s/model.json: format \"x\"", dir2))
	mkVersions(t, base, 2)
	m.Sync()
	waitStates(t, m, "m:entry", "2:END 1:AVAILABLE")
	m.Sync() // a failed version is not tried again under the same config
	if n := l.callsOf(dir2); n != 1 {
		t.Errorf("version 2 loaded %d times, want 1", n)
	}
}

// TestSlowLoadBlocksNothing: while one model's version takes long to load (a 1 GB PS shard),
// GetModelStatus answers at once and the other models load and serve.
func TestSlowLoadBlocksNothing(t *testing.T) {
	leakcheck.Check(t)
	slow, fast := t.TempDir(), t.TempDir()
	mkVersions(t, slow, 1)
	mkVersions(t, fast, 1)
	l := newTestLoader()
	gate := l.gate(filepath.Join(slow, "1"))
	defer close(gate)
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{
		modelConfig(t, "m:ps_0", slow, modelconfig.PolicyLatest, 1),
		modelConfig(t, "m:ps_1", fast, modelconfig.PolicyLatest, 1),
	}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:ps_1", "1:AVAILABLE")
	done := make(chan string, 1)
	go func() { done <- states(m, "m:ps_0") }()
	select {
	case got := <-done:
		if got != "1:LOADING" {
			t.Errorf("slow model: %q, want 1:LOADING", got)
		}
	case <-time.After(time.Second):
		t.Fatal("GetModelStatus blocked by a load")
	}
	h, err := m.Acquire(&servingapis.ModelSpec{Name: "m:ps_1"})
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
}

// TestLoadThreads: with one load slot the second version waits in START.
func TestLoadThreads(t *testing.T) {
	leakcheck.Check(t)
	a, b := t.TempDir(), t.TempDir()
	mkVersions(t, a, 1)
	mkVersions(t, b, 1)
	l := newTestLoader()
	gateA, gateB := l.gate(filepath.Join(a, "1")), l.gate(filepath.Join(b, "1"))
	m := NewManager(ManagerOptions{Loaders: l.loaders(), LoadThreads: 1})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "a:ps_0", a, modelconfig.PolicyLatest, 1), modelConfig(t, "b:ps_0", b, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sa, sb := states(m, "a:ps_0"), states(m, "b:ps_0")
		if (sa == "1:LOADING" && sb == "1:START") || (sa == "1:START" && sb == "1:LOADING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("states %q and %q, want one LOADING and one START", sa, sb)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(gateA)
	close(gateB)
	waitStates(t, m, "a:ps_0", "1:AVAILABLE")
	waitStates(t, m, "b:ps_0", "1:AVAILABLE")
}

// TestFailedLoad: a version that cannot load ends in END with an error naming its directory; a
// corrupt export is not retried, an I/O error is (up to MaxLoadRetries).
func TestFailedLoad(t *testing.T) {
	leakcheck.Check(t)
	tests := []struct {
		name      string
		errs      []error
		wantCalls int
		want      string
		wantCode  tfprotobuf.Code
	}{
		{"corrupt export", []error{errkind.New(errkind.Value, "bad checksum")}, 1, "1:END", tfprotobuf.Code_INVALID_ARGUMENT},
		{"missing file", []error{errkind.New(errkind.NotFound, "no model.json")}, 1, "1:END", tfprotobuf.Code_NOT_FOUND},
		{"permanent", []error{Permanent(errors.New("no"))}, 1, "1:END", tfprotobuf.Code_INTERNAL},
		{"transient, then loads", []error{errors.New("i/o timeout")}, 2, "1:AVAILABLE", tfprotobuf.Code_OK},
		{"transient every time", []error{errors.New("e1"), errors.New("e2"), errors.New("e3"), errors.New("e4")}, 3, "1:END", tfprotobuf.Code_INTERNAL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			mkVersions(t, base, 1)
			dir := filepath.Join(base, "1")
			l := newTestLoader()
			l.failWith(dir, tc.errs...)
			m := NewManager(ManagerOptions{Loaders: l.loaders(), MaxLoadRetries: 2, LoadRetryInterval: time.Millisecond})
			defer closeManager(t, m)
			if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:ps_0", base, modelconfig.PolicyLatest, 1)}); err != nil {
				t.Fatal(err)
			}
			waitStates(t, m, "m:ps_0", tc.want)
			if n := l.callsOf(dir); n != tc.wantCalls {
				t.Errorf("%d load attempts, want %d", n, tc.wantCalls)
			}
			list, _ := m.Status(&servingapis.ModelSpec{Name: "m:ps_0"})
			st := list[0].GetStatus()
			if st.GetErrorCode() != tc.wantCode {
				t.Errorf("error code %v, want %v (%s)", st.GetErrorCode(), tc.wantCode, st.GetErrorMessage())
			}
			if tc.wantCode != tfprotobuf.Code_OK && !strings.Contains(st.GetErrorMessage(), dir) {
				t.Errorf("error message %q does not name %s", st.GetErrorMessage(), dir)
			}
		})
	}
	t.Run("no loader for the kind", func(t *testing.T) {
		base := t.TempDir()
		mkVersions(t, base, 1)
		m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
		defer closeManager(t, m)
		if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:dense", base, modelconfig.PolicyLatest, 1)}); err != nil {
			t.Fatal(err)
		}
		waitStates(t, m, "m:dense", "1:END")
		list, _ := m.Status(&servingapis.ModelSpec{Name: "m:dense"})
		if msg := list[0].GetStatus().GetErrorMessage(); !strings.Contains(msg, "no loader") || !strings.Contains(msg, base) {
			t.Errorf("message %q", msg)
		}
	})
}

// TestReload: models leave, come and come back; removed models report their ended versions.
func TestReload(t *testing.T) {
	leakcheck.Check(t)
	a, b := t.TempDir(), t.TempDir()
	mkVersions(t, a, 1)
	mkVersions(t, b, 5)
	l := newTestLoader()
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	ca, cb := modelConfig(t, "a:entry", a, modelconfig.PolicyLatest, 1), modelConfig(t, "b:entry", b, modelconfig.PolicyLatest, 1)
	if err := m.Reload([]*servingconfig.ModelConfig{ca}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "a:entry", "1:AVAILABLE")
	if err := m.Reload([]*servingconfig.ModelConfig{cb}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "b:entry", "5:AVAILABLE")
	waitStates(t, m, "a:entry", "1:END")
	if _, err := m.Acquire(&servingapis.ModelSpec{Name: "a:entry"}); status.Code(err) != codes.NotFound {
		t.Errorf("removed model acquired: %v", err)
	}
	if err := m.Reload([]*servingconfig.ModelConfig{ca, cb}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "a:entry", "1:AVAILABLE")
	if n := l.callsOf(filepath.Join(a, "1")); n != 2 {
		t.Errorf("a loaded %d times, want 2", n)
	}
	// The same config again changes nothing.
	if err := m.Reload([]*servingconfig.ModelConfig{ca, cb}); err != nil {
		t.Fatal(err)
	}
	if n := l.callsOf(filepath.Join(b, "5")); n != 1 {
		t.Errorf("b loaded %d times, want 1", n)
	}
	// A pinned version (latest_once resolved to specific) moves only when the config does.
	mkVersions(t, b, 6)
	pinned := modelConfig(t, "b:entry", b, modelconfig.PolicySpecific, 5)
	if err := m.Reload([]*servingconfig.ModelConfig{ca, pinned}); err != nil {
		t.Fatal(err)
	}
	m.Sync()
	waitStates(t, m, "b:entry", "5:AVAILABLE")
	if err := m.Reload([]*servingconfig.ModelConfig{ca, modelConfig(t, "b:entry", b, modelconfig.PolicySpecific, 6)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "b:entry", "6:AVAILABLE 5:END")
}

// TestBadConfigRefused: a bad reload changes nothing.
func TestBadConfigRefused(t *testing.T) {
	leakcheck.Check(t)
	m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
	defer closeManager(t, m)
	tests := []struct {
		name    string
		configs []*servingconfig.ModelConfig
		want    string
	}{
		{"no name", []*servingconfig.ModelConfig{{BasePath: "/x"}}, "no name"},
		{"twice", []*servingconfig.ModelConfig{{Name: "a", BasePath: "/x"}, {Name: "a", BasePath: "/y"}}, "twice"},
		{"no base path", []*servingconfig.ModelConfig{{Name: "a"}}, "no base_path"},
		{"platform", []*servingconfig.ModelConfig{{Name: "a", BasePath: "/x", ModelPlatform: "pytorch"}}, "pytorch"},
	}
	for _, tc := range tests {
		err := m.Reload(tc.configs)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT with %q", tc.name, err, tc.want)
		}
	}
	if got := m.Versions(); len(got) != 0 {
		t.Errorf("versions after refused reloads: %v", got)
	}
}

// TestUnloadWaitsForRequests: a removed model's version stays UNLOADING, not closed, while a
// request holds it.
func TestUnloadWaitsForRequests(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	l := newTestLoader()
	l.holdNext = make(chan struct{})
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:ps_0", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:ps_0", "1:AVAILABLE")
	h, err := m.Acquire(&servingapis.ModelSpec{Name: "m:ps_0"})
	if err != nil {
		t.Fatal(err)
	}
	predicted := make(chan error, 1)
	go func() {
		defer h.Release()
		_, err := h.Predict(context.Background(), DefaultSignature, nil)
		predicted <- err
	}()
	<-l.servable(filepath.Join(base, "1")).predicting
	if err := m.Reload(nil); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:ps_0", "1:UNLOADING")
	time.Sleep(20 * time.Millisecond)
	if got := states(m, "m:ps_0"); got != "1:UNLOADING" || l.servable(filepath.Join(base, "1")).closed.Load() {
		t.Fatalf("with a request in flight: %s, closed %v", got, l.servable(filepath.Join(base, "1")).closed.Load())
	}
	close(l.holdNext)
	if err := <-predicted; err != nil {
		t.Errorf("the request in flight failed: %v", err)
	}
	waitStates(t, m, "m:ps_0", "1:END")
}

// TestUnloadWhileLoading: a version no longer aspired while it loads is cancelled, without error.
func TestUnloadWhileLoading(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	l := newTestLoader()
	gate := l.gate(filepath.Join(base, "1"))
	defer close(gate)
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:ps_0", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:ps_0", "1:LOADING")
	if err := m.Reload(nil); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:ps_0", "1:END")
	list, _ := m.Status(&servingapis.ModelSpec{Name: "m:ps_0"})
	if code := list[0].GetStatus().GetErrorCode(); code != tfprotobuf.Code_OK {
		t.Errorf("cancelled load reported error %v", code)
	}
}

// TestMissingBasePath: a base path that does not exist (the agent's default model) serves no
// version until it appears; once it cannot be listed, what serves goes on serving.
func TestMissingBasePath(t *testing.T) {
	leakcheck.Check(t)
	base := filepath.Join(t.TempDir(), "later")
	m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	if got := states(m, "m:entry"); !strings.Contains(got, "NotFound") || !strings.Contains(got, "Could not find any versions of model m:entry") {
		t.Errorf("before the base path exists: %s", got)
	}
	mkVersions(t, base, 3)
	m.Sync()
	waitStates(t, m, "m:entry", "3:AVAILABLE")
	// A base path that cannot be listed (here: gone) keeps what serves.
	if err := os.RemoveAll(base); err != nil {
		t.Fatal(err)
	}
	m.Sync()
	if got := states(m, "m:entry"); got != "3:AVAILABLE" {
		t.Errorf("with a base path that cannot be listed: %s", got)
	}
}

// TestEmptyBasePathUnloads: a base path left with no version unloads the model's versions.
func TestEmptyBasePathUnloads(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:entry", "1:AVAILABLE")
	os.Remove(filepath.Join(base, "1"))
	m.Sync()
	waitStates(t, m, "m:entry", "1:END")
}

// TestAcquireAndStatusSpecs: version numbers, labels and the newest available version.
func TestAcquireAndStatusSpecs(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1, 2)
	m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
	defer closeManager(t, m)
	mc := modelConfig(t, "m:ps_0", base, modelconfig.PolicyAll)
	mc.VersionLabels = map[string]int64{"stable": 1, "gone": 9}
	if err := m.Reload([]*servingconfig.ModelConfig{mc}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:ps_0", "2:AVAILABLE 1:AVAILABLE")
	num := func(n int64) *servingapis.ModelSpec {
		return &servingapis.ModelSpec{Name: "m:ps_0", VersionChoice: &servingapis.ModelSpec_Version{Version: wrapperspb.Int64(n)}}
	}
	label := func(l string) *servingapis.ModelSpec {
		return &servingapis.ModelSpec{Name: "m:ps_0", VersionChoice: &servingapis.ModelSpec_VersionLabel{VersionLabel: l}}
	}
	tests := []struct {
		name        string
		spec        *servingapis.ModelSpec
		wantVersion int64
		wantCode    codes.Code
	}{
		{"newest", &servingapis.ModelSpec{Name: "m:ps_0"}, 2, codes.OK},
		{"number", num(1), 1, codes.OK},
		{"label", label("stable"), 1, codes.OK},
		{"missing number", num(7), 0, codes.NotFound},
		{"label of a missing version", label("gone"), 0, codes.NotFound},
		{"unknown label", label("canary"), 0, codes.InvalidArgument},
		{"unknown model", &servingapis.ModelSpec{Name: "x"}, 0, codes.NotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := m.Acquire(tc.spec)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("Acquire: %v, want %v", err, tc.wantCode)
			}
			if err == nil {
				if h.Version != tc.wantVersion {
					t.Errorf("version %d, want %d", h.Version, tc.wantVersion)
				}
				h.Release()
				h.Release() // harmless
			}
			list, err := m.Status(tc.spec)
			if tc.wantCode == codes.OK {
				if err != nil || (tc.spec.GetVersionChoice() != nil && (len(list) != 1 || list[0].GetVersion() != tc.wantVersion)) {
					t.Errorf("Status: %v, %v", list, err)
				}
			} else if status.Code(err) != tc.wantCode {
				t.Errorf("Status: %v, want %v", err, tc.wantCode)
			}
		})
	}
}

// TestEndedVersionsBounded: a model whose versions keep coming reports a bounded number of ended
// ones.
func TestEndedVersionsBounded(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	m := NewManager(ManagerOptions{Loaders: newTestLoader().loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	const n = maxEndedVersions + 5
	for v := int64(1); v <= n; v++ {
		mkVersions(t, base, v)
		m.Sync()
		waitStates(t, m, "m:entry", fmt.Sprintf("%d:AVAILABLE", v)+endedList(v-1))
	}
}

// endedList is " k:END ..." for the ended versions below v a model keeps, newest first.
func endedList(v int64) string {
	out := ""
	for k := v; k >= 1 && k > v-maxEndedVersions; k-- {
		out += fmt.Sprintf(" %d:END", k)
	}
	return out
}

// TestNewestVersionThatLoads: at start (the first config) and on a reload, a newer version that
// fails to load is reported (END with its error) and skipped: the newest version that loads is
// served, never none while one loads. TF Serving's latest policy keeps aspiring the failed one
// and serves nothing.
func TestNewestVersionThatLoads(t *testing.T) {
	leakcheck.Check(t)
	corrupt := func(dir string) error {
		return errkind.New(errkind.Value, "export manifest %s/model.json: unexpected EOF", dir)
	}
	tests := []struct {
		name    string
		n       int64   // latest n
		fail    []int64 // versions whose loads fail
		want    string
		serving int64 // the version Acquire gets; 0: none
	}{
		// Version 1, older than the one served, is never aspired: it has no state.
		{"newest corrupt", 1, []int64{3}, "3:END 2:AVAILABLE", 2},
		{"two newest corrupt", 1, []int64{2, 3}, "3:END 2:END 1:AVAILABLE", 1},
		{"latest 2, newest corrupt", 2, []int64{3}, "3:END 2:AVAILABLE 1:AVAILABLE", 2},
		{"every version corrupt", 1, []int64{1, 2, 3}, "3:END 2:END 1:END", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			mkVersions(t, base, 1, 2, 3)
			l := newTestLoader()
			for _, v := range tc.fail {
				dir := filepath.Join(base, fmt.Sprint(v))
				l.failWith(dir, corrupt(dir))
			}
			m := NewManager(ManagerOptions{Loaders: l.loaders()})
			defer closeManager(t, m)
			if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:ps_0", base, modelconfig.PolicyLatest, tc.n)}); err != nil {
				t.Fatal(err)
			}
			waitStates(t, m, "m:ps_0", tc.want)
			h, err := m.Acquire(&servingapis.ModelSpec{Name: "m:ps_0"})
			switch {
			case tc.serving == 0 && status.Code(err) != codes.NotFound:
				t.Errorf("Acquire = %v, %v; want NOT_FOUND", h, err)
			case tc.serving != 0 && (err != nil || h.Version != tc.serving):
				t.Errorf("Acquire = %v, %v; want version %d", h, err, tc.serving)
			}
			if h != nil {
				h.Release()
			}
			m.Sync() // the failed versions are not tried again under the same config
			for _, v := range tc.fail {
				if n := l.callsOf(filepath.Join(base, fmt.Sprint(v))); n != 1 {
					t.Errorf("version %d loaded %d times, want 1", v, n)
				}
			}
			list, _ := m.Status(&servingapis.ModelSpec{Name: "m:ps_0", VersionChoice: &servingapis.ModelSpec_Version{Version: wrapperspb.Int64(3)}})
			if st := list[0].GetStatus(); st.GetErrorCode() != tfprotobuf.Code_INVALID_ARGUMENT || !strings.Contains(st.GetErrorMessage(), filepath.Join(base, "3")) {
				t.Errorf("version 3's status %v", st)
			}
		})
	}
}

// TestFailedVersionStaysReported: a version that failed to load stays in GetModelStatus (END with
// its error) while it is on disk, however many versions come after it; once it leaves the disk it
// goes with the other ended versions.
func TestFailedVersionStaysReported(t *testing.T) {
	leakcheck.Check(t)
	base := t.TempDir()
	mkVersions(t, base, 1)
	l := newTestLoader()
	m := NewManager(ManagerOptions{Loaders: l.loaders()})
	defer closeManager(t, m)
	if err := m.Reload([]*servingconfig.ModelConfig{modelConfig(t, "m:entry", base, modelconfig.PolicyLatest, 1)}); err != nil {
		t.Fatal(err)
	}
	waitStates(t, m, "m:entry", "1:AVAILABLE")
	dir2 := filepath.Join(base, "2")
	l.failWith(dir2, errkind.New(errkind.Value, "corrupt"))
	mkVersions(t, base, 2)
	m.Sync()
	waitStates(t, m, "m:entry", "2:END 1:AVAILABLE")
	const last = maxEndedVersions + 4
	for v := int64(3); v <= last; v++ {
		mkVersions(t, base, v)
		m.Sync()
		waitStates(t, m, "m:entry", fmt.Sprintf("%d:AVAILABLE", v)+endedListWith(v-1, 2))
	}
	if err := os.RemoveAll(dir2); err != nil {
		t.Fatal(err)
	}
	m.Sync()
	mkVersions(t, base, last+1)
	m.Sync()
	waitStates(t, m, "m:entry", fmt.Sprintf("%d:AVAILABLE", last+1)+endedList(last))
}

// endedListWith is endedList(v) with version failed kept wherever it falls.
func endedListWith(v, failed int64) string {
	out, n := "", 0
	for k := v; k >= 1; k-- {
		switch {
		case k == failed:
			out += fmt.Sprintf(" %d:END", k)
		case n < maxEndedVersions:
			out += fmt.Sprintf(" %d:END", k)
			n++
		}
	}
	return out
}
