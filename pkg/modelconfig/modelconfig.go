// Package modelconfig builds the TF Serving messages the agent writes and sends (the model-config
// helpers of monolith/agent_service/utils.py): ModelConfig for each version policy, ModelSpec,
// ModelVersionStatus / StatusProto, and the default model config TF Serving always keeps loaded.
package modelconfig

import (
	"math"
	"path"
	"strings"

	"google.golang.org/protobuf/types/known/wrapperspb"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	storagepath "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/sources/storage_path"
	servingutil "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/util"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// TFSHome is where TF Serving is installed on serving hosts.
const TFSHome = "/opt/tiger/monolith_serving"

// Version policies accepted by ModelConfig (compared case-insensitively).
const (
	PolicyLatest     = "latest"
	PolicyLatestOnce = "latest_once"
	PolicyAll        = "all"
	PolicySpecific   = "specific"
)

// VersionData is a version policy's argument: one number (a count for latest, a version for
// specific) or, for specific only, a list of versions.
type VersionData struct {
	N    int64
	List []int64 // set for a list; N is ignored then
	// IsList tells a list (even empty) from a number.
	IsList bool
}

// Versions returns the data as a list of versions.
func (v VersionData) Versions() []int64 {
	if v.IsList {
		return v.List
	}
	return []int64{v.N}
}

// ModelConfig returns the config of one model (the reference's gen_model_config). The platform is
// "tensorflow". latest_once is rejected (kind Attribute): neither TF Serving 2.4 nor the
// reference's protos define it, so there is no field number to send; agent v3 resolves it to a
// specific version (LatestVersion) before calling this.
func ModelConfig(name, basePath, policy string, data VersionData, labels map[string]int64) (*servingconfig.ModelConfig, error) {
	mc := &servingconfig.ModelConfig{Name: name, BasePath: basePath, ModelPlatform: "tensorflow"}
	vp := &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy{}
	switch strings.ToLower(policy) {
	case PolicyLatest:
		if data.IsList {
			return nil, errkind.New(errkind.Precondition, "version policy latest takes a number of versions, not a list %v", data.List)
		}
		if data.N < 0 || data.N > math.MaxUint32 {
			// num_versions is a uint32: protobuf refuses the assignment (this is its message).
			return nil, errkind.New(errkind.Value, "Value out of range: %d", data.N)
		}
		vp.PolicyChoice = &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest_{
			Latest: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Latest{NumVersions: uint32(data.N)}}
	case PolicyLatestOnce:
		return nil, errkind.New(errkind.Attribute, "latest_once")
	case PolicyAll:
		vp.PolicyChoice = &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_All_{
			All: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_All{}}
	case PolicySpecific:
		vp.PolicyChoice = &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific_{
			Specific: &storagepath.FileSystemStoragePathSourceConfig_ServableVersionPolicy_Specific{Versions: append([]int64{}, data.Versions()...)}}
	default:
		return nil, errkind.New(errkind.Value, "%s is not allowed!", policy)
	}
	mc.ModelVersionPolicy = vp
	if labels != nil {
		mc.VersionLabels = make(map[string]int64, len(labels))
		for k, v := range labels {
			mc.VersionLabels[k] = v
		}
	}
	return mc, nil
}

// Default is the model config TF Serving always keeps loaded (DEFAULT_MODEL_CONFIG).
func Default() *servingconfig.ModelConfig {
	mc, _ := ModelConfig("default", path.Join(TFSHome, "dat", "saved_models", "entry"), PolicyLatest, VersionData{N: 1}, nil)
	return mc
}

// Version is a ModelSpec version: a number or a label; the zero value is none.
type Version struct {
	Number *int64
	Label  *string
}

// ModelSpec returns the spec addressing a model, a version or label, and a signature (the
// reference's gen_model_spec); empty signature means none.
func ModelSpec(name string, v Version, signature *string) *servingapis.ModelSpec {
	ms := &servingapis.ModelSpec{Name: name}
	switch {
	case v.Number != nil:
		ms.VersionChoice = &servingapis.ModelSpec_Version{Version: wrapperspb.Int64(*v.Number)}
	case v.Label != nil:
		ms.VersionChoice = &servingapis.ModelSpec_VersionLabel{VersionLabel: *v.Label}
	}
	if signature != nil {
		ms.SignatureName = *signature
	}
	return ms
}

// Status returns a StatusProto (gen_status_proto); a nil message leaves error_message unset.
func Status(code tfprotobuf.Code, message *string) *servingutil.StatusProto {
	s := &servingutil.StatusProto{ErrorCode: code}
	if message != nil {
		s.ErrorMessage = *message
	}
	return s
}

// VersionStatus returns a ModelVersionStatus with its status always present
// (gen_model_version_status).
func VersionStatus(version int64, state servingapis.ModelVersionStatus_State, code tfprotobuf.Code, message *string) *servingapis.ModelVersionStatus {
	return &servingapis.ModelVersionStatus{Version: version, State: state, Status: Status(code, message)}
}
