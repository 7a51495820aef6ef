package export

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/resource"
)

// The export state of a sub-graph is the reference's ExportSaverListenerState: the text-format
// monolith.model_export.ServingModelState in <export_base>/<sub_graph>/ExportSaverListenerState,
// one entry {export_dir, global_step} per version, oldest first. pkg/resource's ModelInfo reads it
// (the version of a checkpoint's global step).

// ReadState is export_state_utils.get_export_saver_listener_state: the state of the sub-graph
// directory dir, empty when it has none (pkg/resource reads it).
func ReadState(dir string) (*resource.ServingModelState, error) {
	return resource.ReadExportState(dir)
}

// WriteState is export_state_utils.overwrite_export_saver_listener_state: st into
// dir/ExportSaverListenerState, in the text format Python's text_format.MessageToString writes,
// through dir/ExportSaverListenerState-tmp renamed over it, dir created when missing (as the
// reference does).
func WriteState(dir string, st *resource.ServingModelState) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export state: %w", err)
	}
	return writeState(osFS{}, dir, st)
}

func writeState(fsys fileSystem, dir string, st *resource.ServingModelState) error {
	text, err := formatState(st)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, resource.ExportStateFile)
	tmp := file + "-tmp"
	if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("export state: %w", err)
	}
	if err := writeFileSync(fsys, tmp, []byte(text)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("export state: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("export state: %w", err)
	}
	return syncDir(dir)
}

// formatState is text_format.MessageToString of st.
func formatState(st *resource.ServingModelState) (string, error) {
	desc, err := stateDescriptor()
	if err != nil {
		return "", err
	}
	m := dynamicpb.NewMessage(desc)
	list := m.Mutable(desc.Fields().ByName("entries")).List()
	for _, e := range st.Entries {
		em := list.NewElement().Message()
		fields := em.Descriptor().Fields()
		em.Set(fields.ByName("export_dir"), protoreflect.ValueOfString(e.ExportDir))
		em.Set(fields.ByName("global_step"), protoreflect.ValueOfInt64(e.GlobalStep))
		list.Append(protoreflect.ValueOfMessage(em))
	}
	return pytext.Format(m), nil
}

// stateDescriptor is monolith.model_export.ServingModelState (export.proto), built at run time
// as pkg/resource builds it to read the file.
var stateDescriptor = sync.OnceValues(func() (protoreflect.MessageDescriptor, error) {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	i64 := descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("monolith/native_training/model_export/export.proto"),
		Package: proto.String("monolith.model_export"),
		Syntax:  proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("ServingEntry"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("export_dir"), Number: proto.Int32(1), Label: opt, Type: str},
				{Name: proto.String("global_step"), Number: proto.Int32(2), Label: opt, Type: i64},
			},
		}, {
			Name: proto.String("ServingModelState"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("entries"), Number: proto.Int32(1), Label: rep, Type: msg, TypeName: proto.String(".monolith.model_export.ServingEntry")},
			},
		}},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("export state descriptor: %w", err)
	}
	return fd.Messages().ByName("ServingModelState"), nil
})
