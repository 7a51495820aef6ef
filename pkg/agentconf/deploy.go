package agentconf

import (
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// TF Serving server types (TFSServerType).
const (
	ServerPS      = "ps"
	ServerEntry   = "entry"
	ServerDense   = "dense"
	ServerUnified = "unified"
)

// Where the deep rough sort model is loaded (RoughSortModelLoadedServer).
const (
	RoughSortLoadedNone  = "none"
	RoughSortLoadedEntry = "entry"
	RoughSortLoadedPS    = "ps"
	RoughSortLoadedDense = "dense"
)

// Model name prefixes of the deep rough sort model (RoughSortModelPrefix).
const (
	RoughSortPrefixPS    = "ps_item_embedding"
	RoughSortPrefixEntry = "entry_item_embedding"
	RoughSortPrefixDense = "dense_item_embedding"
)

// DeployType is how TF Serving processes are deployed: one of the server types, or mixed (PS and
// entry in one TF Serving). It is always lower case.
type DeployType string

// DeployMixed hosts every role in one deployment.
const DeployMixed DeployType = "mixed"

// ParseDeployType accepts entry, ps, dense, mixed or unified in any case.
func ParseDeployType(s string) (DeployType, error) {
	l := strings.ToLower(s)
	switch l {
	case ServerEntry, ServerPS, ServerDense, string(DeployMixed), ServerUnified:
		return DeployType(l), nil
	}
	return "", errkind.New(errkind.Precondition, "deploy type %q: want entry, ps, dense, mixed or unified", s)
}

// CompatServerType resolves the server type to run under this deploy type: an empty or "mixed"
// server type means the deploy type itself (an error for mixed, which needs a concrete one); under
// mixed any server type goes; otherwise it must equal the deploy type.
func (d DeployType) CompatServerType(serverType string) (string, error) {
	if serverType == "" || serverType == string(DeployMixed) {
		if d == DeployMixed {
			return "", errkind.New(errkind.Runtime, "DeployType and ServerType is not compatable!")
		}
		return string(d), nil
	}
	if d == DeployMixed {
		return serverType, nil
	}
	if string(d) != serverType {
		return "", errkind.New(errkind.Precondition, "server type %q does not match deploy type %q", serverType, d)
	}
	return serverType, nil
}
