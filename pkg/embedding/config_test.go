package embedding

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	hashtablepb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func segment(dim int32, init *initializerpb.InitializerConfig, opt *optimizerpb.OptimizerConfig) *hashtablepb.EntryConfig_Segment {
	return &hashtablepb.EntryConfig_Segment{DimSize: proto.Int32(dim), InitConfig: init, OptConfig: opt}
}

var (
	zerosInit  = &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Zeros{Zeros: &initializerpb.ZerosInitializerConfig{}}}
	constInit3 = &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_Constants{Constants: &initializerpb.ConstantsInitializerConfig{Constant: proto.Float32(3)}}}
	// A dim_size in the config is overridden by the segment's, as WriteDimSize does.
	uniformInit = &initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_RandomUniform{RandomUniform: &initializerpb.RandomUniformInitializerConfig{DimSize: proto.Int32(99), Minval: proto.Float32(-1), Maxval: proto.Float32(1)}}}
	sgdOpt      = &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Sgd{Sgd: &optimizerpb.SgdOptimizerConfig{}}}
	adagradOpt  = &optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Adagrad{Adagrad: &optimizerpb.AdagradOptimizerConfig{DimSize: proto.Int32(99)}}}
)

func TestFromProto(t *testing.T) {
	tests := []struct {
		name      string
		cfg       *hashtablepb.EmbeddingHashTableConfig
		wantDim   int
		wantLRs   int
		wantState int
		wantEvict time.Duration
		check     func(t *testing.T, emb []float32)
		wantErr   string
	}{
		{
			name:    "zeros and SGD",
			cfg:     &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{segment(4, zerosInit, sgdOpt)}}},
			wantDim: 4, wantLRs: 1,
			check: func(t *testing.T, emb []float32) { wantValues(t, emb, []float32{0, 0, 0, 0}) },
		},
		{
			name: "two segments: constants with SGD, random uniform with Adagrad; eviction every 24 h",
			cfg: &hashtablepb.EmbeddingHashTableConfig{
				EntryConfig:             &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{segment(2, constInit3, sgdOpt), segment(3, uniformInit, adagradOpt)}},
				EnableFeatureEviction:   proto.Bool(true),
				FeatureEvictEveryNHours: proto.Int32(24),
			},
			wantDim: 5, wantLRs: 2, wantState: 3, wantEvict: 24 * time.Hour,
			check: func(t *testing.T, emb []float32) {
				wantValues(t, emb[:2], []float32{3, 3})
				for _, v := range emb[2:] {
					if v < -1 || v >= 1 || v == 0 {
						t.Errorf("random uniform value %v outside [-1, 1)", v)
					}
				}
			},
		},
		{name: "serving entries", cfg: &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{EntryType: hashtablepb.EntryConfig_SERVING.Enum()}}, wantErr: "not supported"},
		{name: "no optimizer", cfg: &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{segment(2, zerosInit, nil)}}}, wantErr: "init or opt config is missing"},
		{name: "optimizer for part of the entry", cfg: &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{segment(2, zerosInit, sgdOpt), segment(2, zerosInit, nil)}}}, wantErr: "dim size should match"},
		{name: "segment without dimension", cfg: &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{{InitConfig: zerosInit, OptConfig: sgdOpt}}}}, wantErr: "dim_size 0"},
		{name: "optimizer config without a type", cfg: &hashtablepb.EmbeddingHashTableConfig{EntryConfig: &hashtablepb.EntryConfig{Segments: []*hashtablepb.EntryConfig_Segment{segment(2, zerosInit, &optimizerpb.OptimizerConfig{})}}}, wantErr: "must be set type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, evict, err := FromProto(tc.cfg)
			if tc.wantErr != "" {
				if errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want a Value error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Dim != tc.wantDim || cfg.LearningRates != tc.wantLRs || cfg.Optimizer.StateSize() != tc.wantState || evict != tc.wantEvict {
				t.Fatalf("dim %d learning rates %d state %d eviction %v, want %d %d %d %v", cfg.Dim, cfg.LearningRates, cfg.Optimizer.StateSize(), evict, tc.wantDim, tc.wantLRs, tc.wantState, tc.wantEvict)
			}
			tb := newTable(t, cfg)
			lrs := make([]float32, cfg.LearningRates)
			if err := tb.Apply([]int64{1}, make([]float32, cfg.Dim), lrs[:len(lrs)-1], 0, 1); errkind.Of(err) != errkind.Value {
				t.Fatalf("apply with a learning rate short: %v, want a Value error", err)
			}
			if err := tb.Apply([]int64{1}, make([]float32, cfg.Dim), lrs, 0, 1); err != nil {
				t.Fatal(err)
			}
			d, _ := tb.LookupEntry(1)
			tc.check(t, d.GetNum())
		})
	}
}

func wantValues(t *testing.T, got, want []float32) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("values %v, want %v", got, want)
	}
}
