package modelserver

import (
	"context"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// SignatureDefField is the metadata field TF Serving answers: the model's SignatureDefMap.
const SignatureDefField = "signature_def"

// unknownSignature labels requests for a signature the servable does not have.
const unknownSignature = "(unknown)"

// modelService is ModelService over a Manager.
type modelService struct {
	servingapis.UnimplementedModelServiceServer
	mgr     *Manager
	metrics *Metrics
}

func (s *modelService) GetModelStatus(_ context.Context, req *servingapis.GetModelStatusRequest) (*servingapis.GetModelStatusResponse, error) {
	start := time.Now()
	list, err := s.mgr.Status(req.GetModelSpec())
	s.metrics.observe(s.knownModel(req.GetModelSpec().GetName()), "", "GetModelStatus", status.Code(err), time.Since(start))
	if err != nil {
		return nil, err
	}
	return &servingapis.GetModelStatusResponse{ModelVersionStatus: list}, nil
}

func (s *modelService) knownModel(name string) string {
	if s.mgr.Config(name) != nil {
		return name
	}
	return unknownModel
}

// HandleReloadConfigRequest applies the request's model config list (Manager.Reload). A config
// that is not a model_config_list, or a bad one, is answered INVALID_ARGUMENT, as TF Serving does.
func (s *modelService) HandleReloadConfigRequest(_ context.Context, req *servingapis.ReloadConfigRequest) (*servingapis.ReloadConfigResponse, error) {
	start := time.Now()
	err := s.reload(req)
	s.metrics.observe("", "", "HandleReloadConfigRequest", status.Code(err), time.Since(start))
	if err != nil {
		return nil, err
	}
	return &servingapis.ReloadConfigResponse{Status: modelconfig.Status(tfprotobuf.Code_OK, nil)}, nil
}

func (s *modelService) reload(req *servingapis.ReloadConfigRequest) error {
	list := req.GetConfig().GetModelConfigList()
	if list == nil {
		return status.Error(codes.InvalidArgument, "the config holds no model_config_list (custom model configs are not served)")
	}
	return s.mgr.Reload(list.GetConfig())
}

// predictionService is PredictionService over a Manager.
type predictionService struct {
	servingapis.UnimplementedPredictionServiceServer
	mgr     *Manager
	metrics *Metrics
}

// Predict runs the signature the request names (DefaultSignature when none) of the servable its
// model spec selects (Manager.Acquire), keeping the outputs output_filter names (all when none).
func (p *predictionService) Predict(ctx context.Context, req *servingapis.PredictRequest) (_ *servingapis.PredictResponse, err error) {
	start := time.Now()
	model, sigLabel := "", unknownSignature
	defer func() { p.metrics.observe(model, sigLabel, "Predict", status.Code(err), time.Since(start)) }()
	h, err := p.mgr.Acquire(req.GetModelSpec())
	if err != nil {
		return nil, err
	}
	defer h.Release()
	model = h.Model
	sig := req.GetModelSpec().GetSignatureName()
	if sig == "" {
		sig = DefaultSignature
	}
	def, ok := h.Signatures()[sig]
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "Serving signature key %q not found; %s serves %v", sig, model, slices.Sorted(maps.Keys(h.Signatures())))
	}
	sigLabel = sig
	out, err := h.Predict(ctx, sig, req.GetInputs())
	if err != nil {
		return nil, StatusOf(err).Err()
	}
	if filter := req.GetOutputFilter(); len(filter) > 0 {
		kept := make(map[string]*tfframework.TensorProto, len(filter))
		for _, name := range filter {
			t, ok := out[name]
			if _, declared := def.GetOutputs()[name]; !ok || !declared {
				return nil, status.Errorf(codes.InvalidArgument, "output tensor alias not found in signature: %s", name)
			}
			kept[name] = t
		}
		out = kept
	}
	return &servingapis.PredictResponse{
		ModelSpec: &servingapis.ModelSpec{Name: h.Model, VersionChoice: &servingapis.ModelSpec_Version{Version: wrapperspb.Int64(h.Version)}, SignatureName: sig},
		Outputs:   out,
	}, nil
}

// GetModelMetadata answers, for the servable the model spec selects, signature_def (a
// SignatureDefMap in an Any, as TF Serving) and, for clients written against the reference's fake
// TF Serving (tfs_client's meta command), model_name, base_path, version, state, signature_name
// and num_versions (the versions available), each as the Python repr of the value in an Any
// without type URL. Another field is INVALID_ARGUMENT, as in TF Serving.
func (p *predictionService) GetModelMetadata(_ context.Context, req *servingapis.GetModelMetadataRequest) (_ *servingapis.GetModelMetadataResponse, err error) {
	start := time.Now()
	model := ""
	defer func() { p.metrics.observe(model, "", "GetModelMetadata", status.Code(err), time.Since(start)) }()
	if len(req.GetMetadataField()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "GetModelMetadataRequest must specify at least one metadata_field")
	}
	h, err := p.mgr.Acquire(req.GetModelSpec())
	if err != nil {
		return nil, err
	}
	defer h.Release()
	model = h.Model
	conf := p.mgr.Config(h.Model)
	sigs := h.Signatures()
	md := map[string]*anypb.Any{}
	for _, f := range req.GetMetadataField() {
		var v any
		switch f {
		case SignatureDefField:
			a, err := anypb.New(&servingapis.SignatureDefMap{SignatureDef: sigs})
			if err != nil {
				return nil, status.Errorf(codes.Internal, "encode signature_def: %v", err)
			}
			md[f] = a
			continue
		case "model_name":
			v = h.Model
		case "base_path":
			v = conf.GetBasePath()
		case "version":
			v = h.Version
		case "state":
			v = int64(StateAvailable)
		case "signature_name":
			v = faketfs.Tuple(slices.Sorted(maps.Keys(sigs)))
		case "num_versions":
			v = int64(p.mgr.available(h.Model))
		default:
			return nil, status.Errorf(codes.InvalidArgument, "Metadata field %s is not supported", f)
		}
		md[f] = &anypb.Any{Value: []byte(faketfs.PyRepr(v))}
	}
	return &servingapis.GetModelMetadataResponse{
		ModelSpec: &servingapis.ModelSpec{Name: h.Model, VersionChoice: &servingapis.ModelSpec_Version{Version: wrapperspb.Int64(h.Version)}},
		Metadata:  md,
	}, nil
}
