// Package roundtrip checks that the generated agent_service messages put each field on the wire
// under the field number the Python reference uses, by comparing against hand-encoded bytes.
package roundtrip

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
)

func check(t *testing.T, name string, msg, empty proto.Message, want []byte) {
	t.Helper()
	got, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: wire bytes\n got % x\nwant % x", name, got, want)
	}
	if err := proto.Unmarshal(want, empty); err != nil {
		t.Fatalf("%s: unmarshal: %v", name, err)
	}
	if !proto.Equal(empty, msg) {
		t.Errorf("%s: round trip gave %v, want %v", name, empty, msg)
	}
}

func TestGetResourceResponseWire(t *testing.T) {
	msg := &pb.GetResourceResponse{
		Address:   "a:1",
		ShardId:   2,
		ReplicaId: 3,
		Memory:    1024,
		Cpu:       0.5,
		Network:   1.5,
		WorkLoad:  -2,
	}
	want := []byte{
		0x0a, 0x03, 'a', ':', '1', // 1: address, length-delimited
		0x10, 0x02, // 2: shard_id, varint
		0x18, 0x03, // 3: replica_id, varint
		0x20, 0x80, 0x08, // 4: memory, varint 1024
		0x2d, 0x00, 0x00, 0x00, 0x3f, // 5: cpu, fixed32 0.5
		0x35, 0x00, 0x00, 0xc0, 0x3f, // 6: network, fixed32 1.5
		0x3d, 0x00, 0x00, 0x00, 0xc0, // 7: work_load, fixed32 -2
	}
	check(t, "GetResourceResponse", msg, &pb.GetResourceResponse{}, want)
}

func TestHeartBeatResponseWire(t *testing.T) {
	msg := &pb.HeartBeatResponse{Addresses: map[string]*pb.AddressList{
		"ps":    {Address: []string{"h1:1", "h2:2"}},
		"entry": {},
	}}
	// Field 1 holds one entry message per key (deterministic marshaling sorts the keys); an entry
	// is key = 1 (string), value = 2 (AddressList, whose address is field 1).
	want := []byte{
		0x0a, 0x09, // 1: addresses entry, 9 bytes
		0x0a, 0x05, 'e', 'n', 't', 'r', 'y', // key
		0x12, 0x00, // value: empty AddressList
		0x0a, 0x12, // 1: addresses entry, 18 bytes
		0x0a, 0x02, 'p', 's', // key
		0x12, 0x0c, // value: AddressList, 12 bytes
		0x0a, 0x04, 'h', '1', ':', '1', // address
		0x0a, 0x04, 'h', '2', ':', '2', // address
	}
	check(t, "HeartBeatResponse", msg, &pb.HeartBeatResponse{}, want)
}

func TestRequestsWire(t *testing.T) {
	check(t, "GetReplicasRequest",
		&pb.GetReplicasRequest{ServerType: pb.ServerType_ENTRY, Task: 3, ModelName: "m"},
		&pb.GetReplicasRequest{},
		[]byte{0x08, 0x01, 0x10, 0x03, 0x1a, 0x01, 'm'})
	check(t, "HeartBeatRequest",
		&pb.HeartBeatRequest{ServerType: pb.ServerType_DENSE},
		&pb.HeartBeatRequest{},
		[]byte{0x08, 0x02})
	check(t, "GetReplicasResponse",
		&pb.GetReplicasResponse{AddressList: &pb.AddressList{Address: []string{"x"}}},
		&pb.GetReplicasResponse{},
		[]byte{0x0a, 0x03, 0x0a, 0x01, 'x'})
}

func TestNames(t *testing.T) {
	// The Python servers and clients address the service and its methods by these names.
	for _, tc := range []struct{ got, want string }{
		{pb.AgentService_GetReplicas_FullMethodName, "/monolith.serving.agent_service.AgentService/GetReplicas"},
		{pb.AgentService_GetResource_FullMethodName, "/monolith.serving.agent_service.AgentService/GetResource"},
		{pb.AgentService_HeartBeat_FullMethodName, "/monolith.serving.agent_service.AgentService/HeartBeat"},
	} {
		if tc.got != tc.want {
			t.Errorf("method name %q, want %q", tc.got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    pb.ServerType
		want int32
	}{{pb.ServerType_PS, 0}, {pb.ServerType_ENTRY, 1}, {pb.ServerType_DENSE, 2}} {
		if int32(tc.v) != tc.want {
			t.Errorf("ServerType %v = %d, want %d", tc.v, int32(tc.v), tc.want)
		}
	}
}
