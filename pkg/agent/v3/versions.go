package agentv3

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// VersionLister is the optional interface of a tfs.Process that reports every version TF Serving
// has of each configured model (GetModelStatus's whole answer), not only the newest AVAILABLE one
// (tfs.Process.ListSavedModelsStatus): the agent then sees a newer version that failed to load
// while an older one serves. The agent gives tfs.Wrapper one (a ModelService channel of its own);
// inproc.Process has one. Without it the agent sees one status per model.
type VersionLister interface {
	ListModelVersions(ctx context.Context) (map[string][]*servingapis.ModelVersionStatus, error)
}

// modelVersions asks proc for every version of each configured model (one per model when it is
// no VersionLister).
func modelVersions(ctx context.Context, proc tfs.Process) (map[string][]*servingapis.ModelVersionStatus, error) {
	if l, ok := proc.(VersionLister); ok {
		return l.ListModelVersions(ctx)
	}
	st, err := proc.ListSavedModelsStatus(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]*servingapis.ModelVersionStatus, len(st))
	for name, s := range st {
		out[name] = []*servingapis.ModelVersionStatus{s}
	}
	return out, nil
}

// newestAvailable is each model's newest AVAILABLE version, else its newest (what
// ListSavedModelsStatus answers).
func newestAvailable(versions map[string][]*servingapis.ModelVersionStatus) map[string]*servingapis.ModelVersionStatus {
	out := make(map[string]*servingapis.ModelVersionStatus, len(versions))
	for name, list := range versions {
		out[name] = tfs.NewestAvailable(list)
	}
	return out
}

// failedLoad says whether s is a version that failed to load: END with an error (a version
// unloaded on purpose ends without one; an UNKNOWN with an error is a status call that failed).
func failedLoad(s *servingapis.ModelVersionStatus) bool {
	return s.GetState() == servingapis.ModelVersionStatus_END && s.GetStatus().GetErrorCode() != tfprotobuf.Code_OK
}

// failedLoads are the failed versions of every model, by model then newest first, each with the
// version the model serves instead.
func failedLoads(versions map[string][]*servingapis.ModelVersionStatus) []agentstatus.FailedLoad {
	var out []agentstatus.FailedLoad
	for name, list := range versions {
		serving := int64(0)
		for _, s := range list {
			if s.GetState() == servingapis.ModelVersionStatus_AVAILABLE {
				serving = max(serving, s.GetVersion())
			}
		}
		for _, s := range list {
			if failedLoad(s) {
				out = append(out, agentstatus.FailedLoad{Model: name, Version: s.GetVersion(), ErrorCode: s.GetStatus().GetErrorCode().String(),
					ErrorMessage: s.GetStatus().GetErrorMessage(), ServingVersion: serving})
			}
		}
	}
	slices.SortFunc(out, func(a, b agentstatus.FailedLoad) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(b.Version, a.Version))
	})
	return out
}

// failureKey names one failed load for the log: a version failing again with another error is
// another failure.
type failureKey struct {
	model   string
	version int64
	message string
}

// noteFailures logs each failed load once (WARN) and counts it when it is first seen, sets the
// failed loads gauge, and forgets the failures TF Serving no longer reports (a version retried
// under a new config, or gone), so a later failure of the same version is logged again. It
// returns the failures first seen. Called by the sync with what it read.
func (a *Agent) noteFailures(failed []agentstatus.FailedLoad) (fresh []agentstatus.FailedLoad) {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	now := make(map[failureKey]bool, len(failed))
	counts := map[string]int{}
	for _, f := range failed {
		k := failureKey{f.Model, f.Version, f.ErrorMessage}
		now[k] = true
		counts[f.Model]++
		if a.failures[k] {
			continue
		}
		fresh = append(fresh, f)
		a.metrics.LoadFailure(f.Model)
		serving := "none"
		if f.ServingVersion != 0 {
			serving = fmt.Sprint(f.ServingVersion)
		}
		a.log.Warn("tf serving failed to load a version of a saved model", "saved_model", f.Model, "version", f.Version,
			"serving_version", serving, "code", f.ErrorCode, "err", f.ErrorMessage)
	}
	a.failures = now
	a.metrics.SetFailedLoads(counts)
	return fresh
}

// unavailable is why each saved model the layout's filters passed serves no version, by name
// (the readiness reasons): one not in TF Serving's config (skipped for a bad deploy config, a
// latest_once model without a version yet), one whose versions are all on their way or failed.
func unavailable(entries []agentstatus.LayoutEntry, versions map[string][]*servingapis.ModelVersionStatus) []string {
	var reasons []string
	for _, e := range entries {
		if !e.Loaded {
			continue
		}
		list, ok := versions[e.SavedModel]
		if !ok {
			r := fmt.Sprintf("saved model %s: not in TF Serving's config", e.SavedModel)
			if e.Error != "" {
				r += ": " + e.Error
			}
			reasons = append(reasons, r)
			continue
		}
		if slices.ContainsFunc(list, func(s *servingapis.ModelVersionStatus) bool {
			return s.GetState() == servingapis.ModelVersionStatus_AVAILABLE
		}) {
			continue
		}
		reasons = append(reasons, fmt.Sprintf("saved model %s: no AVAILABLE version (%s)", e.SavedModel, describeVersions(list)))
	}
	return reasons
}

// describeVersions is "version 3 END: INVALID_ARGUMENT: ...; version 2 LOADING", newest first.
func describeVersions(list []*servingapis.ModelVersionStatus) string {
	list = slices.Clone(list)
	slices.SortStableFunc(list, func(a, b *servingapis.ModelVersionStatus) int { return cmp.Compare(b.GetVersion(), a.GetVersion()) })
	parts := make([]string, 0, len(list))
	for _, s := range list {
		p := s.GetState().String()
		if s.GetVersion() != 0 || s.GetState() != servingapis.ModelVersionStatus_UNKNOWN {
			p = fmt.Sprintf("version %d %s", s.GetVersion(), p)
		}
		if code := s.GetStatus().GetErrorCode(); code != tfprotobuf.Code_OK {
			p += fmt.Sprintf(": %s: %s", code, s.GetStatus().GetErrorMessage())
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "TF Serving reports no version"
	}
	return strings.Join(parts, "; ")
}

// wrapperTFS is tfs.Wrapper with ListModelVersions, over a ModelService channel of its own to TF
// Serving's gRPC port (the wrapper's is not exported); Stop closes it too.
type wrapperTFS struct {
	*tfs.Wrapper
	conn   *grpc.ClientConn
	client servingapis.ModelServiceClient
}

var _ VersionLister = (*wrapperTFS)(nil)

func newWrapperTFS(w *tfs.Wrapper, grpcPort int) (*wrapperTFS, error) {
	conn, err := grpc.NewClient(fmt.Sprintf("localhost:%d", grpcPort), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("tf serving status channel: %w", err)
	}
	return &wrapperTFS{Wrapper: w, conn: conn, client: servingapis.NewModelServiceClient(conn)}, nil
}

// ListModelVersions implements VersionLister: GetModelStatus of each configured model; a call
// that fails gives the model one UNKNOWN status with the call's error, as
// ListSavedModelsStatus.
func (w *wrapperTFS) ListModelVersions(ctx context.Context) (map[string][]*servingapis.ModelVersionStatus, error) {
	names, err := w.ListSavedModels()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]*servingapis.ModelVersionStatus, len(names))
	for _, name := range names {
		cctx, cancel := context.WithTimeout(ctx, tfs.DefaultStatusTimeout)
		resp, err := w.client.GetModelStatus(cctx, &servingapis.GetModelStatusRequest{ModelSpec: modelconfig.ModelSpec(name, modelconfig.Version{}, nil)})
		cancel()
		if err != nil {
			s := status.Convert(err)
			msg := s.Message()
			out[name] = []*servingapis.ModelVersionStatus{{State: servingapis.ModelVersionStatus_UNKNOWN,
				Status: modelconfig.Status(tfprotobuf.Code(s.Code()), &msg)}}
			continue
		}
		out[name] = resp.GetModelVersionStatus()
	}
	return out, nil
}

// Stop implements tfs.Process: the process, then the status channel.
func (w *wrapperTFS) Stop(grace time.Duration) error {
	err := w.Wrapper.Stop(grace)
	w.conn.Close()
	return err
}
