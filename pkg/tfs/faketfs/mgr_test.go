package faketfs

import (
	"math/rand/v2"
	"slices"
	"testing"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

func eventStrings(m *ModelMgr) []string {
	var out []string
	for {
		e, ok := m.Step()
		if !ok {
			return out
		}
		out = append(out, e.String())
	}
}

// TestStepOrder checks the FIFO order of the reference's queue: all STARTs first, then the
// LOADINGs they queued, and so on.
func TestStepOrder(t *testing.T) {
	m := NewModelMgr([]*servingconfig.ModelConfig{latest(t, "e", 1), latest(t, "p", 2)}, nil)
	if got := m.Pending(); got != 3 {
		t.Fatalf("Pending = %d, want 3", got)
	}
	want := []string{
		"e-1: START", "p-1: START", "p-2: START",
		"e-1: LOADING", "p-1: LOADING", "p-2: LOADING",
		"e-1: AVAILABLE", "p-1: AVAILABLE", "p-2: AVAILABLE",
	}
	if got := eventStrings(m); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if _, ok := m.Step(); ok {
		t.Error("Step on an empty queue handled an event")
	}
	if n := m.Drain(); n != 0 {
		t.Errorf("Drain on an empty queue = %d", n)
	}
}

// TestRemove: removing marks models unloading in order and stops at the first unknown name with
// the reference's KeyError text.
func TestRemove(t *testing.T) {
	m := NewModelMgr([]*servingconfig.ModelConfig{latest(t, "a", 1), latest(t, "b", 1)}, nil)
	m.Drain()
	err := m.Remove([]string{"a", "nope", "b"})
	if errkind.Of(err) != errkind.NotFound || err.Error() != "'nope'" {
		t.Errorf("Remove = %v (kind %v), want NotFound 'nope'", err, errkind.Of(err))
	}
	if got, want := m.AliveModelNames(), []string{"b"}; !slices.Equal(got, want) {
		t.Errorf("alive = %v, want %v", got, want)
	}
	if got, want := eventStrings(m), []string{"a-1: UNLOADING", "a-1: END"}; !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if _, ok := m.Snapshot()["a"]; ok {
		t.Error("a is still there after its END")
	}
}

// TestEventsForGoneModels: events of a removed model are dropped (logged), and an END for a
// version in any state drops it, as in the reference.
func TestEventsForGoneModels(t *testing.T) {
	m := NewModelMgr([]*servingconfig.ModelConfig{latest(t, "a", 2)}, nil)
	m.Tick() // 1, 2: START
	if err := m.Remove([]string{"a"}); err != nil {
		t.Fatal(err)
	}
	got := eventStrings(m)
	want := []string{
		"a-1: LOADING", "a-2: LOADING", // queued by the STARTs
		"a-1: UNLOADING", "a-2: UNLOADING",
		"a-1: AVAILABLE", "a-2: AVAILABLE", // no-ops: the versions are unloading
		"a-1: END", "a-2: END", // the last END removes the model
	}
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if s := m.Snapshot(); len(s) != 0 {
		t.Errorf("models left: %v", s)
	}
}

func TestNewRandomVersion(t *testing.T) {
	m := NewModelMgr([]*servingconfig.ModelConfig{
		latest(t, "a", 1), latest(t, "b", 1),
		mustConfig(t, "s", "/b/s", modelconfig.PolicySpecific, modelconfig.VersionData{N: 3}, nil),
	}, nil)
	m.Drain()
	if err := m.Remove([]string{"b"}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		name, _, ok := m.NewRandomVersion(r)
		if !ok || name != "a" {
			t.Fatalf("NewRandomVersion = %q, %v; only a is alive and not specific", name, ok)
		}
	}
	m.Drain()
	if got := m.Snapshot()["a"].Versions; len(got) != 1 || got[0].Version != 21 || got[0].State != StateAvailable {
		t.Errorf("a = %v, want only version 21 AVAILABLE", got)
	}
	empty := NewModelMgr(nil, nil)
	if _, _, ok := empty.NewRandomVersion(r); ok {
		t.Error("NewRandomVersion on no models succeeded")
	}
}

func TestPyRepr(t *testing.T) {
	tests := []struct {
		v         any
		repr, str string
	}{
		{nil, "None", "None"},
		{"/a/b", "'/a/b'", "/a/b"},
		{"it's", `"it's"`, "it's"},
		{`it's "q"`, `'it\'s "q"'`, `it's "q"`},
		{"a\\b\n\t\r\x01\x7f", `'a\\b\n\t\r\x01\x7f'`, "a\\b\n\t\r\x01\x7f"},
		{"é\u00a0\u2028😀", "'é\\xa0\\u2028😀'", "é\u00a0\u2028😀"},
		{int64(-3), "-3", "-3"},
		{7, "7", "7"},
		{true, "True", "True"},
		{[]int64{10, 20}, "[10, 20]", "[10, 20]"},
		{[]int64{}, "[]", "[]"},
		{Tuple{"update", "predict"}, "('update', 'predict')", "('update', 'predict')"},
		{Tuple{"x"}, "('x',)", "('x',)"},
	}
	for _, tc := range tests {
		if got := PyRepr(tc.v); got != tc.repr {
			t.Errorf("PyRepr(%#v) = %s, want %s", tc.v, got, tc.repr)
		}
		if got := PyStr(tc.v); got != tc.str {
			t.Errorf("PyStr(%#v) = %s, want %s", tc.v, got, tc.str)
		}
	}
}

func TestSimulatedVersionsBound(t *testing.T) {
	m := NewModelMgr([]*servingconfig.ModelConfig{latest(t, "big", 1<<32-1)}, nil)
	s := m.Snapshot()["big"]
	if len(s.Versions) != MaxSimulatedVersions || *s.Conf.NumVersions != 1<<32-1 {
		t.Errorf("%d versions simulated, num_versions %d", len(s.Versions), *s.Conf.NumVersions)
	}
}
