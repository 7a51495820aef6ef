// Package tfcompat checks that the generated TensorFlow / TensorFlow Serving messages under
// gen/pb/tensorflow* are wire- and text-compatible with the protos the Python reference uses: every
// protobuf text the reference printed (the goldens in parity/goldens/python) must parse into the
// matching Go message with no unknown field, print back byte for byte, and carry the expected
// values; and a few messages must encode to hand-computed wire bytes.
package tfcompat

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	apis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	config "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	servingtf "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/servables/tensorflow"
	storagepath "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/sources/storage_path"
	servingutil "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/util"
	"github.com/monolith-go/monolith/pkg/pytext"
)

const goldenDir = "parity/goldens/python"

// repoRoot walks up from the working directory to the first directory holding go.mod: the
// module root under `go test`, the runfiles root under `bazel test` (go.mod is in the test's data).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod in the working directory or any parent")
		}
		dir = parent
	}
}

// golden is the part of a golden file this test reads.
type golden struct {
	Case   string          `json:"case"`
	Output json.RawMessage `json:"output"`
	Error  *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func readGolden(t *testing.T, path string) golden {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

// texts returns the protobuf texts in a golden's output, which is one string, a list of strings,
// or an object whose values are strings, keyed by a label for error messages. It is empty when the
// call raised.
func texts(t *testing.T, g golden) map[string]string {
	t.Helper()
	out := map[string]string{}
	if g.Error != nil || len(g.Output) == 0 || string(g.Output) == "null" {
		return out
	}
	var one string
	if err := json.Unmarshal(g.Output, &one); err == nil {
		out[g.Case] = one
		return out
	}
	var list []string
	if err := json.Unmarshal(g.Output, &list); err == nil {
		for i, s := range list {
			out[g.Case+"["+strconv.Itoa(i)+"]"] = s
		}
		return out
	}
	var obj map[string]string
	if err := json.Unmarshal(g.Output, &obj); err == nil {
		for k, s := range obj {
			out[g.Case+"."+k] = s
		}
		return out
	}
	t.Fatalf("%s: output is neither a string, a list of strings nor an object of strings", g.Case)
	return nil
}

// checkNoUnknown fails when m, or any message inside it (Any payloads included, once unpacked),
// holds unknown fields.
func checkNoUnknown(t *testing.T, label string, m protoreflect.Message) {
	t.Helper()
	if len(m.GetUnknown()) > 0 {
		t.Errorf("%s: %s has unknown fields % x", label, m.Descriptor().FullName(), m.GetUnknown())
	}
	if m.Descriptor().FullName() == "google.protobuf.Any" {
		fds := m.Descriptor().Fields()
		url := m.Get(fds.ByName("type_url")).String()
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
		if err != nil {
			t.Errorf("%s: Any of unregistered type %q", label, url)
			return
		}
		inner := mt.New()
		if err := proto.Unmarshal(m.Get(fds.ByName("value")).Bytes(), inner.Interface()); err != nil {
			t.Errorf("%s: unpack %s: %v", label, url, err)
			return
		}
		checkNoUnknown(t, label, inner)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					checkNoUnknown(t, label, mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := 0; i < v.List().Len(); i++ {
					checkNoUnknown(t, label, v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			checkNoUnknown(t, label, v.Message())
		}
		return true
	})
}

// TestGoldenTexts parses every protobuf text in the goldens into its Go message.
func TestGoldenTexts(t *testing.T) {
	root := repoRoot(t)
	tests := []struct {
		glob   string
		newMsg func() proto.Message
	}{
		{"utils/default_model_config.json", func() proto.Message { return &config.ModelConfig{} }},
		{"utils/gen_model_config_*.json", func() proto.Message { return &config.ModelConfig{} }},
		{"utils/gen_model_server_config_*.json", func() proto.Message { return &config.ModelServerConfig{} }},
		{"tfs_monitor/gen_model_config_*.json", func() proto.Message { return &config.ModelServerConfig{} }},
		{"utils/gen_model_spec_variants.json", func() proto.Message { return &apis.ModelSpec{} }},
		{"utils/gen_model_version_status_variants.json", func() proto.Message { return &apis.ModelVersionStatus{} }},
		{"utils/platform_config_*.json", func() proto.Message { return &config.PlatformConfigMap{} }},
	}
	for _, tc := range tests {
		t.Run(tc.glob, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(root, goldenDir, filepath.FromSlash(tc.glob)))
			if err != nil {
				t.Fatal(err)
			}
			if len(files) == 0 {
				t.Fatalf("no golden file matches %s", tc.glob)
			}
			parsed := 0
			for _, f := range files {
				all := texts(t, readGolden(t, f))
				labels := make([]string, 0, len(all))
				for l := range all {
					labels = append(labels, l)
				}
				sort.Strings(labels)
				for _, label := range labels {
					text := all[label]
					m := tc.newMsg()
					// prototext rejects unknown field names and unregistered Any types by default.
					if err := prototext.Unmarshal([]byte(text), m); err != nil {
						t.Errorf("%s: parse as %T: %v\n%s", label, m, err, text)
						continue
					}
					checkNoUnknown(t, label, m.ProtoReflect())
					if got := pytext.Format(m); got != text {
						t.Errorf("%s: printed back differently\n got:\n%s\nwant:\n%s", label, got, text)
					}
					parsed++
				}
			}
			if parsed == 0 {
				t.Fatalf("no protobuf text in the files matching %s", tc.glob)
			}
			t.Logf("%d texts parsed", parsed)
		})
	}
}

// TestGoldenValues checks chosen values of chosen golden texts.
func TestGoldenValues(t *testing.T) {
	root := repoRoot(t)
	parse := func(t *testing.T, file string, idx int, m proto.Message) {
		t.Helper()
		g := readGolden(t, filepath.Join(root, goldenDir, filepath.FromSlash(file)))
		var text string
		if idx < 0 {
			if err := json.Unmarshal(g.Output, &text); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		} else {
			var list []string
			if err := json.Unmarshal(g.Output, &list); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			text = list[idx]
		}
		if err := prototext.Unmarshal([]byte(text), m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	legacy := func(t *testing.T, file string) *servingtf.SessionBundleConfig {
		t.Helper()
		var pcm config.PlatformConfigMap
		parse(t, file, -1, &pcm)
		pc := pcm.GetPlatformConfigs()["tensorflow"]
		if pc == nil {
			t.Fatalf("%s: no \"tensorflow\" platform", file)
		}
		var adapter servingtf.SavedModelBundleSourceAdapterConfig
		if err := pc.GetSourceAdapterConfig().UnmarshalTo(&adapter); err != nil {
			t.Fatalf("%s: unpack source_adapter_config: %v", file, err)
		}
		return adapter.GetLegacyConfig()
	}
	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"default_model_config latest 1", func(t *testing.T) {
			var m config.ModelConfig
			parse(t, "utils/default_model_config.json", -1, &m)
			if m.GetName() != "default" || m.GetModelPlatform() != "tensorflow" {
				t.Errorf("name %q platform %q", m.GetName(), m.GetModelPlatform())
			}
			if got := m.GetModelVersionPolicy().GetLatest().GetNumVersions(); got != 1 {
				t.Errorf("latest.num_versions = %d, want 1", got)
			}
		}},
		{"latest 3", func(t *testing.T) {
			var m config.ModelConfig
			parse(t, "utils/gen_model_config_latest_3.json", -1, &m)
			if got := m.GetModelVersionPolicy().GetLatest().GetNumVersions(); got != 3 {
				t.Errorf("latest.num_versions = %d, want 3", got)
			}
		}},
		{"specific list", func(t *testing.T) {
			var m config.ModelConfig
			parse(t, "utils/gen_model_config_specific_list.json", -1, &m)
			got := m.GetModelVersionPolicy().GetSpecific().GetVersions()
			if len(got) == 0 {
				t.Fatal("specific.versions is empty")
			}
			want := goldenVersions(t, root, "utils/gen_model_config_specific_list.json")
			if !equalInt64(got, want) {
				t.Errorf("specific.versions = %v, want %v", got, want)
			}
		}},
		{"all", func(t *testing.T) {
			var m config.ModelConfig
			parse(t, "utils/gen_model_config_all.json", -1, &m)
			if m.GetModelVersionPolicy().GetAll() == nil {
				t.Errorf("policy %v, want all", m.GetModelVersionPolicy())
			}
		}},
		{"labels", func(t *testing.T) {
			var m config.ModelConfig
			parse(t, "utils/gen_model_config_specific_labels.json", -1, &m)
			want := goldenLabels(t, root, "utils/gen_model_config_specific_labels.json")
			if len(want) == 0 {
				t.Fatal("the golden has no version_labels")
			}
			got := m.GetVersionLabels()
			if len(got) != len(want) {
				t.Errorf("version_labels = %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("version_labels[%q] = %d, want %d", k, got[k], v)
				}
			}
		}},
		{"model spec version 3", func(t *testing.T) {
			var m apis.ModelSpec
			parse(t, "utils/gen_model_spec_variants.json", 1, &m)
			if m.GetVersion() == nil || m.GetVersion().GetValue() != 3 {
				t.Errorf("version = %v, want 3", m.GetVersion())
			}
		}},
		{"model spec label and signature", func(t *testing.T) {
			var m apis.ModelSpec
			parse(t, "utils/gen_model_spec_variants.json", 2, &m)
			if m.GetVersionLabel() != "stable" || m.GetSignatureName() != "serving_default" {
				t.Errorf("version_label %q signature_name %q", m.GetVersionLabel(), m.GetSignatureName())
			}
		}},
		{"model spec version 0 is set", func(t *testing.T) {
			var m apis.ModelSpec
			parse(t, "utils/gen_model_spec_variants.json", 3, &m)
			if m.GetVersion() == nil || m.GetVersion().GetValue() != 0 {
				t.Errorf("version = %v, want a set Int64Value 0", m.GetVersion())
			}
		}},
		{"version status AVAILABLE", func(t *testing.T) {
			var m apis.ModelVersionStatus
			parse(t, "utils/gen_model_version_status_variants.json", 1, &m)
			if m.GetVersion() != 2 || m.GetState() != apis.ModelVersionStatus_AVAILABLE || int32(m.GetState()) != 30 {
				t.Errorf("version %d state %v", m.GetVersion(), m.GetState())
			}
		}},
		{"version status NOT_FOUND", func(t *testing.T) {
			var m apis.ModelVersionStatus
			parse(t, "utils/gen_model_version_status_variants.json", 2, &m)
			st := m.GetStatus()
			if st.GetErrorCode() != tfprotobuf.Code_NOT_FOUND || int32(st.GetErrorCode()) != 5 {
				t.Errorf("error_code = %v, want NOT_FOUND (5)", st.GetErrorCode())
			}
			if st.GetErrorMessage() != "m is not found" || m.GetVersion() != -1 || m.GetState() != apis.ModelVersionStatus_UNKNOWN {
				t.Errorf("got %v", &m)
			}
		}},
		{"platform config cpu limit", func(t *testing.T) {
			lc := legacy(t, "utils/platform_config_cpu_limit.json")
			sc := lc.GetSessionConfig()
			if sc.GetIntraOpParallelismThreads() != 8 || sc.GetInterOpParallelismThreads() != 8 {
				t.Errorf("intra %d inter %d, want 8 8", sc.GetIntraOpParallelismThreads(), sc.GetInterOpParallelismThreads())
			}
			if !sc.GetGpuOptions().GetAllowGrowth() || !sc.GetAllowSoftPlacement() || !lc.GetEnableModelWarmup() {
				t.Errorf("got %v", lc)
			}
		}},
		{"platform config dense batching", func(t *testing.T) {
			lc := legacy(t, "utils/platform_config_dense_batching.json")
			bp := lc.GetBatchingParameters()
			if !bp.GetSupportDiffDimSizeInputs() {
				t.Error("support_diff_dim_size_inputs = false, want true")
			}
			if bp.GetMaxBatchSize().GetValue() != 1024 || bp.GetBatchTimeoutMicros().GetValue() != 800 ||
				bp.GetMaxEnqueuedBatches().GetValue() != 100000 || bp.GetNumBatchThreads().GetValue() != 8 {
				t.Errorf("batching_parameters %v", bp)
			}
			if lc.GetEnableModelWarmup() {
				t.Error("enable_model_warmup = true, want false")
			}
		}},
		{"platform config no growth", func(t *testing.T) {
			lc := legacy(t, "utils/platform_config_explicit_parallelism_nogrowth.json")
			sc := lc.GetSessionConfig()
			if sc.GetIntraOpParallelismThreads() != 4 || sc.GetInterOpParallelismThreads() != 2 {
				t.Errorf("intra %d inter %d, want 4 2", sc.GetIntraOpParallelismThreads(), sc.GetInterOpParallelismThreads())
			}
			if sc.GetGpuOptions() == nil || sc.GetGpuOptions().GetAllowGrowth() {
				t.Errorf("gpu_options %v, want present and empty", sc.GetGpuOptions())
			}
		}},
		{"latest_once is absent, as in the reference's protos", func(t *testing.T) {
			// The reference raised AttributeError('latest_once'): the public TF Serving 2.4 protos it
			// was generated from have no such field, and neither have ours.
			g := readGolden(t, filepath.Join(root, goldenDir, "utils/gen_model_config_latest_once.json"))
			if g.Error == nil || g.Error.Type != "AttributeError" || g.Error.Message != "latest_once" {
				t.Errorf("golden error %+v, want AttributeError latest_once", g.Error)
			}
			policy := (&storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy{}).ProtoReflect().Descriptor()
			if policy.Fields().ByName("latest_once") != nil {
				t.Error("ServableVersionPolicy has a latest_once field")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.check)
	}
}

// goldenVersions returns the version list a gen_model_config golden was called with.
func goldenVersions(t *testing.T, root, file string) []int64 {
	t.Helper()
	var g struct {
		Input struct {
			VersionData []int64 `json:"version_data"`
		} `json:"input"`
	}
	data, err := os.ReadFile(filepath.Join(root, goldenDir, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return g.Input.VersionData
}

// goldenLabels returns the version_labels a gen_model_config golden was called with.
func goldenLabels(t *testing.T, root, file string) map[string]int64 {
	t.Helper()
	var g struct {
		Input struct {
			VersionLabels map[string]int64 `json:"version_labels"`
		} `json:"input"`
	}
	data, err := os.ReadFile(filepath.Join(root, goldenDir, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return g.Input.VersionLabels
}

func equalInt64(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWireBytes compares proto.Marshal against hand-encoded bytes, so a wrong field number or wire
// type shows up even where text parsing (which goes by name) would not notice.
func TestWireBytes(t *testing.T) {
	anyAdapter := func(t *testing.T) proto.Message {
		t.Helper()
		var pcm config.PlatformConfigMap
		inner := &servingtf.SavedModelBundleSourceAdapterConfig{
			LegacyConfig: &servingtf.SessionBundleConfig{
				BatchingParameters: &servingtf.BatchingParameters{SupportDiffDimSizeInputs: true},
			},
		}
		pc := &config.PlatformConfig{}
		var err error
		if pc.SourceAdapterConfig, err = anypb.New(inner); err != nil {
			t.Fatal(err)
		}
		pcm.PlatformConfigs = map[string]*config.PlatformConfig{"tensorflow": pc}
		return &pcm
	}
	const adapterURL = "type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig"
	tests := []struct {
		name  string
		msg   func(t *testing.T) proto.Message
		empty proto.Message
		want  []byte
	}{
		{"ModelSpec version 3", func(*testing.T) proto.Message {
			return &apis.ModelSpec{Name: "m", VersionChoice: &apis.ModelSpec_Version{Version: wrapperspb.Int64(3)}}
		}, &apis.ModelSpec{}, []byte{
			0x0a, 0x01, 'm', // 1: name
			0x12, 0x02, // 2: version, length-delimited, 2 bytes
			0x08, 0x03, // Int64Value 1: value, varint 3
		}},
		{"ModelSpec label and signature", func(*testing.T) proto.Message {
			return &apis.ModelSpec{Name: "m", SignatureName: "s", VersionChoice: &apis.ModelSpec_VersionLabel{VersionLabel: "l"}}
		}, &apis.ModelSpec{}, []byte{
			0x0a, 0x01, 'm', // 1: name
			0x1a, 0x01, 's', // 3: signature_name
			0x22, 0x01, 'l', // 4: version_label
		}},
		{"ModelVersionStatus", func(*testing.T) proto.Message {
			return &apis.ModelVersionStatus{
				Version: 2,
				State:   apis.ModelVersionStatus_AVAILABLE,
				Status:  &servingutil.StatusProto{ErrorCode: tfprotobuf.Code_NOT_FOUND, ErrorMessage: "x"},
			}
		}, &apis.ModelVersionStatus{}, []byte{
			0x08, 0x02, // 1: version
			0x10, 0x1e, // 2: state, 30
			0x1a, 0x05, // 3: status, 5 bytes
			0x08, 0x05, // StatusProto 1: error_code, 5
			0x12, 0x01, 'x', // StatusProto 2: error_message
		}},
		{"ModelConfig policies", func(*testing.T) proto.Message {
			return &config.ModelConfig{
				Name: "n",
				ModelVersionPolicy: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy{
					PolicyChoice: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific_{
						Specific: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific{Versions: []int64{1, 2}},
					},
				},
				VersionLabels: map[string]int64{"a": 1},
			}
		}, &config.ModelConfig{}, []byte{
			0x0a, 0x01, 'n', // 1: name
			0x3a, 0x07, // 7: model_version_policy, 7 bytes
			0xb2, 0x06, 0x04, // 102: specific (tag (102<<3)|2 = 818 = 0xb2 0x06), 4 bytes
			0x0a, 0x02, 0x01, 0x02, // Specific 1: versions, packed [1, 2]
			0x42, 0x05, // 8: version_labels entry, 5 bytes
			0x0a, 0x01, 'a', // key
			0x10, 0x01, // value
		}},
		{"ModelServerConfig latest", func(*testing.T) proto.Message {
			return &config.ModelServerConfig{Config: &config.ModelServerConfig_ModelConfigList{
				ModelConfigList: &config.ModelConfigList{Config: []*config.ModelConfig{{
					ModelVersionPolicy: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy{
						PolicyChoice: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest_{
							Latest: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest{NumVersions: 1},
						},
					},
				}}},
			}}
		}, &config.ModelServerConfig{}, []byte{
			0x0a, 0x09, // 1: model_config_list, 9 bytes
			0x0a, 0x07, // ModelConfigList 1: config, 7 bytes
			0x3a, 0x05, // 7: model_version_policy, 5 bytes
			0xa2, 0x06, 0x02, // 100: latest (tag (100<<3)|2 = 802 = 0xa2 0x06), 2 bytes
			0x08, 0x01, // Latest 1: num_versions
		}},
		{"PlatformConfigMap with adapter", anyAdapter, &config.PlatformConfigMap{}, func() []byte {
			// SavedModelBundleSourceAdapterConfig{legacy_config{batching_parameters{support_diff_dim_size_inputs: true}}}
			inner := []byte{
				0xc2, 0x3e, 0x04, // 1000: legacy_config (tag (1000<<3)|2 = 8002 = 0xc2 0x3e), 4 bytes
				0x1a, 0x02, // SessionBundleConfig 3: batching_parameters, 2 bytes
				0x50, 0x01, // BatchingParameters 10: support_diff_dim_size_inputs, varint 1
			}
			anyMsg := append([]byte{0x0a, byte(len(adapterURL))}, adapterURL...) // Any 1: type_url
			anyMsg = append(anyMsg, 0x12, byte(len(inner)))                      // Any 2: value
			anyMsg = append(anyMsg, inner...)
			pc := append([]byte{0x0a, byte(len(anyMsg))}, anyMsg...) // PlatformConfig 1: source_adapter_config
			entry := []byte{0x0a, 0x0a}                              // map entry 1: key "tensorflow"
			entry = append(entry, "tensorflow"...)
			entry = append(entry, 0x12, byte(len(pc))) // map entry 2: value
			entry = append(entry, pc...)
			return append([]byte{0x0a, byte(len(entry))}, entry...) // 1: platform_configs
		}()},
		{"ConfigProto", func(*testing.T) proto.Message {
			return &servingtf.SessionBundleConfig{
				SessionConfig: &tfprotobuf.ConfigProto{
					IntraOpParallelismThreads: 8,
					InterOpParallelismThreads: 4,
					GpuOptions:                &tfprotobuf.GPUOptions{AllowGrowth: true, PerProcessGpuMemoryFraction: 0.5},
					AllowSoftPlacement:        true,
				},
				EnableModelWarmup: true,
			}
		}, &servingtf.SessionBundleConfig{}, []byte{
			0x12, 0x13, // 2: session_config, 19 bytes
			0x10, 0x08, // ConfigProto 2: intra_op_parallelism_threads
			0x28, 0x04, // ConfigProto 5: inter_op_parallelism_threads
			0x32, 0x0b, // ConfigProto 6: gpu_options, 11 bytes
			0x09, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f, // GPUOptions 1: per_process_gpu_memory_fraction, fixed64 0.5
			0x20, 0x01, // GPUOptions 4: allow_growth
			0x38, 0x01, // ConfigProto 7: allow_soft_placement
			0xd8, 0x30, 0x01, // 779: enable_model_warmup (tag (779<<3)|0 = 6232 = 0xd8 0x30)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.msg(t)
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("wire bytes\n got % x\nwant % x", got, tc.want)
			}
			if err := proto.Unmarshal(tc.want, tc.empty); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			checkNoUnknown(t, tc.name, tc.empty.ProtoReflect())
			if !proto.Equal(tc.empty, msg) {
				t.Errorf("round trip gave %v, want %v", tc.empty, msg)
			}
		})
	}
}

// TestServiceNames pins the gRPC method paths a real tensorflow_model_server serves.
func TestServiceNames(t *testing.T) {
	for got, want := range map[string]string{
		apis.ModelService_GetModelStatus_FullMethodName:            "/tensorflow.serving.ModelService/GetModelStatus",
		apis.ModelService_HandleReloadConfigRequest_FullMethodName: "/tensorflow.serving.ModelService/HandleReloadConfigRequest",
		apis.PredictionService_Predict_FullMethodName:              "/tensorflow.serving.PredictionService/Predict",
		apis.PredictionService_GetModelMetadata_FullMethodName:     "/tensorflow.serving.PredictionService/GetModelMetadata",
	} {
		if got != want {
			t.Errorf("method %q, want %q", got, want)
		}
	}
}
