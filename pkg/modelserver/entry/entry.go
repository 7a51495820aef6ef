// Package entry serves an entry sub-graph ("<model>:entry") of an export (pkg/export's entry: the
// dnn model's configuration and dense parameters) with one signature:
//
//	signature "serving_default" (also "predict"), method tensorflow/serving/predict
//	  inputs   one of
//	           example_batch  DT_STRING: serialized ExampleBatches (tfs_client --input_type example_batch)
//	           instances      DT_STRING [n]: serialized Instances (tfs_client's instance inputs)
//	           examples       DT_STRING [n]: serialized Examples (the trainer's records)
//	  outputs  scores         DT_FLOAT [n]: each example's click probability
//
// An example gives the model's dense features as float lists (float_list or double_list; an
// Instance's float_value) and its sparse features as fid lists by name (fid_v2_list, or
// fid_v1_list converted to v2; an Instance's named features, and its bare v1 fids of the slots the
// model's features take). A missing dense feature, a fid of a slot no feature takes or an input the
// signature lacks is INVALID_ARGUMENT.
//
// A Predict runs the trainer's forward pass (pkg/trainer/dnn, the model export.Entry builds: the
// fused layout kernel pools the embeddings, the MLP scores), so the scores are the trainer's for
// the same examples and checkpoint; the embeddings come from the PS sub-graphs "<model>:ps_<i>",
// ids routed by floormod(id, num_ps), over gRPC (pkg/modelserver/psshard's lookup signature) to
// the replicas Replicas lists (AgentReplicas: the agent's HeartBeat, as Monolith's entry finds
// them). A replica failing is retried on the next one within the timeout of each attempt; a
// lookup that cannot be served is UNAVAILABLE (DEADLINE_EXCEEDED when the request's deadline
// passed).
package entry

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
)

// Signature is the entry signature's name besides modelserver.DefaultSignature.
const Signature = "predict"

// Defaults of Config.
const (
	DefaultTimeout = time.Second
	DefaultRetries = 2
)

// Config configures a Loader.
type Config struct {
	// Replicas finds the PS replicas.
	Replicas Replicas
	// Timeout bounds one lookup on one replica (default DefaultTimeout); Retries is how many
	// times a failed lookup is tried again on the next replica (default DefaultRetries; negative:
	// none).
	Timeout time.Duration
	Retries int
	// Metrics, when set, count the PS calls.
	Metrics *Metrics
	Logger  *slog.Logger
	// Credentials secure the connections to the PS replicas (pkg/tlsconfig); nil: plaintext.
	Credentials credentials.TransportCredentials
}

// Loader loads entry versions; its connections to PS replicas are shared by them. Close it after
// the model server stopped.
type Loader struct {
	cfg   Config
	conns *conns
}

// NewLoader returns a loader of entries finding PS replicas with cfg.Replicas.
func NewLoader(cfg Config) *Loader {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Retries == 0 {
		cfg.Retries = DefaultRetries
	}
	cfg.Retries = max(cfg.Retries, 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Loader{cfg: cfg, conns: newConns(cfg.Credentials)}
}

// Close closes the connections to PS replicas.
func (l *Loader) Close() { l.conns.close() }

// Load is the modelserver.Loader of entry sub-graphs: export.LoadEntry (a corrupt or inconsistent
// entry is an error of kind Value, a missing file of kind NotFound: neither is retried). The PS
// sub-graphs are "<model>:ps_<i>", <model> the entry's name before ":entry" (the agent's saved
// model name), else the export's model name.
func (l *Loader) Load(ctx context.Context, src modelserver.Source) (modelserver.Servable, error) {
	if l.cfg.Replicas == nil {
		return nil, modelserver.Permanent(errkind.New(errkind.Precondition,
			"entry %s: no way to find its PS replicas (the agent's address: --agent_addr or $PORT2)", src.Dir))
	}
	e, err := export.LoadEntry(src.Dir)
	if err != nil {
		return nil, err
	}
	model := e.Manifest.ModelName
	if i := strings.LastIndexByte(src.Model, ':'); i > 0 {
		model = src.Model[:i]
	}
	s := &Servable{
		entry: e,
		in:    newInputReader(e.Manifest.Model),
		store: &psStore{model: model, numPS: e.Manifest.NumPS, replicas: l.cfg.Replicas, conns: l.conns,
			timeout: l.cfg.Timeout, retries: l.cfg.Retries, metrics: l.cfg.Metrics},
		idle: make(chan *dnn.Model, runtime.GOMAXPROCS(0)*2),
	}
	m, err := e.NewModel(s.store)
	if err != nil {
		return nil, modelserver.Permanent(err)
	}
	s.idle <- m
	def := signature()
	s.sigs = map[string]*tfprotobuf.SignatureDef{modelserver.DefaultSignature: def, Signature: def}
	l.cfg.Logger.Info("entry loaded", "model", src.Model, "version", src.Version, "dir", src.Dir,
		"ps", model+":ps_0.."+strconv.Itoa(e.Manifest.NumPS-1), "global_step", e.Manifest.GlobalStep)
	return s, nil
}

func signature() *tfprotobuf.SignatureDef {
	def := &tfprotobuf.SignatureDef{MethodName: modelserver.PredictMethod, Inputs: map[string]*tfprotobuf.TensorInfo{},
		Outputs: map[string]*tfprotobuf.TensorInfo{OutputScores: tensors.Info(OutputScores, tfframework.DataType_DT_FLOAT, -1)}}
	for _, n := range inputNames {
		def.Inputs[n] = tensors.Info(n, tfframework.DataType_DT_STRING, -1)
	}
	return def
}

// Servable is a loaded entry.
type Servable struct {
	entry *export.Entry
	in    *inputReader
	store *psStore
	sigs  map[string]*tfprotobuf.SignatureDef
	// idle are models ready for a request (dnn.Model serves one batch at a time); requests
	// beyond them build more, and the surplus is dropped.
	idle chan *dnn.Model
}

// Entry is the loaded export entry.
func (s *Servable) Entry() *export.Entry { return s.entry }

// Signatures implements modelserver.Servable.
func (s *Servable) Signatures() map[string]*tfprotobuf.SignatureDef { return s.sigs }

// Predict implements modelserver.Servable: the scores of the inputs' examples.
func (s *Servable) Predict(ctx context.Context, _ string, inputs map[string]*tfframework.TensorProto) (map[string]*tfframework.TensorProto, error) {
	b, err := s.in.read(inputs)
	if err != nil {
		return nil, err
	}
	var m *dnn.Model
	select {
	case m = <-s.idle:
	default:
		if m, err = s.entry.NewModel(s.store); err != nil {
			return nil, err
		}
	}
	p, err := m.Predict(ctx, b)
	select {
	case s.idle <- m:
	default:
	}
	if err != nil {
		return nil, err
	}
	scores := make([]float32, len(p))
	for i, v := range p {
		scores[i] = float32(v)
	}
	return map[string]*tfframework.TensorProto{OutputScores: tensors.FromFloat32s(scores, int64(len(scores)))}, nil
}

// Close implements modelserver.Servable; the connections belong to the Loader.
func (s *Servable) Close() error { return nil }
