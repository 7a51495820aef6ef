package runner

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/runner/tbevent"
)

// goldenFile is written by pkg/runner/tbevent/testdata/gen_golden.py: event files computed with
// Python's protobuf runtime and a hand-made TFRecord framing.
const goldenFile = "tbevent/testdata/golden.json"

type scenario struct {
	Name     string `json:"name"`
	Scenario struct {
		Hostname  string `json:"hostname"`
		OpenNS    int64  `json:"open_ns"`
		Summaries []struct {
			NS     int64               `json:"ns"`
			Step   int64               `json:"step"`
			Values [][]json.RawMessage `json:"values"`
		} `json:"summaries"`
	} `json:"scenario"`
	FileName string `json:"file_name"`
	File     string `json:"file"`
}

// TestWriteSummaryGoldenEventFile: BaseRunner.write_summary's summaries, written through a real
// event file writer, are byte for byte the reference's event file, and read back with every CRC
// verified.
func TestWriteSummaryGoldenEventFile(t *testing.T) {
	var g struct {
		Scenarios []scenario `json:"scenarios"`
	}
	refcases.ReadJSON(t, goldenFile, &g)
	var sc *scenario
	for i := range g.Scenarios {
		if g.Scenarios[i].Name == "write_summary" {
			sc = &g.Scenarios[i]
		}
	}
	if sc == nil {
		t.Fatal("no write_summary scenario in the golden file")
	}
	now := time.Unix(0, sc.Scenario.OpenNS)
	w, err := tbevent.NewWriter(t.TempDir(), tbevent.Options{Now: func() time.Time { return now }, Hostname: sc.Scenario.Hostname})
	if err != nil {
		t.Fatal(err)
	}
	var want []tbevent.Scalar
	for _, add := range sc.Scenario.Summaries {
		var logs Logs
		for _, raw := range add.Values {
			var tag, num string
			if err := json.Unmarshal(raw[0], &tag); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw[1], &num); err != nil {
				t.Fatal(err)
			}
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				t.Fatal(err)
			}
			logs = append(logs, Scalar{Tag: tag, Value: f})
			want = append(want, tbevent.Scalar{WallTime: tbevent.WallTime(time.Unix(0, add.NS)), Step: add.Step, Tag: tag, Value: float32(f)})
		}
		now = time.Unix(0, add.NS)
		if err := WriteSummary(logs, w, add.Step); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(w.Path()); got != sc.FileName {
		t.Fatalf("file %q, want %q", got, sc.FileName)
	}
	got, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	wantBytes, err := hex.DecodeString(sc.File)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("event file differs from the golden\n got %x\nwant %x", got, wantBytes)
	}
	events, err := tbevent.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	scalars := tbevent.Scalars(events)
	if len(scalars) != len(want) {
		t.Fatalf("%d scalars read back, want %d", len(scalars), len(want))
	}
	for i := range want {
		g, w := scalars[i], want[i]
		if g.Tag != w.Tag || g.Step != w.Step || g.WallTime != w.WallTime || math.Float32bits(g.Value) != math.Float32bits(w.Value) {
			t.Fatalf("scalar %d = %+v, want %+v", i, g, w)
		}
	}
}

type recorder struct {
	got  []*tfframework.Summary
	step []int64
	err  error
}

func (r *recorder) AddSummary(s *tfframework.Summary, step int64) error {
	r.got = append(r.got, s)
	r.step = append(r.step, step)
	return r.err
}

func TestScalarSummary(t *testing.T) {
	tests := []struct {
		name string
		logs Logs
		want []float32
	}{
		{"empty", nil, nil},
		{"in order", Logs{{"loss", 0.5}, {"auc", 0.25}, {"global_step", 300}}, []float32{0.5, 0.25, 300}},
		{"float32 rounding", Logs{{"x", 0.1}, {"big", 1e39}, {"neg", -1e39}, {"max", math.MaxFloat32}}, []float32{0.1, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32}},
		{"duplicate tags kept", Logs{{"a", 1}, {"a", 2}}, []float32{1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ScalarSummary(tc.logs)
			if len(s.GetValue()) != len(tc.want) {
				t.Fatalf("%d values, want %d", len(s.GetValue()), len(tc.want))
			}
			for i, v := range s.GetValue() {
				if v.GetTag() != tc.logs[i].Tag || v.GetSimpleValue() != tc.want[i] || v.GetMetadata() != nil || v.GetNodeName() != "" {
					t.Fatalf("value %d = %v, want tag %q simple_value %v", i, v, tc.logs[i].Tag, tc.want[i])
				}
			}
		})
	}
}

func TestLogsFromMap(t *testing.T) {
	got := LogsFromMap(map[string]float64{"loss": 1, "auc": 2, "global_step": 3})
	want := Logs{{"auc", 2}, {"global_step", 3}, {"loss", 1}}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if n := len(LogsFromMap(nil)); n != 0 {
		t.Fatalf("nil map: %d logs", n)
	}
}

func TestWriteSummary(t *testing.T) {
	r := &recorder{}
	if err := WriteSummary(Logs{{"loss", 2}}, r, 42); err != nil {
		t.Fatal(err)
	}
	if len(r.got) != 1 || r.step[0] != 42 || r.got[0].GetValue()[0].GetSimpleValue() != 2 {
		t.Fatalf("recorded %v at %v", r.got, r.step)
	}
	boom := errors.New("disk full")
	if err := WriteSummary(Logs{{"loss", 2}}, &recorder{err: boom}, 1); !errors.Is(err, boom) {
		t.Fatalf("writer error: %v", err)
	}
	if err := WriteSummary(Logs{{"loss", 2}}, nil, 1); errkind.Of(err) != errkind.Attribute {
		t.Fatalf("nil writer: %v, want an Attribute error", err)
	}
	var _ SummaryWriter = (*tbevent.Writer)(nil)
}
