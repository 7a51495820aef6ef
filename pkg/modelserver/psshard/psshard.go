// Package psshard serves a PS sub-graph ("<model>:ps_<i>") of an export (pkg/export's PS shard:
// the embedding tables' entries with floormod(id, num_ps) == i) with one signature, lookup, which
// the entry calls for the ids of its batch:
//
//	signature "lookup" (also "serving_default"), method tensorflow/serving/predict
//	  inputs   table       DT_STRING, shape [] or [1]: the embedding table's name
//	           ids         DT_INT64, shape [n]: ids of this shard (floormod(id, num_ps) == i)
//	  outputs  embeddings  DT_FLOAT, shape [n, dim]: row k is ids[k]'s embedding, zeros for an id
//	                       the table has no entry for (the trainer's lookup does the same)
//
// An id of another shard, an unknown table or a malformed tensor is INVALID_ARGUMENT. Request and
// LookupResult build and read these tensors for a client.
//
// A second signature, hashtable_assign (assign.go), takes real-time parameter sync's pushes from
// the training PS of this shard (pkg/paramsync): new embeddings for ids, assigned to the tables
// while lookups go on.
package psshard

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/eventtime"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
)

// The lookup signature's names.
const (
	Signature       = "lookup"
	InputTable      = "table"
	InputIDs        = "ids"
	OutputEmbedding = "embeddings"
)

// Servable is a loaded PS shard.
type Servable struct {
	shard *export.PSShard
	sigs  map[string]*tfprotobuf.SignatureDef
	// assigned counts the ids parameter sync assigned.
	assigned atomic.Int64
	// newest is the newest event time parameter sync's pushes carried; observe, when set, hears
	// of each (with the model's name).
	newest  eventtime.Newest
	model   string
	observe Observer
	// id names this load of the shard: a parameter sync push's answer carries it (gRPC header
	// ServableIDHeader), so that the pusher sees a replica that was reloaded or restarted (it
	// lost the pushes since its export) and sends it everything.
	id string
}

// ServableIDHeader is the gRPC response header of an assign that names the load of the shard.
const ServableIDHeader = "monolith-servable-id"

// Observer hears of every parameter sync push that says the newest event time (Unix
// milliseconds) its updates include, with the name of the model ("<model>:ps_<i>") it went to:
// the model server's freshness metrics (modelserver.Metrics.Fresh).
type Observer func(model string, newestMs int64)

// NewLoader is Load with servables that report their pushes' event times to observe (nil: none).
func NewLoader(observe Observer) modelserver.Loader {
	return func(ctx context.Context, src modelserver.Source) (modelserver.Servable, error) {
		sv, err := Load(ctx, src)
		if err != nil {
			return nil, err
		}
		s := sv.(*Servable)
		s.model, s.observe = src.Model, observe
		return s, nil
	}
}

// Load is the modelserver.Loader of PS sub-graphs: it reads the version directory with
// export.LoadPSShard (a corrupt or inconsistent shard is an error of kind Value, a missing file of
// kind NotFound: neither is retried). A model named "<model>:ps_<i>" must hold shard i.
func Load(ctx context.Context, src modelserver.Source) (modelserver.Servable, error) {
	shard, err := export.LoadPSShard(ctx, src.Dir)
	if err != nil {
		return nil, err
	}
	if sub := src.Model[strings.LastIndexByte(src.Model, ':')+1:]; strings.HasPrefix(sub, "ps_") && sub != export.PSSubGraph(shard.Manifest.Index) {
		return nil, errkind.New(errkind.Value, "PS shard %s holds shard %d of %d, not the model's %s", src.Dir, shard.Manifest.Index, shard.Manifest.NumPS, sub)
	}
	return New(shard), nil
}

// New serves a loaded shard.
func New(shard *export.PSShard) *Servable {
	def := &tfprotobuf.SignatureDef{
		MethodName: modelserver.PredictMethod,
		Inputs: map[string]*tfprotobuf.TensorInfo{
			InputTable: tensors.Info(InputTable, tfframework.DataType_DT_STRING),
			InputIDs:   tensors.Info(InputIDs, tfframework.DataType_DT_INT64, -1),
		},
		Outputs: map[string]*tfprotobuf.TensorInfo{
			OutputEmbedding: tensors.Info(OutputEmbedding, tfframework.DataType_DT_FLOAT, -1, -1),
		},
	}
	dims := make(map[string]int, len(shard.Tables))
	for name, t := range shard.Tables {
		dims[name] = t.Dim()
	}
	return &Servable{shard: shard, sigs: map[string]*tfprotobuf.SignatureDef{Signature: def, modelserver.DefaultSignature: def, AssignSignature: assignDef(dims)},
		id: fmt.Sprintf("%016x", rand.Uint64())}
}

// Shard is the loaded shard (parameter sync assigns to its tables).
func (s *Servable) Shard() *export.PSShard { return s.shard }

// Signatures implements modelserver.Servable.
func (s *Servable) Signatures() map[string]*tfprotobuf.SignatureDef { return s.sigs }

// Predict implements modelserver.Servable: the lookup signature, or the assign signature.
func (s *Servable) Predict(ctx context.Context, signature string, inputs map[string]*tfframework.TensorProto) (map[string]*tfframework.TensorProto, error) {
	if signature == AssignSignature {
		return s.assign(ctx, inputs)
	}
	table, ids, err := ParseRequest(inputs)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	m := &s.shard.Manifest
	t, ok := s.shard.Tables[table]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "ps_%d of %s has no table %q (tables: %s)", m.Index, m.ModelName, table, strings.Join(slices.Sorted(maps.Keys(s.shard.Tables)), ", "))
	}
	for _, id := range ids {
		if sh := embedding.Shard(id, m.NumPS); sh != m.Index {
			return nil, status.Errorf(codes.InvalidArgument, "id %d belongs to ps_%d of %d, not ps_%d", id, sh, m.NumPS, m.Index)
		}
	}
	dim := t.Dim()
	out := make([]float32, len(ids)*dim)
	if _, err := t.Lookup(ids, out); err != nil {
		return nil, fmt.Errorf("ps_%d: lookup in table %q: %w", m.Index, table, err)
	}
	return map[string]*tfframework.TensorProto{OutputEmbedding: tensors.FromFloat32s(out, int64(len(ids)), int64(dim))}, nil
}

// Close implements modelserver.Servable; the tables go with the servable.
func (s *Servable) Close() error { return nil }

// Request is the lookup signature's inputs for ids of table.
func Request(table string, ids []int64) map[string]*tfframework.TensorProto {
	return map[string]*tfframework.TensorProto{
		InputTable: tensors.FromStrings([][]byte{[]byte(table)}),
		InputIDs:   tensors.FromInt64s(ids, int64(len(ids))),
	}
}

// ParseRequest reads the lookup signature's inputs; errors are of kind Value.
func ParseRequest(inputs map[string]*tfframework.TensorProto) (table string, ids []int64, err error) {
	tt, ok := inputs[InputTable]
	if !ok {
		return "", nil, errkind.New(errkind.Value, "lookup: no input %q", InputTable)
	}
	names, err := tensors.Strings(tt)
	if err != nil || len(names) != 1 {
		return "", nil, errkind.New(errkind.Value, "lookup: input %q must be one string (%d values, %v)", InputTable, len(names), err)
	}
	it, ok := inputs[InputIDs]
	if !ok {
		return "", nil, errkind.New(errkind.Value, "lookup: no input %q", InputIDs)
	}
	if ids, err = tensors.Int64s(it); err != nil {
		return "", nil, errkind.New(errkind.Value, "lookup: input %q: %v", InputIDs, err)
	}
	return string(names[0]), ids, nil
}

// LookupResult writes the embeddings of a lookup answer to out (len(ids)*dim floats, in the ids'
// order); an answer of another shape is an error of kind Value.
func LookupResult(outputs map[string]*tfframework.TensorProto, n int, out []float32) error {
	t, ok := outputs[OutputEmbedding]
	if !ok {
		return errkind.New(errkind.Value, "lookup answer has no output %q", OutputEmbedding)
	}
	shape := tensors.Shape(t)
	if n == 0 {
		return nil
	}
	if len(shape) != 2 || shape[0] != int64(n) || shape[0]*shape[1] != int64(len(out)) {
		return errkind.New(errkind.Value, "lookup answer of shape %v for %d ids of dimension %d", shape, n, len(out)/n)
	}
	if c := t.GetTensorContent(); len(c) == 4*len(out) && t.GetDtype() == tfframework.DataType_DT_FLOAT {
		tensors.DecodeFloat32s(c, out) // without the intermediate slice
		return nil
	}
	vals, err := tensors.Float32s(t)
	if err != nil {
		return errkind.New(errkind.Value, "lookup answer: %v", err)
	}
	copy(out, vals)
	return nil
}
