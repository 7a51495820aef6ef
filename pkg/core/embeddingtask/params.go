// Package embeddingtask is monolith/core/base_embedding_task.py without TensorFlow: the params of
// an embedding task, vocab sizes from a TSV file (optionally fetched from HDFS), QR
// multi-hashing, the TPU embedding feature/table configs, the post-processing of parsed feature
// ids, the CPU-test embedding lookup and the decisions of the training input pipeline.
//
// Feature ids are tensor.Sparse / tensor.Ragged values (what tf.io.parse_example yields); the
// model's feature slots (feature.py's FeatureSlot/FeatureColumn after Env.finalize) are given as
// Slot values.
package embeddingtask

import (
	"maps"

	baseembeddingtaskspec "github.com/monolith-go/monolith/gen/spec/core/base_embedding_task"
)

// Params are BaseEmbeddingTask.params(): the generated TaskParams (defaults from the spec), the
// custom per-slot vocab sizes, and the train params.
type Params struct {
	baseembeddingtaskspec.TaskParams
	// CustomVocabSizeMapping fixes the vocab size of some slots (custom_vocab_size_mapping).
	CustomVocabSizeMapping map[int]int
	Train                  baseembeddingtaskspec.TrainParams
}

// DefaultParams returns the reference's defaults.
func DefaultParams() Params {
	return Params{TaskParams: baseembeddingtaskspec.DefaultTaskParams(), Train: baseembeddingtaskspec.DefaultTrainParams()}
}

// Clone returns a copy that shares nothing with p.
func (p Params) Clone() Params {
	out := p
	out.CustomVocabSizeMapping = maps.Clone(p.CustomVocabSizeMapping)
	out.VocabSizePerSlot = clonePtr(p.VocabSizePerSlot)
	out.VocabSizeOffset = clonePtr(p.VocabSizeOffset)
	out.VocabFilePath = clonePtr(p.VocabFilePath)
	out.Train.FilePattern = clonePtr(p.Train.FilePattern)
	out.Train.FileFolder = clonePtr(p.Train.FileFolder)
	out.Train.StartDate = clonePtr(p.Train.StartDate)
	out.Train.EndDate = clonePtr(p.Train.EndDate)
	out.Train.VocabFileFolderPrefix = clonePtr(p.Train.VocabFileFolderPrefix)
	return out
}

func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}
