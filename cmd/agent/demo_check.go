package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
)

// demoPredictWait bounds the wait for the printed Predict to work before the banner.
const demoPredictWait = time.Minute

// predictScores sends the Predict that the printed tfs_client command sends: a random ExampleBatch
// of n examples of the features of the entry at entryDir (seed 1), to model on target; it returns
// the scores.
func predictScores(ctx context.Context, target, model, entryDir string, n int) ([]float32, error) {
	mf, err := instance.ReadModelFeatures(entryDir)
	if err != nil {
		return nil, err
	}
	eb, err := instance.RandomModelBatch(rand.New(rand.NewPCG(1, 0)), mf, n, time.Unix(1700000000, 0))
	if err != nil {
		return nil, err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sig := "serving_default"
	resp, err := servingapis.NewPredictionServiceClient(conn).Predict(ctx, &servingapis.PredictRequest{
		ModelSpec: modelconfig.ModelSpec(model, modelconfig.Version{}, &sig),
		Inputs:    map[string]*tfframework.TensorProto{"example_batch": tensors.FromStrings([][]byte{b})},
	})
	if err != nil {
		return nil, err
	}
	return tensors.Float32s(resp.GetOutputs()[entry.OutputScores])
}

// awaitPredict waits until the demo's printed Predict works (the entry found its PS replicas
// through the agent's HeartBeat), so that the banner's command works at once.
func awaitPredict(ctx context.Context, target, entryDir string) error {
	deadline := time.Now().Add(demoPredictWait)
	for {
		_, err := predictScores(ctx, target, demoModel+":entry", entryDir, demoPredictBatch)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the demo's Predict does not work within %v: %w", demoPredictWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
