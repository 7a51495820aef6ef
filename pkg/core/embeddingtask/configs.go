package embeddingtask

import (
	"fmt"
	"maps"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// TableConfig is tpu_embedding.TableConfig as the task fills it.
type TableConfig struct {
	VocabularySize int
	Dimension      int
	Initializer    string
	Optimizer      string
	LearningRateFn string
	Combiner       string
}

// FeatureConfig is tpu_embedding.FeatureConfig: the table a feature looks up and, for a sequence
// feature, its maximum length (0 otherwise).
type FeatureConfig struct {
	TableID           string
	MaxSequenceLength int
}

func tableFor(s Slice, vocab int) TableConfig {
	return TableConfig{VocabularySize: vocab, Dimension: s.Dim, Initializer: s.Initializer, Optimizer: s.Optimizer, LearningRateFn: s.LearningRateFn, Combiner: "sum"}
}

// CreateFeatureAndTableConfigDict is create_feature_and_table_config_dict: per slot, column and
// slice, table "table_<slot>_<slice>" (vocab size from the file, 1 for a slot it lacks; created
// once, shared by the slot's columns) and feature "<column>_<slice>". A QR-hashed slot also gets
// remainder and quotient tables "table_<slot>_<slice>_0"/"_1" and features "<column>_<slice>_0"
// /"_1". The configs accumulate over calls; copies are returned.
func (t *Task) CreateFeatureAndTableConfigDict() (map[string]FeatureConfig, map[string]TableConfig, error) {
	if !t.final {
		return nil, nil, errkind.New(errkind.Precondition, "feature configs before the slots are set")
	}
	for _, slot := range t.slots {
		vocab, ok := t.vocab[slot.ID]
		if !ok {
			vocab = 1
		}
		for _, col := range slot.Columns {
			for _, s := range col.Slices {
				hashed, rVocab, qVocab, err := t.qr(vocab)
				if err != nil {
					return nil, nil, fmt.Errorf("slot %d: %w", slot.ID, err)
				}
				if hashed {
					t.log.Info(fmt.Sprintf("Setting QR table for slot %d", slot.ID))
					for part, size := range []int{rVocab, qVocab} {
						table := fmt.Sprintf("table_%d_%d_%d", slot.ID, s.Index, part)
						if _, ok := t.tables[table]; !ok {
							t.tables[table] = tableFor(s, size)
						}
						t.features[fmt.Sprintf("%s_%d_%d", col.Name, s.Index, part)] = FeatureConfig{TableID: table}
					}
				}
				table := fmt.Sprintf("table_%d_%d", slot.ID, s.Index)
				if _, ok := t.tables[table]; !ok {
					t.tables[table] = tableFor(s, vocab)
				}
				fc := FeatureConfig{TableID: table}
				if col.Sequence {
					fc.MaxSequenceLength = col.MaxSeqLength
				}
				t.features[fmt.Sprintf("%s_%d", col.Name, s.Index)] = fc
			}
		}
	}
	return maps.Clone(t.features), maps.Clone(t.tables), nil
}
