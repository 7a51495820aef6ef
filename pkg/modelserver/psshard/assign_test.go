package psshard

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
)

// loadShard exports a briefly trained 2-PS job and loads its shard 0 as a servable.
func loadShard(t *testing.T) *Servable {
	t.Helper()
	ctx := tctx(t)
	j := exporttest.NewJob(t, 2, []int{})
	j.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "demo")
	res := j.Export(ctx, base, 2)
	shard, err := export.LoadPSShard(ctx, res.Dirs["ps_0"])
	if err != nil {
		t.Fatal(err)
	}
	return New(shard)
}

// lookup reads ids of table through the lookup signature.
func lookup(t *testing.T, s *Servable, table string, ids []int64) []float32 {
	t.Helper()
	out, err := s.Predict(context.Background(), Signature, Request(table, ids))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(ids)*exporttest.Dim)
	if err := LookupResult(out, len(ids), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func rows(n int, base float32) []float32 {
	v := make([]float32, n*exporttest.Dim)
	for i := range v {
		v[i] = base + float32(i)
	}
	return v
}

// TestAssign: the assign signature sets the embeddings of existing and new ids of several tables,
// answers the count per table, and the lookups read the new values; over gRPC as parameter sync
// sends it, too.
func TestAssign(t *testing.T) {
	leakcheck.Check(t)
	s := loadShard(t)
	if def := s.Signatures()[AssignSignature]; def == nil || len(def.GetInputs()) != 2*exporttest.ClickLog.NumSlots || len(def.GetOutputs()) != exporttest.ClickLog.NumSlots {
		t.Fatalf("assign signature %v", def)
	}
	tests := []struct {
		name   string
		deltas []AssignDelta
	}{
		{"one table, existing and new ids", []AssignDelta{{Table: "slot_1", IDs: []int64{0, 2, 1 << 40}, Embeddings: rows(3, 1), Dim: exporttest.Dim}}},
		{"two tables", []AssignDelta{
			{Table: "slot_2", IDs: []int64{4, -2}, Embeddings: rows(2, -5), Dim: exporttest.Dim},
			{Table: "slot_3", IDs: []int64{6}, Embeddings: rows(1, 0.5), Dim: exporttest.Dim},
		}},
		{"no ids", []AssignDelta{{Table: "slot_1", Dim: exporttest.Dim}}},
	}
	before := s.Assigned()
	total := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Predict(context.Background(), AssignSignature, AssignInputs(tc.deltas))
			if err != nil {
				t.Fatal(err)
			}
			n, err := AssignResult(out, tc.deltas)
			if err != nil {
				t.Fatal(err)
			}
			if n != countIDs(tc.deltas) {
				t.Errorf("assigned %d, want %d", n, countIDs(tc.deltas))
			}
			total += n
			for _, d := range tc.deltas {
				if got := lookup(t, s, d.Table, d.IDs); !slices.Equal(got, d.Embeddings) && len(d.IDs) > 0 {
					t.Errorf("%s: looked up %v, assigned %v", d.Table, got, d.Embeddings)
				}
			}
		})
	}
	if got := s.Assigned() - before; got != int64(total) {
		t.Errorf("Assigned grew by %d, want %d", got, total)
	}

	// Over gRPC, through the model server's Predict.
	ctx := tctx(t)
	j := exporttest.NewJob(t, 2, []int{})
	j.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "demo")
	j.Export(ctx, base, 2)
	client := serve(t, base, "demo", 2)
	deltas := []AssignDelta{{Table: "slot_1", IDs: []int64{1, 3, 5}, Embeddings: rows(3, 7), Dim: exporttest.Dim}}
	resp, err := client.Predict(ctx, &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: "demo:ps_1", SignatureName: AssignSignature},
		Inputs:    AssignInputs(deltas)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := AssignResult(resp.GetOutputs(), deltas); err != nil || n != 3 {
		t.Fatalf("AssignResult = %d, %v", n, err)
	}
	resp, err = client.Predict(ctx, &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: "demo:ps_1", SignatureName: Signature},
		Inputs:    Request("slot_1", []int64{1, 3, 5})})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 3*exporttest.Dim)
	if err := LookupResult(resp.GetOutputs(), 3, got); err != nil || !slices.Equal(got, deltas[0].Embeddings) {
		t.Errorf("served after assign %v (%v), want %v", got, err, deltas[0].Embeddings)
	}
}

// TestBadAssigns: an assign the signature refuses is INVALID_ARGUMENT naming what is wrong, and
// changes nothing, not even the tables of the request that were fine.
func TestBadAssigns(t *testing.T) {
	leakcheck.Check(t)
	s := loadShard(t)
	good := AssignInputs([]AssignDelta{{Table: "slot_1", IDs: []int64{2, 4}, Embeddings: rows(2, 100), Dim: exporttest.Dim}})
	with := func(extra map[string]*tfframework.TensorProto) map[string]*tfframework.TensorProto {
		in := map[string]*tfframework.TensorProto{}
		for k, v := range good {
			in[k] = v
		}
		for k, v := range extra {
			in[k] = v
		}
		return in
	}
	tests := []struct {
		name   string
		inputs map[string]*tfframework.TensorProto
		want   string
	}{
		{"id of the other shard", with(AssignInputs([]AssignDelta{{Table: "slot_2", IDs: []int64{2, 3}, Embeddings: rows(2, 0), Dim: exporttest.Dim}})), "id 3 belongs to ps_1 of 2"},
		{"unknown table", with(AssignInputs([]AssignDelta{{Table: "slot_9", IDs: []int64{2}, Embeddings: rows(1, 0), Dim: exporttest.Dim}})), `no table "slot_9"`},
		{"ids without values", with(map[string]*tfframework.TensorProto{"slot_2_id": tensors.FromInt64s([]int64{2}, 1)}), `"slot_2_id" without "slot_2_value"`},
		{"values without ids", with(map[string]*tfframework.TensorProto{"slot_2_value": tensors.FromFloat32s(rows(1, 0), 1, exporttest.Dim)}), `"slot_2_value" without "slot_2_id"`},
		{"other input", with(map[string]*tfframework.TensorProto{"slot_2": tensors.FromInt64s([]int64{2}, 1)}), `input "slot_2" is neither`},
		{"too few values", with(map[string]*tfframework.TensorProto{"slot_2_id": tensors.FromInt64s([]int64{2, 4}, 2), "slot_2_value": tensors.FromFloat32s(rows(1, 0), 1, exporttest.Dim)}), "4 values for 2 ids of dimension 4"},
		{"other dimension", with(map[string]*tfframework.TensorProto{"slot_2_id": tensors.FromInt64s([]int64{2, 4}, 2), "slot_2_value": tensors.FromFloat32s(rows(2, 0), 4, 2)}), "the table's dimension is 4"},
		{"float ids", with(map[string]*tfframework.TensorProto{"slot_2_id": tensors.FromFloat32s([]float32{2}, 1), "slot_2_value": tensors.FromFloat32s(rows(1, 0), 1, exporttest.Dim)}), "DT_FLOAT"},
		{"ids of rank 2", with(map[string]*tfframework.TensorProto{"slot_2_id": tensors.FromInt64s([]int64{2}, 1, 1), "slot_2_value": tensors.FromFloat32s(rows(1, 0), 1, exporttest.Dim)}), "want [n]"},
	}
	before := lookup(t, s, "slot_1", []int64{2, 4})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Predict(context.Background(), AssignSignature, tc.inputs)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want INVALID_ARGUMENT with %q", err, tc.want)
			}
			if got := lookup(t, s, "slot_1", []int64{2, 4}); !slices.Equal(got, before) {
				t.Errorf("a refused assign changed slot_1: %v, was %v", got, before)
			}
		})
	}
	if s.Assigned() != 0 {
		t.Errorf("Assigned = %d after refused assigns", s.Assigned())
	}
}

// TestAssignDuringLookups assigns while lookups run (run with -race): each looked-up row is a
// whole row of one assign, never a mix of two.
func TestAssignDuringLookups(t *testing.T) {
	leakcheck.Check(t)
	s := loadShard(t)
	ids := make([]int64, 200)
	for i := range ids {
		ids[i] = int64(2 * i) // shard 0 of 2
	}
	const rounds = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for r := 1; r <= rounds; r++ {
			v := make([]float32, len(ids)*exporttest.Dim)
			for i := range v {
				v[i] = float32(r)
			}
			if _, err := s.Predict(context.Background(), AssignSignature, AssignInputs([]AssignDelta{{Table: "slot_1", IDs: ids, Embeddings: v, Dim: exporttest.Dim}})); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for looking := true; looking; {
		select {
		case <-done:
			looking = false
		default:
		}
		got := lookup(t, s, "slot_1", ids)
		for k := 0; k < len(ids); k++ {
			row := got[k*exporttest.Dim : (k+1)*exporttest.Dim]
			for _, v := range row[1:] {
				if v != row[0] && row[0] >= 1 {
					t.Fatalf("id %d: row %v mixes two assigns", ids[k], row)
				}
			}
		}
	}
	final := lookup(t, s, "slot_1", ids)
	for _, v := range final {
		if v != rounds {
			t.Fatalf("after the last assign a value is %v, want %d", v, rounds)
		}
	}
}
