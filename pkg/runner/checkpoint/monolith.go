package checkpoint

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/prototext"

	monolithckptpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// MonolithStateFile is the name of Monolith's own state file in a checkpoint directory
// (save_utils.MONOLITH_CKPT_STATE_FILE_NAME): the checkpoints retention must never delete, and when
// the last save happened.
const MonolithStateFile = "monolith_checkpoint"

// MonolithState is Monolith's checkpoint state (MonolithCheckpointState).
type MonolithState = monolithckptpb.MonolithCheckpointState

// ReadMonolithState is save_utils.get_monolith_checkpoint_state(dir, remove_invalid_path): the
// MonolithCheckpointState in dir/monolith_checkpoint, nil when there is no such file. With
// removeInvalid, relative exempt paths are joined to dir and those whose checkpoint does not exist
// (Exists) are dropped.
//
// A file that exists but cannot be read or parsed is an error of kind Value naming it; the reference
// logs it and returns None, after which a saver treats no checkpoint as exempt and may delete the
// very checkpoints the file protects.
func ReadMonolithState(dir string, removeInvalid bool, log *slog.Logger) (*MonolithState, error) {
	if log == nil {
		log = slog.Default()
	}
	file := pathutil.Join(dir, MonolithStateFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errkind.Wrap(errkind.Value, err)
	}
	st := &MonolithState{}
	if err := prototext.Unmarshal(data, st); err != nil {
		return nil, errkind.New(errkind.Value, "monolith checkpoint state %s: %v", file, err)
	}
	if !removeInvalid {
		return st, nil
	}
	kept := st.ExemptModelCheckpointPaths[:0]
	for _, p := range st.ExemptModelCheckpointPaths {
		p = joinUnlessAbs(dir, p)
		if !Exists(p) {
			log.Warn("exempt checkpoint does not exist; removed from monolith_checkpoint", "checkpoint", p)
			continue
		}
		kept = append(kept, p)
	}
	st.ExemptModelCheckpointPaths = kept
	return st, nil
}

// WriteMonolithState writes st into dir/monolith_checkpoint atomically, in the text format the
// reference writes (text_format.MessageToString).
func WriteMonolithState(dir string, st *MonolithState) error {
	return WriteFileAtomic(pathutil.Join(dir, MonolithStateFile), []byte(pytext.Format(st)))
}

// Exists is TensorFlow's checkpoint_exists: files match <prefix>.index (a V2 checkpoint) or the
// prefix itself (as a glob pattern).
func Exists(prefix string) bool {
	for _, pattern := range []string{prefix + ".index", prefix} {
		if m, err := filepath.Glob(pattern); err == nil && len(m) > 0 {
			return true
		}
	}
	return false
}
