package pscheck

import (
	"context"
	"fmt"
	"time"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// DefaultProbeTimeout bounds one Health call of RemoteProbe.
const DefaultProbeTimeout = 10 * time.Second

// RemoteProbe asks real parameter servers (pkg/ps, cmd/ps) for their health: PS i is clients[i],
// and its Health RPC answers the serialized MachineHealthResult the reference's check op returned
// (the server checks its own resident memory against its memory limit). Each call is bounded by
// timeout (0: DefaultProbeTimeout). A server that does not answer, or answers as another index, is
// a failed probe: the checker logs it and probes again at its next interval, and the workers' own
// calls to that server fail with their deadline.
func RemoteProbe(clients []pspb.ParameterServerClient, timeout time.Duration) Probe {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	return func(ctx context.Context, index int) ([]byte, error) {
		if index < 0 || index >= len(clients) {
			return nil, errkind.New(errkind.Value, "pscheck: PS %d of %d", index, len(clients))
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp, err := clients[index].Health(ctx, &pspb.HealthRequest{})
		if err != nil {
			return nil, fmt.Errorf("PS %d health: %w", index, err)
		}
		if int(resp.GetIndex()) != index {
			return nil, errkind.New(errkind.Precondition, "PS %d health: the server answers as PS %d", index, resp.GetIndex())
		}
		return resp.GetMachineHealth(), nil
	}
}
