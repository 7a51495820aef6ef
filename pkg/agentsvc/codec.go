package agentsvc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec wrapped below
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
)

// preEncoded is a response already in wire form (a cached answer).
type preEncoded []byte

// codec is gRPC's proto codec, except that a preEncoded response is sent as it is.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2("proto")} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(preEncoded); ok {
		// A SliceBuffer is never recycled, so the cached bytes are only read.
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (c codec) Name() string { return c.proto.Name() }

// serviceDesc is the generated AgentService description with handlers that answer cached responses
// in wire form. Interceptors see the request messages as usual and, for a cached answer, a
// preEncoded response.
func serviceDesc() *grpc.ServiceDesc {
	d := pb.AgentService_ServiceDesc
	d.Methods = []grpc.MethodDesc{
		method("GetReplicas", func(s *Service, ctx context.Context, req *pb.GetReplicasRequest) (any, error) {
			e, err := s.getReplicas(ctx, req)
			if err != nil {
				return nil, err
			}
			return e.wire(), nil
		}),
		method("GetResource", func(s *Service, ctx context.Context, req *pb.GetResourceRequest) (any, error) {
			return s.GetResource(ctx, req)
		}),
		method("HeartBeat", func(s *Service, ctx context.Context, req *pb.HeartBeatRequest) (any, error) {
			e, err := s.heartBeat(ctx, req)
			if err != nil {
				return nil, err
			}
			return e.wire(), nil
		}),
	}
	return &d
}

// method builds a unary handler as protoc-gen-go-grpc does, calling fn.
func method[Req any, P interface {
	*Req
	proto.Message
}](name string, fn func(*Service, context.Context, P) (any, error)) grpc.MethodDesc {
	full := "/" + pb.AgentService_ServiceDesc.ServiceName + "/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := P(new(Req))
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(*Service)
			if ic == nil {
				return fn(s, ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: full}
			return ic(ctx, in, info, func(ctx context.Context, req any) (any, error) { return fn(s, ctx, req.(P)) })
		},
	}
}
