package agentsvc

import (
	"fmt"
	"net"
	"strconv"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/resource"
)

// Resource is what GetResource reports for agents v2 and v3: the agent's address and place in the
// deployment, and the memory available to it (cpu, network and work_load are always -1).
type Resource struct {
	// Address is the agent's "host:port".
	Address string
	// ShardID and ReplicaID must fit int32 (the proto's fields); GetResource fails otherwise.
	ShardID, ReplicaID int
	// Memory returns the available memory in bytes; nil means the pod's available memory
	// (resource.Host.PodAvailableMemory) on this machine.
	Memory func() (int64, error)
}

func (r *Resource) memory() (int64, error) {
	if r.Memory != nil {
		return r.Memory()
	}
	var h resource.Host
	return h.PodAvailableMemory()
}

// ResourceFromConfig builds the reference's GetResource fields from the agent config:
// "{get_local_ip()}:{agent_port}", shard_id (SHARD_ID) and replica_id.
func ResourceFromConfig(conf *agentconf.AgentConfig) (*Resource, error) {
	if conf.AgentPort == nil {
		return nil, errkind.New(errkind.Attribute, "agent service resource: agent_port is not set")
	}
	shard, err := conf.ShardID()
	if err != nil {
		return nil, fmt.Errorf("agent service resource: %w", err)
	}
	replica := -1
	if conf.ReplicaID != nil {
		replica = *conf.ReplicaID
	}
	return &Resource{
		Address:   net.JoinHostPort(agentconf.LocalIP(conf.LookupEnv), strconv.Itoa(*conf.AgentPort)),
		ShardID:   shard,
		ReplicaID: replica,
	}, nil
}
