// Command tfs_client talks to a TensorFlow Serving server the way the reference's tfs_client.py
// does: model status, model metadata, a config reload, or a Predict call whose input comes from
// an Instance or ExampleBatch file (framed binary record, text proto or JSON). Responses are
// printed as Python's print(response) shows them.
//
// Exit status: 0 when the call succeeded, 1 when the server failed it (or load was answered with
// an error status), 2 for bad flags or input.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	tfsclientspec "github.com/monolith-go/monolith/gen/spec/agent_service/tfs_client"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/instance"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
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
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env agentconf.LookupEnv) int {
	var c cmdFlags
	if code, done := cli.Parse("tfs_client", "TensorFlow Serving client: model status, metadata, config reload and Predict.", &c, args, stdout, stderr, 2); done {
		return code
	}
	log := c.Logger(stderr, nil)
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	return cli.Exit("tfs_client", execute(ctx, c, stdout, log, env), stderr)
}

// target resolves the model name and the address to call: the flags, else what the agent conf
// says (tfs_client.main).
func target(c cmdFlags, env agentconf.LookupEnv) (model, addr string, err error) {
	model, addr = c.ModelName, c.Target
	if model == "" || addr == "" {
		if c.Conf == "" {
			return "", "", cli.Usage(errors.New("--conf is needed to choose the default --model_name and --target (or give both)"))
		}
		conf, err := agentconf.FromFile(c.Conf, agentconf.Options{Env: env})
		if err != nil {
			return "", "", cli.Usage(err)
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
				return "", "", cli.Usage(err)
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
				return "", "", cli.Usage(fmt.Errorf("%s: no TF Serving port for deploy type %q", c.Conf, deploy))
			}
			addr = fmt.Sprintf("%s:%d", agentconf.LocalIP(env), *port)
		}
	}
	// A comma-separated list is for the reference's profile command; the others use the first.
	addr, _, _ = strings.Cut(addr, ",")
	if addr == "" {
		return "", "", cli.Usage(errors.New("--target is empty"))
	}
	return model, addr, nil
}

func execute(ctx context.Context, c cmdFlags, stdout io.Writer, log *slog.Logger, env agentconf.LookupEnv) error {
	if c.BatchSize < 0 {
		return cli.Usage(fmt.Errorf("--batch_size %d is negative", c.BatchSize))
	}
	if c.Timeout <= 0 {
		return cli.Usage(fmt.Errorf("--timeout %v is not positive", c.Timeout))
	}
	model, addr, err := target(c, env)
	if err != nil {
		return err
	}
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
		name, tensor, err := predictInput(c)
		if err != nil {
			return err
		}
		req := &servingapis.PredictRequest{ModelSpec: spec, Inputs: map[string]*tfframework.TensorProto{name: tensor}}
		call = func(ctx context.Context, conn *grpc.ClientConn) (proto.Message, error) {
			return servingapis.NewPredictionServiceClient(conn).Predict(ctx, req)
		}
	default:
		return cli.Usage(fmt.Errorf("--cmd_type %q is not one of get, status, meta, load", c.CmdType))
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	// print(response): the text format and print's newline.
	if _, err := io.WriteString(stdout, pytext.Format(resp)+"\n"); err != nil {
		return err
	}
	return failedStatus(resp)
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

// predictInput builds the Predict input the way tfs_client.main does for --input_type: the
// input's name and its tensor.
func predictInput(c cmdFlags) (string, *tfframework.TensorProto, error) {
	if c.InputFile == "" {
		return "", nil, cli.Usage(errors.New("get needs --input_file (random inputs need the training-side data generator, not ported)"))
	}
	format, err := instance.ParseFormat(c.FileType)
	if err != nil {
		return "", nil, cli.Usage(err)
	}
	h := instance.Header{Lagrangex: c.LagrangexHeader, HasSortID: c.HasSortID, KafkaDump: c.KafkaDump, KafkaDumpPrefix: c.KafkaDumpPrefix}
	switch c.InputType {
	case "instance":
		var vals [][]byte
		if format == instance.FormatPB {
			vals, err = instance.ReadInstanceRecords(c.InputFile, c.BatchSize, h)
		} else {
			one, rerr := instance.ReadInstance(c.InputFile, format, h)
			if rerr != nil {
				return "", nil, cli.Usage(rerr)
			}
			vals, err = instance.RepeatInstance(one, c.BatchSize)
		}
		if err != nil {
			return "", nil, cli.Usage(err)
		}
		return "instances", instance.MakeTensorProto(vals), nil
	case "example_batch":
		eb, err := instance.ReadExampleBatch(c.InputFile, format, h)
		if err != nil {
			return "", nil, cli.Usage(err)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(eb)
		if err != nil {
			return "", nil, err
		}
		return "example_batch", instance.MakeTensorProto([][]byte{b}), nil
	default:
		eb, err := instance.ReadExampleBatch(c.InputFile, format, h)
		if err != nil {
			return "", nil, cli.Usage(err)
		}
		insts, err := instance.ExampleBatchToInstances(eb)
		if err != nil {
			return "", nil, cli.Usage(fmt.Errorf("%s: %w", c.InputFile, err))
		}
		vals, err := instance.Marshal(insts)
		if err != nil {
			return "", nil, err
		}
		return "instances", instance.MakeTensorProto(vals), nil
	}
}
