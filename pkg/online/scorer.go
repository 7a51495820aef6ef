package online

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/trainer/metrics"
)

// scorer sends events to Predict on the served model's entry and on the frozen copy's.
type scorer struct {
	cc     *grpc.ClientConn
	client servingapis.PredictionServiceClient
}

func newScorer(addr string) (*scorer, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("online: the scorer: %w", err)
	}
	return &scorer{cc: cc, client: servingapis.NewPredictionServiceClient(cc)}, nil
}

func (s *scorer) close() { s.cc.Close() }

// scores are model's scores of evs.
func (s *scorer) scores(ctx context.Context, model string, evs []event) ([]float32, error) {
	raw := make([][]byte, len(evs))
	for i, e := range evs {
		raw[i] = e.data
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := s.client.Predict(ctx, &servingapis.PredictRequest{
		ModelSpec: &servingapis.ModelSpec{Name: model + ":entry"},
		Inputs:    map[string]*tfframework.TensorProto{entry.InputExamples: tensors.FromStrings(raw, int64(len(raw)))},
	})
	if err != nil {
		return nil, fmt.Errorf("online: Predict on %s:entry: %w", model, err)
	}
	out, err := tensors.Float32s(resp.GetOutputs()[entry.OutputScores])
	if err != nil || len(out) != len(evs) {
		return nil, fmt.Errorf("online: Predict on %s:entry: %d scores for %d examples (%v)", model, len(out), len(evs), err)
	}
	return out, nil
}

// auc is the served and the frozen model's AUC on evs.
func (s *scorer) auc(ctx context.Context, evs []event) (served, frozen float64, err error) {
	labels := make([]float32, len(evs))
	for i, e := range evs {
		labels[i] = e.label
	}
	for _, m := range []struct {
		name string
		out  *float64
	}{{ServedModel, &served}, {FrozenModel, &frozen}} {
		p, err := s.scores(ctx, m.name, evs)
		if err != nil {
			return 0, 0, err
		}
		a := metrics.NewAUC()
		if err := a.Update(labels, p); err != nil {
			return 0, 0, err
		}
		*m.out = a.Value()
	}
	return served, frozen, nil
}

// waitServed waits until both models answer Predict (their versions loaded, the entries' PS
// replicas found), within a minute.
func (s *scorer) waitServed(ctx context.Context, evs []event) error {
	if len(evs) == 0 {
		return fmt.Errorf("online: no event produced to score")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := s.auc(ctx, evs[:1])
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("online: the models are not served within a minute: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
