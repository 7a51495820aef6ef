package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"google.golang.org/grpc"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/tfs/profile"
)

// The profile command (tfs_client.py's --cmd_type=profile): the flags and inputs of a
// profile.Load, its run, and its summary as text and --profile_json.

// profileCommand runs --cmd_type=profile.
func profileCommand(ctx context.Context, c cmdFlags, model string, targets []string, stdout io.Writer, log *slog.Logger) error {
	switch {
	case c.ParallelNum < 1:
		return cli.Usage(fmt.Errorf("--parallel_num %d is not positive", c.ParallelNum))
	case !(c.ProfileDuration > 0) || math.IsInf(c.ProfileDuration, 0):
		return cli.Usage(fmt.Errorf("--profile_duration %g is not a positive number of seconds", c.ProfileDuration))
	case !(c.TargetQPS >= 0) || math.IsInf(c.TargetQPS, 0):
		return cli.Usage(fmt.Errorf("--target_qps %g is not a rate (0: closed loop)", c.TargetQPS))
	case c.ProfileDataNum < 1:
		return cli.Usage(fmt.Errorf("--profile_data_num %d is not positive", c.ProfileDataNum))
	case c.ProgressInterval <= 0:
		return cli.Usage(fmt.Errorf("--progress_interval %v is not positive", c.ProgressInterval))
	}
	seed := seedOf(c)
	in, err := buildInputs(c, c.ProfileDataNum, seed, log)
	if err != nil {
		return err
	}
	reqs := make([]*servingapis.PredictRequest, len(in.tensors))
	for i, t := range in.tensors {
		reqs[i] = predictRequest(c, model, in.name, t)
	}

	var conns []*grpc.ClientConn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	var clients []servingapis.PredictionServiceClient
	creds, err := transport(c)
	if err != nil {
		return err
	}
	for _, t := range targets {
		conn, err := grpc.NewClient(t, creds)
		if err != nil {
			return cli.Usage(fmt.Errorf("target %q: %w", t, err))
		}
		conns = append(conns, conn)
		clients = append(clients, servingapis.NewPredictionServiceClient(conn))
	}
	profile.Connect(ctx, conns, min(c.Timeout, 5*time.Second), log)

	var profileFile *os.File
	if c.CPUProfile != "" {
		if profileFile, err = os.Create(c.CPUProfile); err != nil {
			return cli.Usage(fmt.Errorf("--cpu_profile: %w", err))
		}
		defer profileFile.Close()
		if err := pprof.StartCPUProfile(profileFile); err != nil {
			return fmt.Errorf("--cpu_profile: %w", err)
		}
	}
	load := &profile.Load{Clients: clients, Requests: reqs, Workers: c.ParallelNum,
		Duration: time.Duration(c.ProfileDuration * float64(time.Second)), QPS: c.TargetQPS,
		Timeout: c.Timeout, Progress: c.ProgressInterval, Seed: seed, Log: log}
	log.Info("profile start", "model", model, "signature", c.SignatureName, "targets", strings.Join(targets, ","),
		"inputs", len(reqs), "input", in.name, "parallel_num", load.Workers, "target_qps", load.QPS,
		"duration", load.Duration.String(), "timeout", load.Timeout.String(), "seed", seed)
	res := load.Run(ctx)
	if profileFile != nil {
		pprof.StopCPUProfile()
		if err := profileFile.Close(); err != nil {
			return fmt.Errorf("--cpu_profile: %w", err)
		}
		log.Info("cpu profile written", "path", c.CPUProfile)
	}

	s := profile.NewSummary(load, res)
	s.Model, s.Signature, s.Targets = model, c.SignatureName, targets
	s.Input, s.InputSource, s.Inputs = in.name, in.source, len(in.tensors)
	if c.ProfileJSON != "" {
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if c.ProfileJSON == "-" {
			_, err = stdout.Write(data)
		} else {
			err = os.WriteFile(c.ProfileJSON, data, 0o644)
		}
		if err != nil {
			return fmt.Errorf("--profile_json: %w", err)
		}
	}
	if c.ProfileJSON != "-" {
		if err := s.WriteText(stdout); err != nil {
			return err
		}
	}
	if res.Sent == 0 {
		return fmt.Errorf("profile %s: no request was sent (interrupted)", model)
	}
	if failed := res.Failed(); failed > 0 {
		return fmt.Errorf("profile %s: %d of %d requests failed", model, failed, res.Sent)
	}
	return nil
}
