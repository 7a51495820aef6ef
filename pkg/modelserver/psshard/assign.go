package psshard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/eventtime"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
)

// The parameter sync signature, the reference's "hashtable_assign" (saved_model_exporters'
// build_hashtable_assign_inputs_outputs, which parameter_sync_client.cc's Convert feeds): for each
// table T of the shard,
//
//	inputs   T_id      DT_INT64, shape [n]: ids of this shard
//	         T_value   DT_FLOAT, shape [n, dim] (or [n*dim]): their new embeddings
//	outputs  T_result  DT_INT32, shape []: n, the ids assigned
//
// A request may carry any subset of the tables (those with updates). The assigned ids get entries
// when they had none. A request is checked whole before anything is assigned: an unknown table,
// an input without its pair, a malformed tensor or an id of another shard is INVALID_ARGUMENT and
// changes nothing.
const (
	AssignSignature    = "hashtable_assign"
	AssignIDSuffix     = "_id"
	AssignValueSuffix  = "_value"
	AssignResultSuffix = "_result"
)

// assignDef is the assign signature's definition for the shard's tables (dims by name).
func assignDef(dims map[string]int) *tfprotobuf.SignatureDef {
	def := &tfprotobuf.SignatureDef{
		MethodName: modelserver.PredictMethod,
		Inputs:     map[string]*tfprotobuf.TensorInfo{},
		Outputs:    map[string]*tfprotobuf.TensorInfo{},
	}
	for name, dim := range dims {
		def.Inputs[name+AssignIDSuffix] = tensors.Info(name+AssignIDSuffix, tfframework.DataType_DT_INT64, -1)
		def.Inputs[name+AssignValueSuffix] = tensors.Info(name+AssignValueSuffix, tfframework.DataType_DT_FLOAT, -1, int64(dim))
		def.Outputs[name+AssignResultSuffix] = tensors.Info(name+AssignResultSuffix, tfframework.DataType_DT_INT32)
	}
	return def
}

// AssignDelta is one table's part of an assign request.
type AssignDelta struct {
	Table string
	IDs   []int64
	// Embeddings are len(IDs) rows of the table's dimension.
	Embeddings []float32
	Dim        int
}

// AssignInputs is the assign signature's inputs for deltas (parameter_sync_client.cc's Convert of
// a PushRequest's delta_hash_tables).
func AssignInputs(deltas []AssignDelta) map[string]*tfframework.TensorProto {
	in := make(map[string]*tfframework.TensorProto, 2*len(deltas))
	for _, d := range deltas {
		n := int64(len(d.IDs))
		in[d.Table+AssignIDSuffix] = tensors.FromInt64s(d.IDs, n)
		in[d.Table+AssignValueSuffix] = tensors.FromFloat32s(d.Embeddings, n, int64(d.Dim))
	}
	return in
}

// AssignResult is the ids an assign answer says it assigned, over all tables; an answer without
// the result of a table of deltas, or with another count, is an error of kind Value.
func AssignResult(outputs map[string]*tfframework.TensorProto, deltas []AssignDelta) (int, error) {
	total := 0
	for _, d := range deltas {
		t, ok := outputs[d.Table+AssignResultSuffix]
		if !ok {
			return total, errkind.New(errkind.Value, "assign answer has no output %q", d.Table+AssignResultSuffix)
		}
		v := t.GetIntVal()
		if t.GetDtype() != tfframework.DataType_DT_INT32 || len(v) != 1 || int(v[0]) != len(d.IDs) {
			return total, errkind.New(errkind.Value, "assign answer %q is %v %v, want %d ids assigned", d.Table+AssignResultSuffix, t.GetDtype(), v, len(d.IDs))
		}
		total += len(d.IDs)
	}
	return total, nil
}

// parseAssign reads and checks an assign request's inputs against the shard's tables.
func (s *Servable) parseAssign(inputs map[string]*tfframework.TensorProto) ([]AssignDelta, error) {
	m := &s.shard.Manifest
	byTable := map[string]*AssignDelta{}
	for key, t := range inputs {
		var table string
		var isID bool
		switch {
		case strings.HasSuffix(key, AssignIDSuffix):
			table, isID = strings.TrimSuffix(key, AssignIDSuffix), true
		case strings.HasSuffix(key, AssignValueSuffix):
			table = strings.TrimSuffix(key, AssignValueSuffix)
		default:
			return nil, fmt.Errorf("%s: input %q is neither <table>%s nor <table>%s", AssignSignature, key, AssignIDSuffix, AssignValueSuffix)
		}
		tb, ok := s.shard.Tables[table]
		if !ok {
			return nil, fmt.Errorf("%s: input %q: ps_%d of %s has no table %q (tables: %s)", AssignSignature, key, m.Index, m.ModelName, table,
				strings.Join(slices.Sorted(maps.Keys(s.shard.Tables)), ", "))
		}
		d := byTable[table]
		if d == nil {
			d = &AssignDelta{Table: table, Dim: tb.Dim()}
			byTable[table] = d
		}
		var err error
		if isID {
			if shape := tensors.Shape(t); len(shape) != 1 {
				return nil, fmt.Errorf("%s: input %q of shape %v, want [n]", AssignSignature, key, shape)
			}
			d.IDs, err = tensors.Int64s(t)
		} else {
			d.Embeddings, err = tensors.Float32s(t)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: input %q: %v", AssignSignature, key, err)
		}
	}
	deltas := make([]AssignDelta, 0, len(byTable))
	for _, table := range slices.Sorted(maps.Keys(byTable)) {
		d := byTable[table]
		if _, ok := inputs[table+AssignIDSuffix]; !ok {
			return nil, fmt.Errorf("%s: input %q without %q", AssignSignature, table+AssignValueSuffix, table+AssignIDSuffix)
		}
		if _, ok := inputs[table+AssignValueSuffix]; !ok {
			return nil, fmt.Errorf("%s: input %q without %q", AssignSignature, table+AssignIDSuffix, table+AssignValueSuffix)
		}
		if len(d.Embeddings) != len(d.IDs)*d.Dim {
			return nil, fmt.Errorf("%s: table %q: %d values for %d ids of dimension %d, want %d", AssignSignature, table, len(d.Embeddings), len(d.IDs), d.Dim, len(d.IDs)*d.Dim)
		}
		if shape := tensors.Shape(inputs[table+AssignValueSuffix]); len(shape) == 2 && shape[1] != int64(d.Dim) {
			return nil, fmt.Errorf("%s: input %q of shape %v, the table's dimension is %d", AssignSignature, table+AssignValueSuffix, shape, d.Dim)
		}
		for _, id := range d.IDs {
			if sh := embedding.Shard(id, m.NumPS); sh != m.Index {
				return nil, fmt.Errorf("%s: table %q: id %d belongs to ps_%d of %d, not ps_%d", AssignSignature, table, id, sh, m.NumPS, m.Index)
			}
		}
		deltas = append(deltas, *d)
	}
	return deltas, nil
}

// assign runs the assign signature: every delta is checked, then assigned (each id atomically:
// a concurrent lookup reads its old or its new embedding, never a mix).
// A request carrying the newest event time its updates include (gRPC metadata, pkg/eventtime)
// advances the servable's NewestEventTime and is reported to its loader's observer.
func (s *Servable) assign(ctx context.Context, inputs map[string]*tfframework.TensorProto) (map[string]*tfframework.TensorProto, error) {
	// The answer names this load, also when the request is refused (a caller outside a gRPC
	// server has no header to set: the error is of no concern).
	_ = grpc.SetHeader(ctx, metadata.Pairs(ServableIDHeader, s.id))
	deltas, err := s.parseAssign(inputs)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	now := time.Now().Unix()
	out := make(map[string]*tfframework.TensorProto, len(deltas))
	for _, d := range deltas {
		if err := s.shard.Tables[d.Table].Assign(d.IDs, d.Embeddings, now); err != nil {
			return nil, fmt.Errorf("ps_%d: assign to table %q: %w", s.shard.Manifest.Index, d.Table, err)
		}
		out[d.Table+AssignResultSuffix] = &tfframework.TensorProto{Dtype: tfframework.DataType_DT_INT32, TensorShape: &tfframework.TensorShapeProto{}, IntVal: []int32{int32(len(d.IDs))}}
	}
	s.assigned.Add(int64(countIDs(deltas)))
	if ms := eventtime.Incoming(ctx); ms > 0 {
		s.newest.Observe(ms)
		if s.observe != nil {
			s.observe(s.model, ms)
		}
	}
	return out, nil
}

func countIDs(deltas []AssignDelta) int {
	n := 0
	for _, d := range deltas {
		n += len(d.IDs)
	}
	return n
}

// NewestEventTime is the newest event time (Unix milliseconds) that parameter sync's pushes to
// this servable said their updates include: its parameters include every event up to it. 0 when
// none said (no push yet, or a sender that does not tell).
func (s *Servable) NewestEventTime() int64 { return s.newest.Load() }

// Assigned is how many ids parameter sync assigned to the shard since it was loaded.
func (s *Servable) Assigned() int64 { return s.assigned.Load() }
