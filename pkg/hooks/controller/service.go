// Package controller is the training controller of the reference's hooks/server: a gRPC server
// (service Controller) that lets an operator stop and resume training through a barrier, trigger a
// checkpoint and read the global step; a run hook that serves it while training runs and writes
// its address to <model_dir>/controller_server_addr.txt; and a client that finds the server from
// that file.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// ServerAddrFilename is the file in the model directory that holds the controller's address
// (the reference's constants.SERVER_ADDR_FILENAME).
const ServerAddrFilename = "controller_server_addr.txt"

// Barrier is what the controller needs of a barrier; *barrier.Barrier implements it. Place must
// return barrier.ErrAlreadyPlaced (or an error wrapping it) when the barrier is placed already.
type Barrier interface {
	Place(ctx context.Context, action string) error
	Remove()
	BlockedIndices() []int
	Capacity() int
}

var _ Barrier = (*barrier.Barrier)(nil)

// Saver saves a checkpoint on demand (the reference's NoFirstSaveCheckpointSaverHook.trigger_save);
// it returns once the checkpoint is saved. The training's *checkpoint.SaverHook is one.
type Saver interface {
	TriggerSave(ctx context.Context) error
}

var _ Saver = (*checkpoint.SaverHook)(nil)

// GlobalStep reads the training's global step.
type GlobalStep func(ctx context.Context) (int64, error)

// Service implements the Controller gRPC service (the reference's ControllerServicer).
type Service struct {
	pb.UnimplementedControllerServer
	barrier    Barrier
	saver      Saver
	globalStep GlobalStep
}

// NewService returns the Controller service over a barrier, a checkpoint saver and a global step
// reader; all three are required.
func NewService(b Barrier, s Saver, step GlobalStep) (*Service, error) {
	if b == nil || s == nil || step == nil {
		return nil, errkind.New(errkind.Value, "controller: barrier, saver and global step are required (got barrier=%v saver=%v step=%v)", b != nil, s != nil, step != nil)
	}
	return &Service{barrier: b, saver: s, globalStep: step}, nil
}

// StopTraining places the barrier; ALREADY_EXISTS when it is placed already.
func (s *Service) StopTraining(ctx context.Context, _ *pb.StopTrainingRequest) (*pb.StopTrainingResponse, error) {
	if err := s.barrier.Place(ctx, ""); err != nil {
		if errors.Is(err, barrier.ErrAlreadyPlaced) {
			return nil, status.Error(codes.AlreadyExists, "Barrier is placed already.")
		}
		return nil, rpcError("place barrier", err)
	}
	return &pb.StopTrainingResponse{}, nil
}

// ResumeTraining removes the barrier.
func (s *Service) ResumeTraining(context.Context, *pb.ResumeTrainingRequest) (*pb.ResumeTrainingResponse, error) {
	s.barrier.Remove()
	return &pb.ResumeTrainingResponse{}, nil
}

// GetBlockStatus lists the blocked and the unblocked barrier slots, each ascending.
func (s *Service) GetBlockStatus(context.Context, *pb.GetBlockStatusRequest) (*pb.GetBlockStatusResponse, error) {
	blocked := s.barrier.BlockedIndices()
	isBlocked := make(map[int]bool, len(blocked))
	resp := &pb.GetBlockStatusResponse{BlockedIndices: make([]int32, 0, len(blocked))}
	for _, i := range blocked {
		isBlocked[i] = true
		resp.BlockedIndices = append(resp.BlockedIndices, int32(i))
	}
	for i := 0; i < s.barrier.Capacity(); i++ {
		if !isBlocked[i] {
			resp.UnblockedIndices = append(resp.UnblockedIndices, int32(i))
		}
	}
	return resp, nil
}

// SaveCheckpoint saves a checkpoint and returns when it is saved.
func (s *Service) SaveCheckpoint(ctx context.Context, _ *pb.SaveCheckpointRequest) (*pb.SaveCheckpointResponse, error) {
	if err := s.saver.TriggerSave(ctx); err != nil {
		return nil, rpcError("save checkpoint", err)
	}
	return &pb.SaveCheckpointResponse{}, nil
}

// GetTrainingStatus returns the global step.
func (s *Service) GetTrainingStatus(ctx context.Context, _ *pb.GetTrainingStatusRequest) (*pb.GetTrainingStatusResponse, error) {
	step, err := s.globalStep(ctx)
	if err != nil {
		return nil, rpcError("read global step", err)
	}
	return &pb.GetTrainingStatusResponse{GlobalStep: step}, nil
}

// rpcError maps a failure to a gRPC status: the context's code when the deadline passed or the
// call was cancelled, INTERNAL otherwise (the reference's unhandled exceptions are UNKNOWN).
func rpcError(what string, err error) error {
	slog.Error("controller: "+what+" failed", "err", err)
	if st := status.FromContextError(err); st.Code() != codes.Unknown {
		return st.Err()
	}
	return status.Error(codes.Internal, fmt.Sprintf("%s: %v", what, err))
}
