package psshard

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/embedding"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/export"
	"github.com/monolith-go/monolith/pkg/modelserver"
	"github.com/monolith-go/monolith/pkg/modelserver/exporttest"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serve serves the export's PS sub-graphs (as "<name>:ps_<i>") on loopback.
func serve(t *testing.T, base, name string, numPS int) servingapis.PredictionServiceClient {
	t.Helper()
	var configs []*servingconfig.ModelConfig
	for i := range numPS {
		configs = append(configs, exporttest.ModelConfig(t, name+":"+export.PSSubGraph(i), filepath.Join(base, export.PSSubGraph(i))))
	}
	s := exporttest.StartModelServer(t, modelserver.Loaders{modelserver.KindPS: Load}, configs...)
	return exporttest.PredictionClient(t, s.Addr())
}

// TestServesTheTrainerEmbeddings: a PS sub-graph answers lookups with the trainer's embeddings,
// bit for bit, zeros for ids the trainer never saw, over gRPC; also re-sharded at export.
func TestServesTheTrainerEmbeddings(t *testing.T) {
	for _, tc := range []struct {
		name             string
		trainPS, servePS int
	}{
		{"2 ps", 2, 2},
		{"2 ps exported as 3", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			ctx := tctx(t)
			j := exporttest.NewJob(t, tc.trainPS, []int{8})
			j.Train(ctx, 10)
			base := filepath.Join(t.TempDir(), "demo")
			j.Export(ctx, base, tc.servePS)
			client := serve(t, base, "demo", tc.servePS)
			for slot := 1; slot <= exporttest.ClickLog.NumSlots; slot++ {
				table := synth.SlotFeature(slot)
				byShard := map[int][]int64{}
				for id := uint64(1); id <= uint64(exporttest.ClickLog.Vocab)+3; id++ { // the last ids were never seen
					fid := int64(synth.FID(slot, id))
					byShard[embedding.Shard(fid, tc.servePS)] = append(byShard[embedding.Shard(fid, tc.servePS)], fid)
				}
				for shard, ids := range byShard {
					resp, err := client.Predict(ctx, &servingapis.PredictRequest{
						ModelSpec: &servingapis.ModelSpec{Name: "demo:" + export.PSSubGraph(shard), SignatureName: Signature},
						Inputs:    Request(table, ids)})
					if err != nil {
						t.Fatal(err)
					}
					got := make([]float32, len(ids)*exporttest.Dim)
					if err := LookupResult(resp.GetOutputs(), len(ids), got); err != nil {
						t.Fatal(err)
					}
					want := j.Lookup(ctx, table, ids)
					for k := range got {
						if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
							t.Fatalf("%s ps_%d: id %d value %d: served %v, trainer %v", table, shard, ids[k/exporttest.Dim], k%exporttest.Dim, got[k], want[k])
						}
					}
					last := got[len(got)-exporttest.Dim:]
					for _, v := range last {
						if v != 0 {
							t.Errorf("never-seen id %d: %v, want zeros", ids[len(ids)-1], last)
						}
					}
				}
			}
		})
	}
}

// TestBadLookups: requests the signature refuses are INVALID_ARGUMENT, naming what is wrong.
func TestBadLookups(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := exporttest.NewJob(t, 2, []int{})
	j.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "demo")
	j.Export(ctx, base, 2)
	client := serve(t, base, "demo", 2)
	spec := &servingapis.ModelSpec{Name: "demo:ps_0"}
	tests := []struct {
		name   string
		inputs map[string]*tfframework.TensorProto
		want   string
	}{
		{"id of the other shard", Request("slot_1", []int64{2, 3}), "id 3 belongs to ps_1 of 2"},
		{"unknown table", Request("slot_9", []int64{2}), `no table "slot_9"`},
		{"no ids", map[string]*tfframework.TensorProto{InputTable: tensors.FromStrings([][]byte{[]byte("slot_1")})}, `no input "ids"`},
		{"no table", map[string]*tfframework.TensorProto{InputIDs: tensors.FromInt64s([]int64{2}, 1)}, `no input "table"`},
		{"two tables", map[string]*tfframework.TensorProto{InputTable: tensors.FromStrings([][]byte{[]byte("a"), []byte("b")}, 2), InputIDs: tensors.FromInt64s([]int64{2}, 1)}, "one string"},
		{"float ids", map[string]*tfframework.TensorProto{InputTable: tensors.FromStrings([][]byte{[]byte("slot_1")}), InputIDs: tensors.FromFloat32s([]float32{2}, 1)}, "DT_FLOAT"},
	}
	for _, tc := range tests {
		_, err := client.Predict(ctx, &servingapis.PredictRequest{ModelSpec: spec, Inputs: tc.inputs})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT with %q", tc.name, err, tc.want)
		}
	}
	// An empty lookup is fine.
	resp, err := client.Predict(ctx, &servingapis.PredictRequest{ModelSpec: spec, Inputs: Request("slot_1", nil)})
	if err != nil || LookupResult(resp.GetOutputs(), 0, nil) != nil {
		t.Errorf("empty lookup: %v", err)
	}
}

// TestLoadErrors: a shard served under another shard's name, or a corrupt one, does not load; the
// error names the directory and is permanent (no retry).
func TestLoadErrors(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	j := exporttest.NewJob(t, 2, []int{})
	j.Train(ctx, 2)
	base := filepath.Join(t.TempDir(), "demo")
	res := j.Export(ctx, base, 2)
	dir0 := res.Dirs["ps_0"]

	_, err := Load(ctx, modelserver.Source{Model: "demo:ps_1", Kind: modelserver.KindPS, Version: res.Version, Dir: dir0})
	if err == nil || !strings.Contains(err.Error(), dir0) || !modelserver.IsPermanent(err) {
		t.Errorf("shard 0 loaded as ps_1: %v", err)
	}

	m, _ := export.ReadPSManifest(dir0)
	part := filepath.Join(dir0, m.Tables[0].Files[0].Path)
	if err := os.Truncate(part, 10); err != nil {
		t.Fatal(err)
	}
	_, err = Load(ctx, modelserver.Source{Model: "demo:ps_0", Kind: modelserver.KindPS, Version: res.Version, Dir: dir0})
	if err == nil || !strings.Contains(err.Error(), part) || errkind.Of(err) != errkind.Value || !modelserver.IsPermanent(err) {
		t.Errorf("truncated shard: %v", err)
	}
	if _, err := Load(ctx, modelserver.Source{Model: "demo:ps_0", Dir: filepath.Join(base, "ps_0", strconv.FormatInt(res.Version+1, 10))}); errkind.Of(err) != errkind.NotFound {
		t.Errorf("missing version: %v", err)
	}
}
