package zkmirror

import (
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
)

// ServerType is the kind of TF Serving server a replica belongs to, as written in service paths
// ("{server_type}:{task}") and in ReplicaMeta.server_type. It is a distinct type so that the gRPC
// enum (agentpb.ServerType, an int) cannot be passed where the path string is meant: the
// reference's v2 AgentService passed the enum and got nothing (HeartBeat) or an AttributeError
// (GetReplicas); convert with ServerTypeFromProto.
type ServerType string

// Server types.
const (
	ServerPS    ServerType = "ps"
	ServerEntry ServerType = "entry"
	ServerDense ServerType = "dense"
)

// ParseServerType accepts ps, entry or dense in any case.
func ParseServerType(s string) (ServerType, error) {
	st := ServerType(strings.ToLower(s))
	if !st.Valid() {
		return "", errkind.New(errkind.Value, "server type %q: want ps, entry or dense", s)
	}
	return st, nil
}

// ServerTypeFromProto converts the AgentService enum (PS, ENTRY, DENSE).
func ServerTypeFromProto(t agentpb.ServerType) (ServerType, error) {
	switch t {
	case agentpb.ServerType_PS:
		return ServerPS, nil
	case agentpb.ServerType_ENTRY:
		return ServerEntry, nil
	case agentpb.ServerType_DENSE:
		return ServerDense, nil
	}
	return "", errkind.New(errkind.Value, "server type enum %d: want PS, ENTRY or DENSE", int32(t))
}

// Valid reports whether t is one of the server types.
func (t ServerType) Valid() bool {
	return t == ServerPS || t == ServerEntry || t == ServerDense
}

// String returns the path form.
func (t ServerType) String() string { return string(t) }

// pathForm is the form used in service paths: the reference lower-cases the server type there.
func (t ServerType) pathForm() string { return strings.ToLower(string(t)) }
