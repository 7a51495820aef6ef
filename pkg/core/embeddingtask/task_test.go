package embeddingtask

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

type refConfigCase struct {
	Name  string `json:"name"`
	Slots []struct {
		ID      int `json:"id"`
		Columns []struct {
			Name         string `json:"name"`
			Seq          bool   `json:"seq"`
			MaxSeqLength int    `json:"max_seq_length"`
			Slices       []struct {
				Index          int     `json:"index"`
				Dim            int     `json:"dim"`
				Initializer    string  `json:"initializer"`
				Optimizer      string  `json:"optimizer"`
				LearningRateFn *string `json:"learning_rate_fn"`
			} `json:"slices"`
		} `json:"columns"`
	} `json:"slots"`
	Vocab     map[string]int `json:"vocab"`
	QR        bool           `json:"qr_multi_hashing"`
	Threshold int            `json:"qr_hashing_threshold"`
	Rate      int            `json:"qr_collision_rate"`
	Features  map[string]struct {
		TableID           string `json:"table_id"`
		MaxSequenceLength int    `json:"max_sequence_length"`
	} `json:"features"`
	Tables map[string]struct {
		VocabularySize int     `json:"vocabulary_size"`
		Dimension      int     `json:"dimension"`
		Initializer    string  `json:"initializer"`
		Optimizer      string  `json:"optimizer"`
		LearningRateFn *string `json:"learning_rate_fn"`
		Combiner       string  `json:"combiner"`
	} `json:"tables"`
	Error *refError `json:"error"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// create_feature_and_table_config_dict on the reference's own FeatureSlot/FeatureColumn objects.
func TestFeatureAndTableConfigsReference(t *testing.T) {
	var cases []refConfigCase
	refcases.ReadJSON(t, "testdata/reference_configs.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			p := DefaultParams()
			p.QRMultiHashing, p.QRHashingThreshold, p.QRCollisionRate = c.QR, c.Threshold, c.Rate
			vocab := map[int]int{}
			for k, v := range c.Vocab {
				n, _ := strconv.Atoi(k)
				vocab[n] = v
			}
			task := NewWithVocab(p, vocab, quiet)
			var slots []Slot
			for _, s := range c.Slots {
				slot := Slot{ID: s.ID}
				for _, col := range s.Columns {
					gc := Column{Name: col.Name, Sequence: col.Seq, MaxSeqLength: col.MaxSeqLength}
					for _, sl := range col.Slices {
						gc.Slices = append(gc.Slices, Slice{Index: sl.Index, Dim: sl.Dim, Initializer: sl.Initializer, Optimizer: sl.Optimizer, LearningRateFn: str(sl.LearningRateFn)})
					}
					slot.Columns = append(slot.Columns, gc)
				}
				slots = append(slots, slot)
			}
			if err := task.SetSlots(slots); err != nil {
				t.Fatal(err)
			}
			features, tables, err := task.CreateFeatureAndTableConfigDict()
			checkError(t, c.Name, err, c.Error)
			if c.Error != nil {
				return
			}
			wantF := map[string]FeatureConfig{}
			for k, v := range c.Features {
				wantF[k] = FeatureConfig{TableID: v.TableID, MaxSequenceLength: v.MaxSequenceLength}
			}
			wantT := map[string]TableConfig{}
			for k, v := range c.Tables {
				wantT[k] = TableConfig{VocabularySize: v.VocabularySize, Dimension: v.Dimension, Initializer: v.Initializer, Optimizer: v.Optimizer, LearningRateFn: str(v.LearningRateFn), Combiner: v.Combiner}
			}
			if !reflect.DeepEqual(features, wantF) {
				t.Errorf("features\n%v\nreference\n%v", features, wantF)
			}
			if !reflect.DeepEqual(tables, wantT) {
				t.Errorf("tables\n%v\nreference\n%v", tables, wantT)
			}
		})
	}
}

func TestSetSlots(t *testing.T) {
	task := NewWithVocab(DefaultParams(), nil, nil)
	if _, _, err := task.CreateFeatureAndTableConfigDict(); errkind.Of(err) != errkind.Precondition {
		t.Errorf("configs before slots: %v", err)
	}
	if err := task.PostProcessExample(NewExample()); errkind.Of(err) != errkind.Precondition {
		t.Errorf("post-process before slots: %v", err)
	}
	if err := task.SetSlots([]Slot{{ID: 1}, {ID: 1}}); errkind.Of(err) != errkind.Precondition || err.Error() != "Feature slot with id: 1 can not be created more than once." {
		t.Errorf("duplicate slot: %v", err)
	}
	if err := task.SetSlots([]Slot{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := task.SetSlots([]Slot{{ID: 2}}); errkind.Of(err) != errkind.Precondition {
		t.Errorf("second finalize: %v", err)
	}
	if len(task.Slots()) != 1 {
		t.Errorf("slots %v", task.Slots())
	}
}

func sparse(indices [][]int64, values []int64, shape ...int64) tensor.Sparse[int64] {
	return tensor.Sparse[int64]{Indices: indices, Values: values, DenseShape: shape}
}

func vec(v ...float32) []Slice {
	var out []Slice
	for i := range v {
		out = append(out, Slice{Index: i, Dim: int(v[i])})
	}
	return out
}

func TestPostProcessExample(t *testing.T) {
	per := 5
	for _, c := range []struct {
		name   string
		params func(*Params)
		vocab  map[int]int
		slots  []Slot
		in     func() *Example
		check  func(t *testing.T, ex *Example)
	}{
		{
			name:  "clamp, no mod, aliases for other slices",
			vocab: map[int]int{1: 3},
			slots: []Slot{{ID: 1, Columns: []Column{{Name: "f1", Slices: vec(1, 4)}}}},
			in: func() *Example {
				ex := NewExample()
				ex.Sparse["f1_0"] = sparse([][]int64{{1, 0}, {0, 0}}, []int64{-4, 7}, 2, 1)
				return ex
			},
			check: func(t *testing.T, ex *Example) {
				want := sparse([][]int64{{0, 0}, {1, 0}}, []int64{7, 0}, 2, 1)
				if !reflect.DeepEqual(ex.Sparse["f1_0"], want) || !reflect.DeepEqual(ex.Sparse["f1_1"], want) {
					t.Errorf("got %+v / %+v", ex.Sparse["f1_0"], ex.Sparse["f1_1"])
				}
			},
		},
		{
			name:   "vocab_size_per_slot mods",
			params: func(p *Params) { p.VocabSizePerSlot = &per },
			slots:  []Slot{{ID: 1, Columns: []Column{{Name: "f1", Slices: vec(4)}}}},
			in: func() *Example {
				ex := NewExample()
				ex.Sparse["f1_0"] = sparse([][]int64{{0, 0}, {0, 1}}, []int64{12, -3}, 1, 2)
				return ex
			},
			check: func(t *testing.T, ex *Example) {
				if got := ex.Sparse["f1_0"].Values; !reflect.DeepEqual(got, []int64{2, 0}) {
					t.Errorf("values %v", got)
				}
			},
		},
		{
			name:   "custom mapping mods its slots only",
			params: func(p *Params) { p.CustomVocabSizeMapping = map[int]int{1: 4} },
			vocab:  map[int]int{1: 100, 2: 100},
			slots:  []Slot{{ID: 1, Columns: []Column{{Name: "a", Slices: vec(4)}}}, {ID: 2, Columns: []Column{{Name: "b", Slices: vec(4)}}}},
			in: func() *Example {
				ex := NewExample()
				ex.Sparse["a_0"] = sparse([][]int64{{0, 0}}, []int64{9}, 1, 1)
				ex.Sparse["b_0"] = sparse([][]int64{{0, 0}}, []int64{9}, 1, 1)
				return ex
			},
			check: func(t *testing.T, ex *Example) {
				if ex.Sparse["a_0"].Values[0] != 1 || ex.Sparse["b_0"].Values[0] != 9 {
					t.Errorf("a %v b %v", ex.Sparse["a_0"].Values, ex.Sparse["b_0"].Values)
				}
			},
		},
		{
			// vocab 1001 > threshold 1000: R = 1001 // 4 + 1 = 251, on the raw (unclamped) ids.
			name:   "QR split",
			params: func(p *Params) { p.QRMultiHashing, p.QRHashingThreshold = true, 1000 },
			vocab:  map[int]int{7: 1001},
			slots:  []Slot{{ID: 7, Columns: []Column{{Name: "q", Slices: vec(8, 4)}}}},
			in: func() *Example {
				ex := NewExample()
				ex.Sparse["q_0"] = sparse([][]int64{{0, 0}, {1, 0}}, []int64{600, -1}, 2, 1)
				return ex
			},
			check: func(t *testing.T, ex *Example) {
				if _, ok := ex.Sparse["q_0"]; ok {
					t.Error("q_0 kept")
				}
				for _, s := range []string{"q_0_0", "q_1_0"} {
					if got := ex.Sparse[s].Values; !reflect.DeepEqual(got, []int64{98, 250}) {
						t.Errorf("%s %v", s, got)
					}
				}
				for _, s := range []string{"q_0_1", "q_1_1"} {
					if got := ex.Sparse[s].Values; !reflect.DeepEqual(got, []int64{2, -1}) {
						t.Errorf("%s %v", s, got)
					}
				}
			},
		},
		{
			name:  "sequence column: row lengths and cut to max_seq_length",
			vocab: map[int]int{3: 100},
			slots: []Slot{{ID: 3, Columns: []Column{{Name: "s", Sequence: true, MaxSeqLength: 2, Slices: vec(4)}}}},
			in: func() *Example {
				ex := NewExample()
				ex.Ragged["s_0"] = tensor.RaggedFromRows([]int64{1, -2, 3}, nil, []int64{4})
				return ex
			},
			check: func(t *testing.T, ex *Example) {
				if _, ok := ex.Ragged["s_0"]; ok {
					t.Error("ragged kept")
				}
				want := sparse([][]int64{{0, 0}, {0, 1}, {2, 0}}, []int64{1, 0, 4}, 3, 2)
				if !reflect.DeepEqual(ex.Sparse["s_0"], want) {
					t.Errorf("ids %+v", ex.Sparse["s_0"])
				}
				if !reflect.DeepEqual(ex.Dense["s_0_row_lengths"], tensor.Tensor(tensor.Vector[int32](3, 0, 1))) {
					t.Errorf("row lengths %v", ex.Dense["s_0_row_lengths"])
				}
			},
		},
		{
			name:  "uid buckets",
			slots: []Slot{{ID: 1}},
			in: func() *Example {
				ex := NewExample()
				ex.Dense["uid"] = tensor.Vector[int64](1234567, -1, 999)
				return ex
			},
			check: func(t *testing.T, ex *Example) {
				if !reflect.DeepEqual(ex.Dense["uid_bucket"], tensor.Tensor(tensor.Vector[int32](567, 999, 999))) {
					t.Errorf("uid_bucket %v", ex.Dense["uid_bucket"])
				}
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			if c.params != nil {
				c.params(&p)
			}
			task := NewWithVocab(p, c.vocab, quiet)
			if err := task.SetSlots(c.slots); err != nil {
				t.Fatal(err)
			}
			ex := c.in()
			if err := task.PostProcessExample(ex); err != nil {
				t.Fatal(err)
			}
			c.check(t, ex)
		})
	}
}

func TestPostProcessExampleErrors(t *testing.T) {
	zero := 0
	for _, c := range []struct {
		name   string
		params func(*Params)
		slots  []Slot
		ex     *Example
		kind   errkind.Kind
	}{
		{"missing feature", nil, []Slot{{ID: 1, Columns: []Column{{Name: "f", Slices: vec(1)}}}}, NewExample(), errkind.NotFound},
		{"missing sequence feature", nil, []Slot{{ID: 1, Columns: []Column{{Name: "f", Sequence: true, Slices: vec(1)}}}}, NewExample(), errkind.NotFound},
		{"zero vocab", func(p *Params) { p.VocabSizePerSlot = &zero }, []Slot{{ID: 1, Columns: []Column{{Name: "f", Slices: vec(1)}}}},
			&Example{Sparse: map[string]tensor.Sparse[int64]{"f_0": sparse([][]int64{{0, 0}}, []int64{1}, 1, 1)}}, errkind.Value},
		{"bad sparse", nil, []Slot{{ID: 1, Columns: []Column{{Name: "f", Slices: vec(1)}}}},
			&Example{Sparse: map[string]tensor.Sparse[int64]{"f_0": sparse([][]int64{{3, 0}}, []int64{1}, 1, 1)}}, errkind.Value},
		{"float uid", nil, []Slot{{ID: 1}}, &Example{Dense: map[string]tensor.Tensor{"uid": tensor.Vector[float32](1)}}, errkind.Type},
		{"sparse uid", nil, []Slot{{ID: 1}}, &Example{Sparse: map[string]tensor.Sparse[int64]{"uid": sparse(nil, nil, 1)}}, errkind.Type},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			if c.params != nil {
				c.params(&p)
			}
			task := NewWithVocab(p, nil, quiet)
			_ = task.SetSlots(c.slots)
			before := c.ex.Clone()
			if err := task.PostProcessExample(c.ex); errkind.Of(err) != c.kind {
				t.Errorf("err %v", err)
			}
			if !reflect.DeepEqual(c.ex.Clone(), before) {
				t.Error("a failed post-process changed the example")
			}
		})
	}
}

func TestProcessFeaturesForCPUTest(t *testing.T) {
	p := DefaultParams()
	task := NewWithVocab(p, map[int]int{1: 10, 2: 20}, quiet)
	_ = task.SetSlots([]Slot{
		{ID: 1, Columns: []Column{{Name: "f", Slices: []Slice{{Index: 0, Dim: 3}}}}},
		{ID: 2, Columns: []Column{{Name: "s", Sequence: true, MaxSeqLength: 2, Slices: []Slice{{Index: 0, Dim: 2}}}}},
	})
	if _, _, err := task.CreateFeatureAndTableConfigDict(); err != nil {
		t.Fatal(err)
	}
	ex := NewExample()
	// Row 0 looks up id 4 and id 14 (= 4 mod 10), row 1 nothing, row 2 id 24 (= 4 mod 10).
	ex.Sparse["f_0"] = sparse([][]int64{{0, 0}, {0, 1}, {2, 0}}, []int64{4, 14, 24}, 3, 2)
	ex.Sparse["s_0"] = sparse([][]int64{{0, 0}, {1, 1}}, []int64{1, 21}, 2, 2)
	ex.Dense["label"] = tensor.Vector[float32](1, 0, 1)
	run := func(seed uint64) *Example {
		t.Helper()
		tk := NewWithVocab(p, task.VocabSizes(), quiet)
		_ = tk.SetSlots(task.Slots())
		_, _, _ = tk.CreateFeatureAndTableConfigDict()
		out, err := tk.ProcessFeaturesForCPUTest(ex, rand.New(rand.NewPCG(seed, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tk.CreateFeatureAndTableConfigDict(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := run(1)
	f, err := tensor.As[float32](out.Dense["f_0"])
	if err != nil || !reflect.DeepEqual(f.Shape(), []int{3, 3}) {
		t.Fatalf("f_0 %v %v", out.Dense["f_0"], err)
	}
	v := f.Data()
	limit := float32(0.5 / (10 * 3))
	for i := range 3 {
		// Row 0 sums table row 4 twice, row 2 holds it once, row 1 (no ids) is zeros.
		if v[i] != 2*v[6+i] || v[3+i] != 0 || v[6+i] == 0 || math.Abs(float64(v[6+i])) > float64(limit) {
			t.Errorf("row values %v", v)
		}
	}
	s, _ := tensor.As[float32](out.Dense["s_0"])
	if !reflect.DeepEqual(s.Shape(), []int{2, 2, 2}) {
		t.Errorf("sequence embedding shape %v", s.Shape())
	}
	sv := s.Data()
	for i := range 4 {
		// Ids 1 and 21 (= 1 mod 20) share a table row.
		if sv[i] != sv[4+i] || sv[i] == 0 {
			t.Errorf("sequence rows %v", sv)
		}
	}
	if !reflect.DeepEqual(out.Dense["label"], ex.Dense["label"]) {
		t.Error("dense feature not passed through")
	}
	if !reflect.DeepEqual(run(1), out) || reflect.DeepEqual(run(2), out) {
		t.Error("seeded tables are not reproducible")
	}
	// The configs are cleared afterwards, so a second pass finds none.
	if _, err := task.ProcessFeaturesForCPUTest(ex, rand.New(rand.NewPCG(1, 0))); err != nil {
		t.Fatal(err)
	}
	if _, err := task.ProcessFeaturesForCPUTest(ex, rand.New(rand.NewPCG(1, 0))); errkind.Of(err) != errkind.NotFound {
		t.Errorf("after clearing: %v", err)
	}
	if _, err := task.ProcessFeaturesForCPUTest(ex, nil); errkind.Of(err) != errkind.Value {
		t.Errorf("nil rng: %v", err)
	}
}

func TestPlanInput(t *testing.T) {
	yes, no := true, false
	pattern, folder, end, start := "gs://b/*.tfr", "/data", "20201210", "20201201"
	base := func(mod func(*Params)) Params {
		p := DefaultParams()
		if mod != nil {
			mod(&p)
		}
		return p
	}
	shard := InputFnParams{BatchSize: 8, NumShards: 4, ShardIndex: 1, EnableStoppingSignals: &yes}
	for _, c := range []struct {
		name string
		mode string
		p    Params
		ip   InputFnParams
		want InputPlan
		kind errkind.Kind
	}{
		{"cpu test", ModeTrain, base(func(p *Params) { p.Train.FilePattern = &pattern }), InputFnParams{CPUTest: true, BatchSize: 2},
			InputPlan{FilePattern: pattern, CPUTest: true, CycleLength: 4, BatchSize: 2, Repeat: true}, errkind.Unknown},
		{"pattern with stopping signals", ModeTrain, base(func(p *Params) { p.Train.FilePattern = &pattern }), shard,
			InputPlan{FilePattern: pattern, NumShards: 4, ShardIndex: 1, CycleLength: 4, BatchSize: 8, StoppingSignals: true}, errkind.Unknown},
		{"folder and dates", ModeTrain, base(func(p *Params) { p.Train.FileFolder, p.Train.EndDate, p.Train.StartDate = &folder, &end, &start }), shard,
			InputPlan{FilePattern: "/data/*/*/part*", DateRange: &DateRange{Folder: folder, StartDate: &start, EndDate: end}, NumShards: 4, ShardIndex: 1, CycleLength: 4, BatchSize: 8, StoppingSignals: true}, errkind.Unknown},
		{"repeat", ModeTrain, base(func(p *Params) { p.Train.FilePattern, p.Train.Repeat, p.Deterministic = &pattern, true, true }),
			InputFnParams{BatchSize: 8, NumShards: 1, EnableStoppingSignals: &no},
			InputPlan{FilePattern: pattern, NumShards: 1, CycleLength: 4, Deterministic: true, BatchSize: 8, Repeat: true}, errkind.Unknown},
		{"eval mode", "eval", base(nil), shard, InputPlan{}, errkind.Precondition},
		{"no folder", ModeTrain, base(nil), shard, InputPlan{}, errkind.Precondition},
		{"no end date", ModeTrain, base(func(p *Params) { p.Train.FileFolder = &folder }), shard, InputPlan{}, errkind.Precondition},
		{"no stopping flag", ModeTrain, base(func(p *Params) { p.Train.FileFolder, p.Train.EndDate = &folder, &end }), InputFnParams{BatchSize: 1, NumShards: 1}, InputPlan{}, errkind.Precondition},
		{"repeat with stopping signals", ModeTrain, base(func(p *Params) { p.Train.FilePattern, p.Train.Repeat = &pattern, true }), shard, InputPlan{}, errkind.Precondition},
		{"repeat with unset stopping signals", ModeTrain, base(func(p *Params) { p.Train.FilePattern, p.Train.Repeat = &pattern, true }), InputFnParams{BatchSize: 1, NumShards: 1}, InputPlan{}, errkind.Precondition},
		{"bad shard", ModeTrain, base(func(p *Params) { p.Train.FilePattern = &pattern }), InputFnParams{BatchSize: 1, NumShards: 2, ShardIndex: 2}, InputPlan{}, errkind.Value},
		{"cpu test without pattern", ModeTrain, base(nil), InputFnParams{CPUTest: true, BatchSize: 1}, InputPlan{}, errkind.Value},
		{"zero batch", ModeTrain, base(nil), InputFnParams{}, InputPlan{}, errkind.Value},
	} {
		got, err := PlanInput(c.mode, c.p, c.ip)
		if errkind.Of(err) != c.kind || (err == nil) != (c.kind == errkind.Unknown) {
			t.Errorf("%s: err %v", c.name, err)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n%+v\nwant\n%+v", c.name, got, c.want)
		}
	}
	for _, c := range [][3]string{{"a", "b", "a/b"}, {"a/", "b", "a/b"}, {"", "b", "b"}, {"a", "/b", "/b"}} {
		if got := pathutil.Join(c[0], c[1]); got != c[2] {
			t.Errorf("join %v = %s", c, got)
		}
	}
}

func TestShardFilesAndStoppingSignal(t *testing.T) {
	files := []string{"a", "b", "c", "d", "e"}
	got, err := ShardFiles(files, 2, 1)
	if err != nil || !reflect.DeepEqual(got, []string{"b", "d"}) {
		t.Errorf("shard: %v %v", got, err)
	}
	if _, err := ShardFiles(files, 0, 0); errkind.Of(err) != errkind.Value {
		t.Errorf("zero shards: %v", err)
	}
	ex := NewExample()
	ex.Sparse["f_0"] = sparse([][]int64{{0, 0}}, []int64{3}, 2, 1)
	ex.Ragged["s_0"] = tensor.RaggedFromRows([]int64{1})
	if err := InsertStoppingSignal(ex, false, 2, "_user_provided_signal_name"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ex.Dense["_user_provided_signal_name"], tensor.Tensor(tensor.Vector(false, false))) || len(ex.Sparse["f_0"].Values) != 1 {
		t.Errorf("no stop: %+v", ex)
	}
	if err := InsertStoppingSignal(ex, true, 2, "_user_provided_signal_name"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ex.Dense["_user_provided_signal_name"], tensor.Tensor(tensor.Vector(true, true))) ||
		!reflect.DeepEqual(ex.Sparse["f_0"], tensor.EmptySparse[int64](2, 1)) || len(ex.Ragged["s_0"].Values) != 1 {
		t.Errorf("stop: %+v", ex)
	}
	if err := InsertStoppingSignal(&Example{}, true, -1, "x"); errkind.Of(err) != errkind.Value {
		t.Errorf("negative batch: %v", err)
	}
	empty := &Example{}
	_ = InsertStoppingSignal(empty, false, 1, "x")
	if empty.Dense["x"] == nil {
		t.Error("nil dense map")
	}
}
