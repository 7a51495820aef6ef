// Package discovery finds the servers of a distributed training job (service_discovery.py): each
// parameter server and worker registers its address under its server type ("ps", "worker") and
// index, and the others query the index -> address map of a server type.
//
// One interface, four implementations, chosen by the job's discovery type (Get):
//   - ZK: nodes /monolith/<job>/<server_type>.<index> holding "host:port" on ZooKeeper, ephemeral,
//     re-registered periodically and after a session expiry; a children watch keeps the map current.
//   - Consul: services registered with the local Consul agent's HTTP API, tagged with name, index
//     and ip, kept alive by a TTL check (package consul holds the client).
//   - TFConfig (Primus): the static cluster of TF_CONFIG; registration is a no-op.
//   - MLP: the static cluster of the MLP platform's variables (package trainenv/mlpenv), where
//     deregistering hides a replica until it registers again.
//
// Package conformance holds the one test suite every implementation passes.
package discovery

import (
	"context"
	"fmt"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// ServiceDiscovery registers this process's servers and finds the job's others. Implementations are
// safe for concurrent use. Every call that reaches the network honours ctx.
type ServiceDiscovery interface {
	// Register publishes addr ("host:port") as server type name's replica index.
	Register(ctx context.Context, name string, index int, addr string) error
	// Deregister withdraws server type name's replica index (registered with addr).
	Deregister(ctx context.Context, name string, index int, addr string) error
	// Query returns server type name's replicas, index -> address. The map is the caller's.
	Query(ctx context.Context, name string) (map[int]string, error)
	// Close releases the discovery; later calls fail with ErrClosed. Closing again returns nil.
	Close() error
}

// ErrClosed is returned by the calls made after Close.
var ErrClosed = errkind.New(errkind.Runtime, "service discovery is closed")

// Type is the reference's ServiceDiscoveryType.
type Type int

// The discovery types, numbered as the reference's enum.
const (
	Primus Type = 1
	Consul Type = 2
	ZK     Type = 3
	MLP    Type = 4
)

var typeNames = map[Type]string{Primus: "primus", Consul: "consul", ZK: "zk", MLP: "mlp"}

// String returns the type's name as ParseType reads it.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// ParseType reads a discovery type by name ("primus", "consul", "zk", "mlp", in any case, as the
// enum's member names PRIMUS, CONSUL, ZK, MLP are spelled on command lines). Anything else is an
// error of kind Value.
func ParseType(s string) (Type, error) {
	for t, n := range typeNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return t, nil
		}
	}
	return 0, errkind.New(errkind.Value, "unknown discovery type %q (want primus, consul, zk or mlp)", s)
}

// NotRegisteredError is Deregister's error for a (name, index) this instance did not register (the
// reference's KeyError on its bookkeeping). Its kind is NotFound.
type NotRegisteredError struct {
	Name  string
	Index int
}

func (e *NotRegisteredError) Error() string {
	return fmt.Sprintf("discovery: %s.%d was not registered by this instance", e.Name, e.Index)
}

// Unwrap gives the error its kind.
func (e *NotRegisteredError) Unwrap() error { return errNotFound }

var errNotFound = errkind.New(errkind.NotFound, "not registered")

// copyMap returns a copy of m (never nil).
func copyMap(m map[int]string) map[int]string {
	out := make(map[int]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
