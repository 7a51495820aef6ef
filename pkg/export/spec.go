package export

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// ModelDNN is the only model kind exported: pkg/trainer/dnn.
const ModelDNN = "dnn"

// ModelSpec is what a checkpoint does not hold and serving needs: the model's configuration (the
// features, their slots, tables and poolings, the dense input and the MLP's shape). The trainer
// knows it (SpecFromDNN); cmd/export takes it from the flags the model was trained with. Export
// checks it against the checkpoint.
type ModelSpec struct {
	// Model is the model kind, ModelDNN.
	Model string `json:"model"`
	// SparseFeatures are the pooled features (dnn.Feature), in the trainer's order.
	SparseFeatures []SparseFeature `json:"sparse_features"`
	// DenseFeatures are the float_list features concatenated, in this order, into the dense row.
	DenseFeatures []DenseFeature `json:"dense_features"`
	// Interaction is dnn.Dot or dnn.None.
	Interaction string `json:"interaction"`
	// Hidden are the widths of the MLP's ReLU layers (empty: none).
	Hidden []int `json:"hidden"`
}

// SparseFeature is a sparse feature: the fids of one slot, pooled from one table.
type SparseFeature struct {
	Name    string `json:"name"`
	Slot    int    `json:"slot"`
	Table   string `json:"table"`
	Dim     int    `json:"dim"`
	Pooling string `json:"pooling"`
	// Default are the fids of an example that lacks the feature (a schema's optional feature);
	// none: no ids.
	Default []uint64 `json:"default,omitempty"`
	// Buckets is the number of buckets the feature's ids are hashed into before the table (0:
	// none, collisionless); serving hashes them as training did.
	Buckets uint64 `json:"buckets,omitempty"`
}

// DenseFeature is a float_list feature of Dim values.
type DenseFeature struct {
	Name string `json:"name"`
	Dim  int    `json:"dim"`
	// Default is the value of an example that lacks the feature (a schema's optional feature);
	// none: it must have it.
	Default []float32 `json:"default,omitempty"`
}

// SpecFromDNN is the spec of a dnn model of configuration cfg (Model.Config) over examples of
// schema (its dense features and the features' defaults).
func SpecFromDNN(cfg dnn.Config, schema batch.Schema) ModelSpec {
	s := ModelSpec{Model: ModelDNN, Interaction: string(cfg.Interaction), Hidden: slices.Clone(cfg.Hidden)}
	if s.Interaction == "" {
		s.Interaction = string(dnn.Dot)
	}
	if s.Hidden == nil {
		s.Hidden = []int{}
	}
	for _, f := range cfg.Features {
		table, pooling := f.Table, string(f.Pooling)
		if table == "" {
			table = f.Name
		}
		if pooling == "" {
			pooling = string(dnn.Sum)
		}
		s.SparseFeatures = append(s.SparseFeatures, SparseFeature{Name: f.Name, Slot: f.Slot, Table: table, Dim: f.Dim, Pooling: pooling,
			Default: slices.Clone(schema.SparseDefault[f.Name]), Buckets: f.Buckets})
	}
	for _, d := range schema.Dense {
		s.DenseFeatures = append(s.DenseFeatures, DenseFeature{Name: d.Name, Dim: d.Dim, Default: slices.Clone(d.Default)})
	}
	return s
}

// DNNConfig is the dnn configuration the spec describes (dense optimizer and seed at their
// defaults: serving does not train).
func (s ModelSpec) DNNConfig() dnn.Config {
	cfg := dnn.Config{DenseDim: s.Schema().DenseDim(), Interaction: dnn.Interaction(s.Interaction), Hidden: slices.Clone(s.Hidden)}
	if cfg.Hidden == nil {
		cfg.Hidden = []int{}
	}
	for _, f := range s.SparseFeatures {
		cfg.Features = append(cfg.Features, dnn.Feature{Name: f.Name, Slot: f.Slot, Table: f.Table, Dim: f.Dim, Pooling: dnn.Pooling(f.Pooling), Buckets: f.Buckets})
	}
	return cfg
}

// Schema is the input schema of the spec's examples: the dense features in order, and the sparse
// features' names.
func (s ModelSpec) Schema() batch.Schema {
	var sc batch.Schema
	for _, d := range s.DenseFeatures {
		sc.Dense = append(sc.Dense, batch.DenseFeature{Name: d.Name, Dim: d.Dim, Default: slices.Clone(d.Default)})
	}
	for _, f := range s.SparseFeatures {
		sc.Sparse = append(sc.Sparse, f.Name)
		if f.Default != nil {
			if sc.SparseDefault == nil {
				sc.SparseDefault = map[string][]uint64{}
			}
			sc.SparseDefault[f.Name] = slices.Clone(f.Default)
		}
	}
	return sc
}

// Tables are the embedding tables the spec's features read, sorted by name, with their
// dimensions.
func (s ModelSpec) Tables() []TableInfo {
	dims := map[string]int{}
	for _, f := range s.SparseFeatures {
		dims[f.Table] = f.Dim
	}
	out := make([]TableInfo, 0, len(dims))
	for name, dim := range dims {
		out = append(out, TableInfo{Name: name, Dim: dim})
	}
	slices.SortFunc(out, func(a, b TableInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// TableInfo names a table and its embedding dimension.
type TableInfo struct {
	Name string `json:"name"`
	Dim  int    `json:"dim"`
}

// Validate reports what is wrong with the spec: an unknown model kind, or a configuration dnn
// refuses; errors are of kind Value.
func (s ModelSpec) Validate() error {
	if s.Model != ModelDNN {
		return errkind.New(errkind.Value, "model spec: model %q, want %q", s.Model, ModelDNN)
	}
	for _, d := range s.DenseFeatures {
		if d.Name == "" || d.Dim <= 0 {
			return errkind.New(errkind.Value, "model spec: dense feature %q of dimension %d", d.Name, d.Dim)
		}
	}
	if _, err := s.newModel(); err != nil {
		return fmt.Errorf("model spec: %w", err)
	}
	return nil
}

// newModel builds the spec's model over no tables: its variables' names and shapes are the
// spec's, which checks a checkpoint's dense tensors.
func (s ModelSpec) newModel() (*dnn.Model, error) {
	return dnn.New(s.DNNConfig(), noStore{})
}

// noStore is the store of a model that only checks or holds dense tensors.
type noStore struct{}

func (noStore) Lookup(context.Context, string, []int64, []float32) error {
	return errkind.New(errkind.Precondition, "export: this model has no embedding store")
}

func (noStore) Apply(context.Context, string, []int64, []float32, int64, []float32) error {
	return errkind.New(errkind.Precondition, "export: this model has no embedding store")
}

// checkDense assigns tensors to a model of the spec, which fails, naming the tensor, unless every
// variable of the model is there with its shape.
func (s ModelSpec) checkDense(tensors []estimator.Tensor) error {
	m, err := s.newModel()
	if err != nil {
		return err
	}
	return m.Assign(tensors)
}
