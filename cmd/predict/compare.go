package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	predictspec "github.com/monolith-go/monolith/gen/spec/go/predict"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/entry"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
)

// CompareBatch is the most examples one Predict of --compare_target carries: a served model's
// batch (the agent's TF Serving max_batch_size), so that a batching TF Serving takes it.
const CompareBatch = 1024

// compareMessageBytes bounds the Predict messages of --compare_target (gRPC's default of 4 MiB may
// be short of an ExampleBatch of CompareBatch examples with many features).
const compareMessageBytes = 64 << 20

// compareFlags checks the flags of --compare_target and returns the dial option of its
// credentials (nil without --compare_target); its errors are usage errors.
func compareFlags(f predictspec.PredictFlags) (grpc.DialOption, error) {
	tls := tlsconfig.Files{CA: f.TLSCA, Cert: f.TLSCert, Key: f.TLSKey, Flag: "--tls"}
	if f.CompareTarget == "" {
		if tls.Enabled() || f.ModelName != "" {
			return nil, cli.Usage(errors.New("--model_name, --tls_ca, --tls_cert and --tls_key are for --compare_target: give it"))
		}
		return nil, nil
	}
	switch host, port, err := net.SplitHostPort(f.CompareTarget); {
	case err != nil || host == "" || port == "":
		return nil, cli.Usage(fmt.Errorf("--compare_target: %q is not host:port", f.CompareTarget))
	case math.IsNaN(f.Tolerance) || f.Tolerance < 0:
		return nil, cli.Usage(fmt.Errorf("--tolerance %g: not a number >= 0", f.Tolerance))
	case f.CompareTimeout <= 0:
		return nil, cli.Usage(fmt.Errorf("--compare_timeout %v is not positive", f.CompareTimeout))
	}
	opt, err := tls.DialOption()
	if err != nil {
		return nil, cli.Usage(err) // a missing or bad PEM file
	}
	return opt, nil
}

// comparison is how the served scores of a batch differ from the local ones.
type comparison struct {
	n             int     // examples compared
	maxDiff       float64 // the most |served - local| (+Inf where one is NaN and the other not)
	worst         int     // the example of maxDiff (the first of them)
	served, local float64 // its scores
}

// compare is the comparison of served with local, example by example.
func compare(served []float32, local []float64) comparison {
	c := comparison{n: len(local)}
	for i, l := range local {
		s := float64(served[i])
		d := math.Abs(s - l)
		switch {
		case math.IsNaN(s) && math.IsNaN(l):
			d = 0
		case math.IsNaN(d):
			d = math.Inf(1)
		}
		if i == 0 || d > c.maxDiff {
			c.maxDiff, c.worst, c.served, c.local = d, i, s, l
		}
	}
	return c
}

// line is the comparison's summary, one line of key=value fields.
func (c comparison) line(tolerance float64, model, target string) string {
	g := func(v float64, bits int) string { return strconv.FormatFloat(v, 'g', -1, bits) }
	return fmt.Sprintf("compared=%d max_abs_diff=%s worst_example=%d served=%s local=%s tolerance=%s within_tolerance=%t model=%s target=%s\n",
		c.n, g(c.maxDiff, 64), c.worst, g(c.served, 32), g(c.local, 64), g(tolerance, 64), c.maxDiff <= tolerance, model, target)
}

// compareServed sends eb's examples to Predict on model:entry at f.CompareTarget, in ExampleBatches
// of at most CompareBatch examples, each call under f.CompareTimeout, and writes the comparison of
// its scores with local (eb's scores here) to stdout. A difference past f.Tolerance is an error
// (exit 1), after the line.
func compareServed(ctx context.Context, f predictspec.PredictFlags, creds grpc.DialOption, model string, eb *examplepb.ExampleBatch, local []float64, stdout io.Writer) error {
	conn, err := grpc.NewClient(f.CompareTarget, creds,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(compareMessageBytes), grpc.MaxCallSendMsgSize(compareMessageBytes)))
	if err != nil {
		return cli.Usage(fmt.Errorf("--compare_target %s: %w", f.CompareTarget, err))
	}
	defer conn.Close()
	client := servingapis.NewPredictionServiceClient(conn)
	name := model + ":entry"
	served := make([]float32, 0, len(local))
	for lo := 0; lo < len(local); lo += CompareBatch {
		if ctx.Err() != nil {
			return stopped(ctx)
		}
		hi := min(lo+CompareBatch, len(local))
		scores, err := predictServed(ctx, client, name, f, sliceBatch(eb, lo, hi))
		if err != nil {
			if ctx.Err() != nil {
				return stopped(ctx)
			}
			return cli.OneLine(fmt.Errorf("--compare_target %s: Predict on %s, examples %d to %d: %w", f.CompareTarget, name, lo, hi-1, err))
		}
		served = append(served, scores...)
	}
	c := compare(served, local)
	if _, err := io.WriteString(stdout, c.line(f.Tolerance, name, f.CompareTarget)); err != nil {
		return err
	}
	if c.maxDiff > f.Tolerance {
		return fmt.Errorf("the served scores of %s at %s are not the export's: example %d: served %s, here %s, |diff| %s > --tolerance %s",
			name, f.CompareTarget, c.worst, strconv.FormatFloat(c.served, 'g', -1, 32), strconv.FormatFloat(c.local, 'g', -1, 64),
			strconv.FormatFloat(c.maxDiff, 'g', -1, 64), strconv.FormatFloat(f.Tolerance, 'g', -1, 64))
	}
	return nil
}

// predictServed is the served scores of eb: one Predict of it as the example_batch input (what
// tfs_client --input_type=example_batch sends), under f.CompareTimeout.
func predictServed(ctx context.Context, client servingapis.PredictionServiceClient, name string, f predictspec.PredictFlags, eb *examplepb.ExampleBatch) ([]float32, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.CompareTimeout)
	defer cancel()
	sig := "serving_default"
	resp, err := client.Predict(ctx, &servingapis.PredictRequest{
		ModelSpec: modelconfig.ModelSpec(name, modelconfig.Version{}, &sig),
		Inputs:    map[string]*tfframework.TensorProto{entry.InputExampleBatch: tensors.FromStrings([][]byte{b})},
	})
	if err != nil {
		return nil, err
	}
	out, ok := resp.GetOutputs()[entry.OutputScores]
	if !ok {
		return nil, fmt.Errorf("the response has no output %q", entry.OutputScores)
	}
	scores, err := tensors.Float32s(out)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", entry.OutputScores, err)
	}
	if n := int(eb.GetBatchSize()); len(scores) != n {
		return nil, fmt.Errorf("%d scores for %d examples", len(scores), n)
	}
	return scores, nil
}

// sliceBatch is examples lo to hi-1 of eb as an ExampleBatch: those features of each INDIVIDUAL
// list, each SHARED list whole (its feature 0 is every example's).
func sliceBatch(eb *examplepb.ExampleBatch, lo, hi int) *examplepb.ExampleBatch {
	if lo == 0 && hi == int(eb.GetBatchSize()) {
		return eb
	}
	out := &examplepb.ExampleBatch{BatchSize: int32(hi - lo), DataSourceKey: eb.GetDataSourceKey()}
	for _, l := range eb.GetNamedFeatureList() {
		feats := l.GetFeature()
		if l.GetType() != examplepb.FeatureListType_SHARED {
			feats = feats[lo:hi]
		}
		out.NamedFeatureList = append(out.NamedFeatureList, &examplepb.NamedFeatureList{Id: l.GetId(), Name: l.GetName(), Feature: feats, Type: l.GetType()})
	}
	return out
}
