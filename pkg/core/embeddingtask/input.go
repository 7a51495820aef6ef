package embeddingtask

import (
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// ModeTrain is tf.estimator.ModeKeys.TRAIN, the only mode create_input_fn supports.
const ModeTrain = "train"

// InputFnParams are the params an Estimator passes to the input fn.
type InputFnParams struct {
	CPUTest   bool
	BatchSize int
	// EnableStoppingSignals is params["enable_stopping_signals"]; nil when unset (None).
	EnableStoppingSignals *bool
	// NumShards and ShardIndex are the context's current_input_fn_deployment (num_calls,
	// call_index): this host reads the files whose position mod NumShards is ShardIndex.
	NumShards  int
	ShardIndex int
}

// DateRange is the util.range_dateset filter applied to the listed files.
type DateRange struct {
	Folder    string
	StartDate *string
	EndDate   string
}

// InputPlan is what create_input_fn's input_fn builds, as decisions instead of a tf.data graph:
// which files, how they are sharded, read, batched, repeated, and whether the stopping-signal
// batches are appended.
type InputPlan struct {
	// FilePattern is read directly as TFRecord file names in a CPU test, else listed (in sorted
	// order, no shuffling).
	FilePattern string
	CPUTest     bool
	// DateRange is set when the pattern was built from train.file_folder.
	DateRange             *DateRange
	NumShards, ShardIndex int
	// CycleLength files are interleaved; Deterministic keeps their order.
	CycleLength   int
	Deterministic bool
	// BatchSize batches drop the remainder.
	BatchSize int
	Repeat    bool
	// StoppingSignals: every batch gets a false UserProvidedSignalName feature and, after the
	// data, the repeated data follows with the signal true and its sparse features emptied
	// (InsertStoppingSignal).
	StoppingSignals bool
}

// PlanInput makes create_input_fn's decisions and checks: TRAIN only; in a CPU test the pattern
// is read directly and repeated; otherwise train.file_pattern wins over
// train.file_folder/date_and_file_name_format, which needs train.end_date and an explicit
// enable_stopping_signals; repeat needs enable_stopping_signals to be false.
func PlanInput(mode string, p Params, ip InputFnParams) (InputPlan, error) {
	if mode != ModeTrain {
		return InputPlan{}, errkind.New(errkind.Precondition, "input fn: mode %q, only %q is supported", mode, ModeTrain)
	}
	if ip.BatchSize <= 0 {
		return InputPlan{}, errkind.New(errkind.Value, "input fn: batch size must be positive, got %d", ip.BatchSize)
	}
	plan := InputPlan{CycleLength: p.FilesInterleaveCycleLength, Deterministic: p.Deterministic, BatchSize: ip.BatchSize, CPUTest: ip.CPUTest}
	if ip.CPUTest {
		if p.Train.FilePattern == nil {
			return InputPlan{}, errkind.New(errkind.Value, "input fn: a CPU test needs train.file_pattern")
		}
		plan.FilePattern = *p.Train.FilePattern
		plan.Repeat = true
		return plan, nil
	}
	if p.Train.FilePattern != nil {
		plan.FilePattern = *p.Train.FilePattern
	} else {
		if p.Train.FileFolder == nil {
			return InputPlan{}, errkind.New(errkind.Precondition, "p.train.file_folder must be defined if file_pattern is None.")
		}
		plan.FilePattern = pathutil.Join(*p.Train.FileFolder, p.Train.DateAndFileNameFormat)
		if p.Train.EndDate == nil {
			return InputPlan{}, errkind.New(errkind.Precondition, "end_date in config or flag must be defined if file_pattern is None")
		}
		if ip.EnableStoppingSignals == nil {
			return InputPlan{}, errkind.New(errkind.Precondition, "When using end_date of input data, enable_stopping_signals need to be provided.")
		}
		plan.DateRange = &DateRange{Folder: *p.Train.FileFolder, StartDate: clonePtr(p.Train.StartDate), EndDate: *p.Train.EndDate}
	}
	if ip.NumShards <= 0 || ip.ShardIndex < 0 || ip.ShardIndex >= ip.NumShards {
		return InputPlan{}, errkind.New(errkind.Value, "input fn: shard index %d of %d shards", ip.ShardIndex, ip.NumShards)
	}
	plan.NumShards, plan.ShardIndex = ip.NumShards, ip.ShardIndex
	if p.Train.Repeat {
		if ip.EnableStoppingSignals == nil || *ip.EnableStoppingSignals {
			return InputPlan{}, errkind.New(errkind.Precondition, "input fn: train.repeat needs enable_stopping_signals to be False")
		}
		plan.Repeat = true
	}
	plan.StoppingSignals = ip.EnableStoppingSignals != nil && *ip.EnableStoppingSignals
	return plan, nil
}

// ShardFiles is Dataset.shard: the files at positions i with i mod numShards == index.
func ShardFiles(files []string, numShards, index int) ([]string, error) {
	if numShards <= 0 || index < 0 || index >= numShards {
		return nil, errkind.New(errkind.Value, "shard index %d of %d shards", index, numShards)
	}
	var out []string
	for i := index; i < len(files); i += numShards {
		out = append(out, files[i])
	}
	return out, nil
}

// InsertStoppingSignal is insert_stopping_signal's map fn: it adds the bool feature name of
// batchSize values, all true when stop (and then every sparse feature is replaced by an empty one
// of dense shape [batchSize, 1]), all false otherwise.
func InsertStoppingSignal(ex *Example, stop bool, batchSize int, name string) error {
	if batchSize < 0 {
		return errkind.New(errkind.Value, "stopping signal: negative batch size %d", batchSize)
	}
	if ex.Dense == nil {
		ex.Dense = map[string]tensor.Tensor{}
	}
	signal := make([]bool, batchSize)
	if stop {
		for k := range ex.Sparse {
			ex.Sparse[k] = tensor.EmptySparse[int64](int64(batchSize), 1)
		}
		for i := range signal {
			signal[i] = true
		}
	}
	ex.Dense[name] = tensor.Vector(signal...)
	return nil
}
