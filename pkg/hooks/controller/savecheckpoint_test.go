package controller

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// TestSaveCheckpointSavesForReal: the SaveCheckpoint RPC, sent from a client found through the model
// dir while a training loop runs, makes the loop's checkpoint saver hook write a checkpoint at the
// current step (between its every-100-steps saves), which then restores; a failing save is an
// INTERNAL error naming the cause.
func TestSaveCheckpointSavesForReal(t *testing.T) {
	leakcheck.Check(t)
	quiet := slog.New(slog.DiscardHandler)
	tests := []struct {
		name     string
		failSave bool
	}{
		{name: "saves"},
		{name: "save fails", failSave: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			modelDir := filepath.Join(t.TempDir(), "model")
			var step atomic.Int64
			globalStep := func(context.Context) (int64, error) { return step.Load(), nil }
			write := func(ctx context.Context, prefix string, s int64) error {
				if tc.failSave {
					return errors.New("disk quota exceeded")
				}
				return checkpoint.WriteDense(prefix, []checkpoint.Tensor{{Name: "global_step", Int64: []int64{s}}})
			}
			saver, err := checkpoint.NewSaver(checkpoint.SaverOptions{Dir: modelDir, MaxToKeep: 3, Write: write, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			saverHook, err := checkpoint.NewSaverHook(checkpoint.HookOptions{Saver: saver, GlobalStep: globalStep, SaveSteps: 100, IgnoreSaveErrors: true, Log: quiet})
			if err != nil {
				t.Fatal(err)
			}
			ctrl, err := NewHook(Config{ModelDir: modelDir, Host: "127.0.0.1", ListenAddr: "127.0.0.1:0",
				Barrier: mustBarrier(t, 1), Saver: saverHook, GlobalStep: globalStep})
			if err != nil {
				t.Fatal(err)
			}
			var rpcErr error
			err = runhook.Run(context.Background(), []runhook.Hook{saverHook, ctrl}, func(_ context.Context, rc *runhook.RunContext) error {
				step.Add(1)
				if step.Load() != 3 {
					return nil
				}
				rc.RequestStop()
				c, err := DialModelDir(modelDir)
				if err != nil {
					return err
				}
				defer c.Close()
				_, rpcErr = c.SaveCheckpoint(rpcCtx(t), &pb.SaveCheckpointRequest{})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.failSave {
				st, _ := status.FromError(rpcErr)
				if st.Code() != codes.Internal || !strings.Contains(st.Message(), "disk quota exceeded") {
					t.Fatalf("SaveCheckpoint with a failing saver = %v, want INTERNAL naming the cause", rpcErr)
				}
				return
			}
			if rpcErr != nil {
				t.Fatalf("SaveCheckpoint = %v", rpcErr)
			}
			// The RPC saved step 3, so the end of the loop (also step 3) had nothing left to save.
			prefix, s, tensors, err := checkpoint.RestoreDense(modelDir, "", quiet)
			if err != nil || filepath.Base(prefix) != "model.ckpt-3" || s != 3 || tensors[0].Int64[0] != 3 {
				t.Fatalf("restore after SaveCheckpoint = %s, %d, %v, %v", prefix, s, tensors, err)
			}
		})
	}
}
