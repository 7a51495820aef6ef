// Package datadef holds the agent's data model (monolith/agent_service/data_def.py): the records
// stored in ZooKeeper and passed between the agent's parts. Their fields, defaults, enums and
// Python-compatible JSON codecs are generated from specs/agent_service/data_def.yaml
// (gen/spec/agent_service/data_def); this package adds the reference's behaviour (paths, addresses)
// and gives codec errors their errkind. Serialize writes the bytes the reference's to_json writes
// (the reference compares stored bytes before rewriting a node, so they must be identical, and Go
// and Python agents share the nodes); Deserialize reads what from_json reads, null in any field
// included, and rejects values outside a field's Python type, naming the field.
package datadef

import (
	"strings"

	servingutil "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/util"
	"github.com/monolith-go/monolith/gen/spec/pydataclass"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// Path is base_path/model_name.
func (m ModelMeta) Path(base string) (string, error) {
	if m.ModelName == nil {
		return "", errkind.New(errkind.Type, "ModelMeta.get_path: model_name is not set")
	}
	return pathutil.Join(base, *m.ModelName), nil
}

// Path is base_path/{shard_id}:{replica_id}, each as Python formats it (None when unset).
func (r ResourceSpec) Path(base string) string {
	return pathutil.Join(base, pyStr(r, "shard_id")+":"+pyStr(r, "replica_id"))
}

// Path is base_path/{shard_id}:{replica_id}:{model_name}.
func (p PublishMeta) Path(base string) string {
	return pathutil.Join(base, pyStr(p, "shard_id")+":"+pyStr(p, "replica_id")+":"+pyStr(p, "model_name"))
}

// Path is {sep}{bzid}{sep}service{sep}{model_name}{sep}{server_type}:{task}{sep}{replica}.
func (r ReplicaMeta) Path(bzid, sep string) (string, error) {
	if r.ModelName == nil {
		return "", errkind.New(errkind.Type, "ReplicaMeta.get_path: model_name is not set")
	}
	return strings.Join([]string{"", bzid, "service", *r.ModelName,
		pyStr(r, "server_type") + ":" + pyStr(r, "task"), pyStr(r, "replica")}, sep), nil
}

// pyStr is str() of a record's field as the reference holds it (an f-string's view of it).
func pyStr(rec interface{ PyDict() pydataclass.Value }, field string) string {
	v, _ := rec.PyDict().Get(field)
	return v.PyStr()
}

// Address families for ReplicaMeta.Address.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
)

// AddressFor picks the replica's address: the archon or gRPC one, preferring the given family and
// falling back to the other; wildcard addresses (0.0.0.0*, [::]*) count as absent. Nil when none.
func (r ReplicaMeta) AddressFor(useArchon bool, family string) (*string, error) {
	if family != IPv4 && family != IPv6 {
		return nil, errkind.New(errkind.Precondition, "address family %q: want %s or %s", family, IPv4, IPv6)
	}
	v4, v6 := r.Address, r.AddressIPv6
	if useArchon {
		v4, v6 = r.ArchonAddress, r.ArchonAddressIPv6
	}
	if v4 != nil && strings.HasPrefix(*v4, "0.0.0.0") {
		v4 = nil
	}
	if v6 != nil && strings.HasPrefix(*v6, "[::]") {
		v6 = nil
	}
	// Python's `a or b`: an empty string counts as absent too.
	first, second := v4, v6
	if family == IPv6 {
		first, second = v6, v4
	}
	if first != nil && *first != "" {
		return first, nil
	}
	return second, nil
}

// EmptyStatus is the reference's EmptyStatus: an empty TF Serving StatusProto (error code OK, no
// message). A new message each call, since a shared one could be modified by a caller.
func EmptyStatus() *servingutil.StatusProto { return &servingutil.StatusProto{} }
