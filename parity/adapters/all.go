// Package adapters wires the per-module parity adapters (parity/adapters/<module>) into a registry.
package adapters

import (
	"github.com/monolith-go/monolith/parity/adapters/agentsvc"
	"github.com/monolith-go/monolith/parity/adapters/backend"
	"github.com/monolith-go/monolith/parity/adapters/datadef"
	"github.com/monolith-go/monolith/parity/adapters/discovery"
	"github.com/monolith-go/monolith/parity/adapters/hashtableoptimizer"
	"github.com/monolith-go/monolith/parity/adapters/mockedtfserving"
	"github.com/monolith-go/monolith/parity/adapters/modelmgr"
	"github.com/monolith-go/monolith/parity/adapters/replica"
	"github.com/monolith-go/monolith/parity/adapters/runconfig"
	"github.com/monolith-go/monolith/parity/adapters/tfsmonitor"
	"github.com/monolith-go/monolith/parity/adapters/trainenv"
	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/adapters/zkmirror"
	"github.com/monolith-go/monolith/parity/harness"
)

// RegisterAll registers the adapters of every ported module. Each module package exposes
// Register(r *harness.Registry) and has no init() side effects, so the set is exactly what is
// listed here; add one call per module as it is ported.
func RegisterAll(r *harness.Registry) {
	agentsvc.Register(r)
	backend.Register(r)
	datadef.Register(r)
	discovery.Register(r)
	hashtableoptimizer.Register(r)
	mockedtfserving.Register(r)
	modelmgr.Register(r)
	replica.Register(r)
	runconfig.Register(r)
	tfsmonitor.Register(r)
	trainenv.Register(r)
	utils.Register(r)
	zkmirror.Register(r)
}
