package zkmirror

import "github.com/monolith-go/monolith/pkg/datadef"

// decoded is a mirrored value parsed once, when it was stored. Queries hand out clones, so a
// caller changing a result (through its pointer fields) cannot change the mirror.
type decoded[T any] struct {
	v   T
	err error
}

func decodeReplica(b []byte) any {
	v, err := datadef.DeserializeReplicaMeta(b)
	return decoded[datadef.ReplicaMeta]{v, err}
}

func decodeResource(b []byte) any {
	v, err := datadef.DeserializeResourceSpec(b)
	return decoded[datadef.ResourceSpec]{v, err}
}

// valueOf returns the value of e decoded as a T; ok is false when e does not hold a T or it did
// not decode (d.err says why).
func valueOf[T any](e *entry) (d decoded[T], ok bool) {
	d, isT := e.memo.(decoded[T])
	return d, isT && d.err == nil
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneReplica(r datadef.ReplicaMeta) datadef.ReplicaMeta {
	r.Address, r.AddressIPv6, r.ModelName = clonePtr(r.Address), clonePtr(r.AddressIPv6), clonePtr(r.ModelName)
	r.ServerType, r.ArchonAddress, r.ArchonAddressIPv6 = clonePtr(r.ServerType), clonePtr(r.ArchonAddress), clonePtr(r.ArchonAddressIPv6)
	return r
}

func clonePublish(p datadef.PublishMeta) datadef.PublishMeta {
	p.ShardID, p.ModelName, p.NumPS = clonePtr(p.ShardID), clonePtr(p.ModelName), clonePtr(p.NumPS)
	if p.SubModels != nil {
		p.SubModels = append([]datadef.SubModel{}, p.SubModels...)
	}
	return p
}

func cloneResource(r datadef.ResourceSpec) datadef.ResourceSpec {
	r.Address, r.ShardID, r.ReplicaID, r.Memory = clonePtr(r.Address), clonePtr(r.ShardID), clonePtr(r.ReplicaID), clonePtr(r.Memory)
	return r
}
