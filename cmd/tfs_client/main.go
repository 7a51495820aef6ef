// Command tfs_client talks to a TensorFlow Serving server the way the reference's tfs_client.py
// does: model status, model metadata, a config reload, or a Predict call whose input comes from
// an Instance or ExampleBatch file (framed binary record, text proto or JSON) or is a random
// ExampleBatch; responses are printed as Python's print(response) shows them. The profile
// command sends Predict load and reports latency percentiles, QPS and failures (profile.go,
// pkg/tfs/profile).
//
// Exit status: 0 when the call succeeded, 1 when the server failed it (or load was answered with
// an error status, or a profile request failed), 2 for bad flags or input.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	tfsclientspec "github.com/monolith-go/monolith/gen/spec/agent_service/tfs_client"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/modelserver/tensors"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
)

// cmdFlags is the command line: the flags the specs declare.
type cmdFlags struct {
	cli.Common
	utilsspec.ConfFlags
	tfsclientspec.TFSClientFlags
}

// metadataFields are the fields tfs_client.py's meta command asks for.
var metadataFields = []string{"base_path", "num_versions", "signature_name"}

func main() {
	// An interrupt ends a profile run early (with its summary); a second one ends the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// now is the clock of the random inputs' request times (a variable for tests).
var now = time.Now

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env agentconf.LookupEnv) int {
	var c cmdFlags
	if code, done := cli.Parse("tfs_client", "TensorFlow Serving client: model status, metadata, config reload, Predict, and Predict load with latency percentiles (--cmd_type=profile).", &c, args, stdout, stderr, 2); done {
		return code
	}
	log := c.Logger(stderr, nil)
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	return cli.Exit("tfs_client", execute(ctx, c, stdout, log, env), stderr)
}

// target resolves the model name and the addresses to call: the flags, else what the agent conf
// says (tfs_client.main). profile uses every address, the other commands the first.
func target(c cmdFlags, env agentconf.LookupEnv) (model string, addrs []string, err error) {
	model, addr := c.ModelName, c.Target
	if model == "" || addr == "" {
		if c.Conf == "" {
			return "", nil, cli.Usage(errors.New("--conf is needed to choose the default --model_name and --target (or give both)"))
		}
		conf, err := agentconf.FromFile(c.Conf, agentconf.Options{Env: env})
		if err != nil {
			return "", nil, cli.Usage(err)
		}
		deploy := ""
		if conf.DeployType != nil {
			deploy = strings.ToLower(*conf.DeployType)
		}
		var port *int
		name := agentconf.ServerEntry
		switch deploy {
		case agentconf.ServerPS:
			shard, err := conf.ShardID()
			if err != nil {
				return "", nil, cli.Usage(err)
			}
			name, port = fmt.Sprintf("ps_%d", shard), conf.TFSPSPort
		case agentconf.ServerDense:
			name, port = agentconf.ServerDense, conf.TFSDensePort
		default:
			port = conf.TFSEntryPort
		}
		if model == "" {
			model = name
		}
		if addr == "" {
			if port == nil {
				return "", nil, cli.Usage(fmt.Errorf("%s: no TF Serving port for deploy type %q", c.Conf, deploy))
			}
			addr = fmt.Sprintf("%s:%d", agentconf.LocalIP(env), *port)
		}
	}
	addrs = strings.Split(addr, ",")
	for _, a := range addrs {
		if strings.TrimSpace(a) == "" {
			return "", nil, cli.Usage(fmt.Errorf("--target %q has an empty address", addr))
		}
	}
	return model, addrs, nil
}

func execute(ctx context.Context, c cmdFlags, stdout io.Writer, log *slog.Logger, env agentconf.LookupEnv) error {
	if c.BatchSize < 0 {
		return cli.Usage(fmt.Errorf("--batch_size %d is negative", c.BatchSize))
	}
	if c.Timeout <= 0 {
		return cli.Usage(fmt.Errorf("--timeout %v is not positive", c.Timeout))
	}
	model, addrs, err := target(c, env)
	if err != nil {
		return err
	}
	if c.CmdType == "profile" {
		return profileCommand(ctx, c, model, addrs, stdout, log)
	}
	addr := addrs[0]
	sig := c.SignatureName
	spec := modelconfig.ModelSpec(model, modelconfig.Version{}, &sig)

	// Read the input before dialling, so bad input fails fast with exit status 2.
	var call func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error)
	switch c.CmdType {
	case "status":
		call = func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			return servingapis.NewModelServiceClient(conn).GetModelStatus(ctx, &servingapis.GetModelStatusRequest{ModelSpec: spec})
		}
	case "meta":
		call = func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			return servingapis.NewPredictionServiceClient(conn).GetModelMetadata(ctx, &servingapis.GetModelMetadataRequest{ModelSpec: spec, MetadataField: metadataFields})
		}
	case "load":
		cfg, err := readModelServerConfig(c.InputFile)
		if err != nil {
			return err
		}
		call = func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			resp, err := servingapis.NewModelServiceClient(conn).HandleReloadConfigRequest(ctx, &servingapis.ReloadConfigRequest{Config: cfg})
			if err != nil {
				return nil, err
			}
			if code := resp.GetStatus().GetErrorCode(); code != 0 {
				return nil, fmt.Errorf("reload refused: %v: %s", code, resp.GetStatus().GetErrorMessage())
			}
			log.Info("load done", "config", c.InputFile, "models", len(cfg.GetModelConfigList().GetConfig()))
			return resp, nil
		}
	case "get":
		in, err := buildInputs(c, 1, seedOf(c), log)
		if err != nil {
			return err
		}
		req := predictRequest(c, model, in.name, in.tensors[0])
		call = func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			return servingapis.NewPredictionServiceClient(conn).Predict(ctx, req)
		}
	default:
		return cli.Usage(fmt.Errorf("--cmd_type %q is not one of get, status, meta, load, profile", c.CmdType))
	}

	creds, err := transport(c)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		return cli.Usage(fmt.Errorf("target %q: %w", addr, err))
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	resp, err := call(ctx, conn)
	if err != nil {
		return fmt.Errorf("%s %s at %s: %w", c.CmdType, model, addr, err)
	}
	if p, ok := resp.(*servingapis.PredictResponse); ok && c.PrintOutputs {
		return printOutputs(stdout, p)
	}
	// print(response): the text format and print's newline.
	if _, err := io.WriteString(stdout, pytext.Format(resp)+"\n"); err != nil {
		return err
	}
	return failedStatus(resp)
}

// printOutputs writes each output tensor's values as "<name> <value>" lines (--print_outputs),
// outputs by name, so a script can compare scores without decoding tensor_content.
func printOutputs(w io.Writer, resp *servingapis.PredictResponse) error {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(resp.GetOutputs())) {
		t := resp.GetOutputs()[name]
		var vals []string
		switch t.GetDtype() {
		case tfframework.DataType_DT_FLOAT:
			fs, err := tensors.Float32s(t)
			if err != nil {
				return fmt.Errorf("output %s: %w", name, err)
			}
			for _, f := range fs {
				vals = append(vals, strconv.FormatFloat(float64(f), 'g', -1, 32))
			}
		case tfframework.DataType_DT_INT64:
			is, err := tensors.Int64s(t)
			if err != nil {
				return fmt.Errorf("output %s: %w", name, err)
			}
			for _, i := range is {
				vals = append(vals, strconv.FormatInt(i, 10))
			}
		case tfframework.DataType_DT_STRING:
			ss, err := tensors.Strings(t)
			if err != nil {
				return fmt.Errorf("output %s: %w", name, err)
			}
			for _, s := range ss {
				vals = append(vals, strconv.Quote(string(s)))
			}
		default:
			return fmt.Errorf("output %s: --print_outputs prints DT_FLOAT, DT_INT64 and DT_STRING tensors, not %v", name, t.GetDtype())
		}
		for _, v := range vals {
			b.WriteString(name + " " + v + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// failedStatus is an error when a model status answer reports a failed version (an error code
// such as NOT_FOUND): the answer is printed, and the exit status says it is not a success.
func failedStatus(resp proto.Message) error {
	st, ok := resp.(*servingapis.GetModelStatusResponse)
	if !ok {
		return nil
	}
	var failed []string
	for _, v := range st.GetModelVersionStatus() {
		if code := v.GetStatus().GetErrorCode(); code != 0 {
			msg := fmt.Sprintf("version %d: %v", v.GetVersion(), code)
			if m := v.GetStatus().GetErrorMessage(); m != "" {
				msg += ": " + m
			}
			failed = append(failed, msg)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("status: %s", strings.Join(failed, "; "))
}

func readModelServerConfig(path string) (*servingconfig.ModelServerConfig, error) {
	if path == "" {
		return nil, cli.Usage(errors.New("load needs --input_file, a ModelServerConfig text proto"))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.Usage(err)
	}
	cfg := &servingconfig.ModelServerConfig{}
	if err := prototext.Unmarshal(data, cfg); err != nil {
		return nil, cli.Usage(fmt.Errorf("parse %s as tensorflow.serving.ModelServerConfig: %w", path, err))
	}
	return cfg, nil
}

// predictRequest is the Predict request of tfs_client.main: the model spec and one input.
func predictRequest(c cmdFlags, model, name string, tensor *tfframework.TensorProto) *servingapis.PredictRequest {
	sig := c.SignatureName
	return &servingapis.PredictRequest{
		ModelSpec: modelconfig.ModelSpec(model, modelconfig.Version{}, &sig),
		Inputs:    map[string]*tfframework.TensorProto{name: tensor},
	}
}

// inputs are Predict inputs: their name ("instances" or "example_batch"), the tensors, and where
// they come from.
type inputs struct {
	name    string
	tensors []*tfframework.TensorProto
	source  string
}

// buildInputs makes the Predict inputs of get (n = 1) or profile: the one of --input_file, else
// (profile) one per file of --profile_data_dir, n at most, else n random ExampleBatches.
func buildInputs(c cmdFlags, n int, seed uint64, log *slog.Logger) (inputs, error) {
	if c.InputFile != "" {
		name, tensor, err := fileInput(c, c.InputFile)
		return inputs{name: name, tensors: []*tfframework.TensorProto{tensor}, source: c.InputFile}, err
	}
	if c.CmdType == "profile" && c.ProfileDataDir != "" {
		return dirInputs(c, n)
	}
	in, err := randomInputs(c, n, seed)
	if err != nil {
		return inputs{}, err
	}
	if c.ModelSpec != "" {
		log.Info("random inputs", "batches", n, "batch_size", c.BatchSize, "model_spec", c.ModelSpec, "seed", seed)
	} else {
		log.Info("random inputs", "batches", n, "batch_size", c.BatchSize, "slots", c.Slots, "feature_list", c.FeatureList, "seed", seed)
	}
	return in, nil
}

// seedOf is --seed, else a new random seed.
func seedOf(c cmdFlags) uint64 {
	if c.Seed != nil {
		return uint64(*c.Seed)
	}
	return rand.Uint64()
}

// dirInputs reads the first n regular files of --profile_data_dir, in name order.
func dirInputs(c cmdFlags, n int) (inputs, error) {
	entries, err := os.ReadDir(c.ProfileDataDir)
	if err != nil {
		return inputs{}, cli.Usage(fmt.Errorf("--profile_data_dir: %w", err))
	}
	in := inputs{source: c.ProfileDataDir}
	for _, e := range entries {
		if len(in.tensors) == n {
			break
		}
		if !e.Type().IsRegular() {
			continue
		}
		name, tensor, err := fileInput(c, filepath.Join(c.ProfileDataDir, e.Name()))
		if err != nil {
			return inputs{}, err
		}
		in.name = name
		in.tensors = append(in.tensors, tensor)
	}
	if len(in.tensors) == 0 {
		return inputs{}, cli.Usage(fmt.Errorf("--profile_data_dir %s: no files", c.ProfileDataDir))
	}
	return in, nil
}

// randomInputs makes n random ExampleBatches of --batch_size examples the way gen_random_file
// does (sparse features of --slots, named by --feature_list), sent as --input_type says: the
// batch itself for example_batch, its examples as Instances otherwise.
func randomInputs(c cmdFlags, n int, seed uint64) (inputs, error) {
	gen, err := batchGenerator(c)
	if err != nil {
		return inputs{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	in := inputs{source: fmt.Sprintf("random, seed %d", seed)}
	for range n {
		eb, err := gen(rng)
		if err != nil {
			return inputs{}, cli.Usage(err)
		}
		name, tensor, err := batchInput(c.InputType, eb)
		if err != nil {
			return inputs{}, err
		}
		in.name = name
		in.tensors = append(in.tensors, tensor)
	}
	return in, nil
}

// batchInput is the Predict input of an ExampleBatch for --input_type: the batch itself for
// example_batch, its examples as Instances otherwise.
func batchInput(inputType string, eb *examplepb.ExampleBatch) (string, *tfframework.TensorProto, error) {
	if inputType == "example_batch" {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
		if err != nil {
			return "", nil, err
		}
		return "example_batch", instance.MakeTensorProto([][]byte{b}), nil
	}
	insts, err := instance.ExampleBatchToInstances(eb)
	if err != nil {
		return "", nil, err
	}
	vals, err := instance.Marshal(insts)
	if err != nil {
		return "", nil, err
	}
	return "instances", instance.MakeTensorProto(vals), nil
}

// batchGenerator makes the random ExampleBatches: with --model_spec, batches of the exported
// model's features (which its entry scores); else gen_random_file's (--slots, --feature_list).
func batchGenerator(c cmdFlags) (func(*rand.Rand) (*examplepb.ExampleBatch, error), error) {
	if c.ModelSpec != "" {
		if c.FeatureList != "" {
			return nil, cli.Usage(errors.New("--model_spec and --feature_list: give one (the model spec names the features)"))
		}
		mf, err := instance.ReadModelFeatures(c.ModelSpec)
		if err != nil {
			return nil, cli.Usage(fmt.Errorf("--model_spec: %w", err))
		}
		t := now()
		return func(rng *rand.Rand) (*examplepb.ExampleBatch, error) {
			return instance.RandomModelBatch(rng, mf, c.BatchSize, t)
		}, nil
	}
	var slots []int
	for _, s := range strings.Split(c.Slots, ",") {
		slot, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, cli.Usage(fmt.Errorf("--slots %q: %q is not a slot number", c.Slots, s))
		}
		slots = append(slots, slot)
	}
	var fl *instance.FeatureList
	if c.FeatureList != "" {
		var err error
		if fl, err = instance.ReadFeatureList(c.FeatureList); err != nil {
			return nil, cli.Usage(err)
		}
	}
	features, err := instance.ProfileFeatures(slots, fl)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--slots: %w", err))
	}
	opts := instance.RandomBatchOptions{Features: features, Extra: instance.ProfileExtraFeatures, BatchSize: c.BatchSize,
		DropRate: instance.ProfileDropRate, Actions: instance.ProfileActions, Now: now()}
	return func(rng *rand.Rand) (*examplepb.ExampleBatch, error) { return instance.RandomExampleBatch(rng, opts) }, nil
}

// fileInput builds the Predict input of a file the way tfs_client.main does for --input_type:
// the input's name and its tensor.
func fileInput(c cmdFlags, path string) (string, *tfframework.TensorProto, error) {
	format, err := instance.ParseFormat(c.FileType)
	if err != nil {
		return "", nil, cli.Usage(err)
	}
	h := instance.Header{Lagrangex: c.LagrangexHeader, HasSortID: c.HasSortID, KafkaDump: c.KafkaDump, KafkaDumpPrefix: c.KafkaDumpPrefix}
	switch c.InputType {
	case "instance":
		var vals [][]byte
		if format == instance.FormatPB {
			vals, err = instance.ReadInstanceRecords(path, c.BatchSize, h)
		} else {
			one, rerr := instance.ReadInstance(path, format, h)
			if rerr != nil {
				return "", nil, cli.Usage(rerr)
			}
			vals, err = instance.RepeatInstance(one, c.BatchSize)
		}
		if err != nil {
			return "", nil, cli.Usage(err)
		}
		return "instances", instance.MakeTensorProto(vals), nil
	default:
		eb, err := instance.ReadExampleBatch(path, format, h)
		if err != nil {
			return "", nil, cli.Usage(err)
		}
		name, tensor, err := batchInput(c.InputType, eb)
		if err != nil {
			return "", nil, cli.Usage(fmt.Errorf("%s: %w", path, err))
		}
		return name, tensor, nil
	}
}

// transport is the connection's credentials: TLS from --tls_*, else plaintext.
func transport(c cmdFlags) (grpc.DialOption, error) {
	opt, err := tlsconfig.Files{Cert: c.TlsCert, Key: c.TlsKey, CA: c.TlsCa}.DialOption()
	if err != nil {
		return nil, cli.Usage(err)
	}
	return opt, nil
}
