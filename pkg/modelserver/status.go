package modelserver

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// StatusOf is the gRPC status an error answers with: its own when it carries one (also wrapped),
// DEADLINE_EXCEEDED or CANCELLED for context errors, INVALID_ARGUMENT for errkind.Value (bad
// input), NOT_FOUND for errkind.NotFound, FAILED_PRECONDITION for errkind.Precondition, else
// INTERNAL. The message is the whole error's.
func StatusOf(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		s := se.GRPCStatus()
		if s.Message() == err.Error() {
			return s
		}
		return status.New(s.Code(), err.Error())
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	default:
		switch errkind.Of(err) {
		case errkind.Value, errkind.Type:
			code = codes.InvalidArgument
		case errkind.NotFound:
			code = codes.NotFound
		case errkind.Precondition:
			code = codes.FailedPrecondition
		}
	}
	return status.New(code, err.Error())
}
