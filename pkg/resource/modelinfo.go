package resource

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// ExportStateFile is the text-format monolith.model_export.ServingModelState an export base
// directory keeps (export_state_utils._ExportSaverListenerStateFile).
const ExportStateFile = "ExportSaverListenerState"

// assetRow matches the sparse (embedding) files of a checkpoint's assets directory; the group is
// the PS index: "<table>_<ps>-<part>-of-<parts>". The reference's ROW with Python's meanings: \d is
// any Unicode decimal digit and $ also matches before a final newline.
var assetRow = regexp.MustCompile(`^.+_(\p{Nd}+)-\p{Nd}+-of-\p{Nd}+\n?$`)

// SubModelInfo is the size of one exported sub model and the directory of the version measured.
type SubModelInfo struct {
	Size        int64
	VersionPath string
}

// Exists is the reference's exists: path names an existing file or directory.
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ModelInfoOptions are cal_model_info_v2's optional arguments.
type ModelInfoOptions struct {
	// Ckpt is the checkpoint name ("model.ckpt-<global_step>"); "" reads the checkpoint directory's
	// CheckpointState (the directory above the export directory).
	Ckpt string
	// Version is the exported version to measure; "" picks it (see ModelInfo).
	Version string
	// Logger receives warnings (an unreadable CheckpointState); nil means slog.Default().
	Logger *slog.Logger
}

// ModelInfo is the reference's cal_model_info_v2 on local files: for each sub model under
// exportDir (entry, ps_0, ...), the bytes of its exported version plus, for ps_N, the checkpoint
// assets of PS N, and the version's directory.
//
// The version, unless given: with a checkpoint, the version whose ExportSaverListenerState entry has
// the checkpoint's global step; otherwise the greatest numeric version every sub model has.
func ModelInfo(exportDir string, opts ModelInfoOptions) (map[string]SubModelInfo, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	exportDir, err := filepath.Abs(strings.TrimRight(exportDir, "/"))
	if err != nil {
		return nil, fmt.Errorf("model info: %w", err)
	}
	if !Exists(exportDir) {
		return nil, errkind.New(errkind.Generic, "%s is not exists ", exportDir)
	}
	entries, err := os.ReadDir(exportDir)
	if err != nil {
		return nil, fmt.Errorf("model info: %w", err)
	}
	var subs []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && isDir(filepath.Join(exportDir, e.Name())) {
			subs = append(subs, e.Name())
		}
	}

	ckptDir := filepath.Dir(exportDir)
	ckpt := opts.Ckpt
	if ckpt == "" {
		// An unreadable or unparsable state file is logged and ignored, as TensorFlow does.
		st, err := checkpoint.ReadState(ckptDir, log)
		switch {
		case err != nil:
			return nil, fmt.Errorf("model info: %w", err)
		case st != nil:
			ckpt = filepath.Base(st.ModelCheckpointPath)
		}
	}
	globalStep := int64(-1)
	if ckpt != "" {
		parts := strings.Split(ckpt, "-")
		if globalStep, err = pyint.Parse(parts[len(parts)-1]); err != nil {
			return nil, errkind.New(errkind.Value, "model info: checkpoint %q does not end in -<global step>", ckpt)
		}
	}

	var version int64
	if opts.Version != "" {
		if version, err = pyint.Parse(opts.Version); err != nil {
			return nil, errkind.New(errkind.Value, "model info: version %q is not an integer", opts.Version)
		}
	} else if version, err = pickVersion(exportDir, subs, globalStep); err != nil {
		return nil, err
	}

	info := make(map[string]SubModelInfo, len(subs))
	for _, sub := range subs {
		vp := filepath.Join(exportDir, sub, strconv.FormatInt(version, 10))
		if !Exists(vp) {
			return nil, errkind.New(errkind.Precondition, "model info: %s does not exist", vp)
		}
		size, err := treeSize(vp)
		if err != nil {
			return nil, fmt.Errorf("model info: %w", err)
		}
		info[sub] = SubModelInfo{Size: size, VersionPath: vp}
	}

	if ckpt != "" {
		if err := addAssets(info, filepath.Join(ckptDir, ckpt+".assets")); err != nil {
			return nil, fmt.Errorf("model info: %w", err)
		}
	}
	return info, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// pickVersion chooses the version to measure when none is given (step 3 of cal_model_info_v2).
func pickVersion(exportDir string, subs []string, globalStep int64) (int64, error) {
	var common map[int64]bool
	found, hasFound := int64(0), false
	for _, sub := range subs {
		base := filepath.Join(exportDir, sub)
		versions := map[int64]bool{}
		var st *ServingModelState
		if globalStep >= 0 {
			var err error
			if st, err = ReadExportState(base); err != nil {
				return 0, fmt.Errorf("model info: %w", err)
			}
		}
		if st != nil && len(st.Entries) > 0 {
			for _, e := range st.Entries {
				v, err := pyint.Parse(filepath.Base(e.ExportDir))
				if err != nil {
					return 0, errkind.New(errkind.Value, "model info: %s: export_dir %q does not end in a version", base, e.ExportDir)
				}
				versions[v] = true
				if e.GlobalStep == globalStep {
					if hasFound && found != v {
						return 0, errkind.New(errkind.Precondition,
							"model info: global step %d is version %d in %s but %d elsewhere", globalStep, v, sub, found)
					}
					found, hasFound = v, true
					break
				}
			}
		} else {
			entries, err := os.ReadDir(base)
			if err != nil {
				return 0, fmt.Errorf("model info: %w", err)
			}
			for _, e := range entries {
				if v, ok := numeric(e.Name()); ok {
					versions[v] = true
				}
			}
		}
		if common == nil {
			common = versions
		} else {
			for v := range common {
				if !versions[v] {
					delete(common, v)
				}
			}
		}
	}
	if len(common) == 0 {
		return 0, errkind.New(errkind.Precondition, "model info: no version common to the sub models of %s", exportDir)
	}
	if hasFound {
		return found, nil
	}
	return slices.Max(slices.Collect(maps.Keys(common))), nil
}

// numeric is the reference's `int(num) for num in ... if num.isnumeric()` for names made of
// decimal digits (any script, as int() reads them). Names that isnumeric() accepts but int()
// rejects ("½", "²") raise in the reference; here they are not versions.
func numeric(name string) (int64, bool) {
	if name == "" {
		return 0, false
	}
	for _, c := range name {
		if !unicode.Is(unicode.Nd, c) {
			return 0, false
		}
	}
	v, err := pyint.Parse(name)
	return v, err == nil
}

// treeSize adds up the sizes of the files under dir (links to files count as their targets, as
// tf.io.gfile.stat does).
func treeSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return nil
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !st.IsDir() {
			total += st.Size()
		}
		return nil
	})
	return total, err
}

// addAssets adds the size of each sparse file in assets to its PS's sub model.
func addAssets(info map[string]SubModelInfo, assets string) error {
	entries, err := os.ReadDir(assets)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		m := assetRow.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		key := "ps_" + m[1]
		sub, ok := info[key]
		if !ok {
			return errkind.New(errkind.NotFound, "assets file %s belongs to %s, which was not exported", e.Name(), key)
		}
		st, err := os.Stat(filepath.Join(assets, e.Name()))
		if err != nil {
			return err
		}
		sub.Size += st.Size()
		info[key] = sub
	}
	return nil
}

// ServingEntry is monolith.model_export.ServingEntry.
type ServingEntry struct {
	ExportDir  string
	GlobalStep int64
}

// ServingModelState is monolith.model_export.ServingModelState.
type ServingModelState struct {
	Entries []ServingEntry
}

// ReadExportState is export_state_utils.get_export_saver_listener_state: the state in
// exportBase/ExportSaverListenerState, empty when the file does not exist.
func ReadExportState(exportBase string) (*ServingModelState, error) {
	file := filepath.Join(exportBase, ExportStateFile)
	st := &ServingModelState{}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("export state: %w", err)
	}
	desc, err := servingStateDescriptor()
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(desc)
	if err := prototext.Unmarshal(data, m); err != nil {
		return nil, errkind.New(errkind.Value, "export state %s: %w", file, err)
	}
	entries := m.Get(desc.Fields().ByName("entries")).List()
	for i := 0; i < entries.Len(); i++ {
		e := entries.Get(i).Message()
		fields := e.Descriptor().Fields()
		st.Entries = append(st.Entries, ServingEntry{
			ExportDir:  e.Get(fields.ByName("export_dir")).String(),
			GlobalStep: e.Get(fields.ByName("global_step")).Int(),
		})
	}
	return st, nil
}

// servingStateDescriptor builds the ServingModelState text-format schema at run time, so parsing
// it needs none of monolith's generated code (field names and numbers as upstream).
var servingStateDescriptor = sync.OnceValues(func() (protoreflect.MessageDescriptor, error) {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	i64 := descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	field := func(name string, num int32, label *descriptorpb.FieldDescriptorProto_Label,
		typ *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label, Type: typ}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("monolith/native_training/model_export/export.proto"),
		Package: proto.String("monolith.model_export"),
		Syntax:  proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("ServingEntry"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("export_dir", 1, opt, str, ""),
				field("global_step", 2, opt, i64, ""),
			},
		}, {
			Name:  proto.String("ServingModelState"),
			Field: []*descriptorpb.FieldDescriptorProto{field("entries", 1, rep, msg, ".monolith.model_export.ServingEntry")},
		}},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("export state descriptor: %w", err)
	}
	return fd.Messages().ByName("ServingModelState"), nil
})
