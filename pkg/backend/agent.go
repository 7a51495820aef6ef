package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// SyncAvailableSavedModels advertises that container serves exactly models: a binding node
// /{bzid}/binding/{model}/{sub_graph}:{container} is created for each model not advertised yet and
// deleted for each advertised model not in models (the set difference with the previous call, as
// in the reference; the previous set is the backend's, whatever container it was for).
//
// Better than the reference: a binding whose creation failed is not counted as advertised, so the
// next call tries again, and one whose deletion failed stays counted (the reference logged both and
// forgot them). While the session is lost the set is only recorded: the bindings are created as soon
// as a new session is up.
func (b *ZKBackend) SyncAvailableSavedModels(ctx context.Context, container Container, models []SavedModel) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	want := make(map[SavedModel]bool, len(models))
	for _, sm := range models {
		want[sm] = true
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errkind.New(errkind.Runtime, "backend: sync available saved models: backend is closed")
	}
	b.desired, b.boundTo = want, container
	if b.lost {
		b.mu.Unlock()
		b.log.Warn("zk is lost: the available saved models are recorded and advertised once a new session is up")
		return nil
	}
	var add, remove []SavedModel
	for sm := range want {
		if !b.bound[sm] {
			add = append(add, sm)
		}
	}
	for sm := range b.bound {
		if !want[sm] {
			remove = append(remove, sm)
		}
	}
	b.mu.Unlock()
	sortSavedModels(add)
	sortSavedModels(remove)
	b.log.Info("available saved models updating", "add", savedModelNames(add), "remove", savedModelNames(remove))

	var errs []error
	for _, sm := range add {
		if err := b.putEphemeral(ctx, b.bindingPath(sm, container), nil); err != nil {
			b.log.Error("exception in create_znode", "saved_model", sm.String(), "err", err)
			errs = append(errs, err)
			continue
		}
		b.setBound(sm, true)
	}
	for _, sm := range remove {
		if err := b.deleteEphemeral(ctx, b.bindingPath(sm, container)); err != nil {
			b.log.Error("exception in delete_znode", "saved_model", sm.String(), "err", err)
			errs = append(errs, err)
			continue
		}
		b.setBound(sm, false)
	}
	b.log.Info("available saved models updated", "models", savedModelNames(sortedKeys(want)))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("backend: sync available saved models of %s: %w", container, err)
	}
	return nil
}

func (b *ZKBackend) setBound(sm SavedModel, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lost {
		return // the session's nodes are gone; the restore decides
	}
	if on {
		b.bound[sm] = true
	} else {
		delete(b.bound, sm)
	}
}

func sortedKeys(m map[SavedModel]bool) []SavedModel {
	out := make([]SavedModel, 0, len(m))
	for sm := range m {
		out = append(out, sm)
	}
	sortSavedModels(out)
	return out
}

// ReportServiceInfo advertises how container can be reached: the ephemeral node
// /{bzid}/container_service/{container} holds info's JSON. It is re-created on every new session
// until the backend closes.
func (b *ZKBackend) ReportServiceInfo(ctx context.Context, container Container, info ContainerServiceInfo) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	data := info.Serialize()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errkind.New(errkind.Runtime, "backend: report service info: backend is closed")
	}
	b.infos[container] = data
	lost := b.lost
	b.mu.Unlock()
	if lost {
		b.log.Warn("zk is lost: the service info is advertised once a new session is up", "container", container.String())
		return nil
	}
	if err := b.putEphemeral(ctx, b.serviceInfoPath(container), data); err != nil {
		return fmt.Errorf("backend: report service info of %s: %w", container, err)
	}
	return nil
}

// ServiceInfo returns what container advertised; ok is false when its node does not exist.
func (b *ZKBackend) ServiceInfo(ctx context.Context, container Container) (ContainerServiceInfo, bool, error) {
	data, ok, err := b.getNode(ctx, b.serviceInfoPath(container))
	if err != nil || !ok {
		return ContainerServiceInfo{}, false, wrapErr("get service info of "+container.String(), err)
	}
	info, err := DeserializeContainerServiceInfo(data)
	if err != nil {
		return ContainerServiceInfo{}, false, fmt.Errorf("backend: service info of %s: %w", container, err)
	}
	return info, true, nil
}

// ServiceMap returns model -> sub-graph -> service infos of the containers bound to it, for the
// models of the layout and the subscribed model, as the binding watches last saw them. The result
// is a copy.
func (b *ZKBackend) ServiceMap() ServiceMap {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(ServiceMap, len(b.svc))
	for m, subs := range b.svc {
		c := make(map[string][]ContainerServiceInfo, len(subs))
		for sg, infos := range subs {
			c[sg] = append([]ContainerServiceInfo(nil), infos...)
		}
		out[m] = c
	}
	return out
}

// SubscribeModel follows the bindings of modelName for SyncTargets. A backend follows one model:
// subscribing to another is a Precondition error (the reference asserts); subscribing again to the
// same one does nothing. The model stays followed across layout changes (the reference dropped it
// at the next layout change of a backend that also had a layout callback).
func (b *ZKBackend) SubscribeModel(ctx context.Context, modelName string) error {
	b.mu.Lock()
	if b.syncSet && b.syncMdl == modelName {
		b.mu.Unlock()
		return nil
	}
	if b.syncSet {
		b.mu.Unlock()
		return errkind.New(errkind.Precondition, "backend: subscribe model %q: already subscribed to %q", modelName, b.syncMdl)
	}
	b.syncSet, b.syncMdl = true, modelName
	if _, ok := b.svc[modelName]; !ok {
		b.svc[modelName] = map[string][]ContainerServiceInfo{}
	}
	b.mu.Unlock()
	return b.watchBindings(ctx, modelName)
}

// SyncTargets returns "model:sub_graph" for the subscribed model and the gRPC addresses of the
// containers bound to that sub-graph, in binding order. Containers without a gRPC address are left
// out (the reference listed None). Without a subscribed model it is a Precondition error (the
// reference answered "None:sub_graph").
func (b *ZKBackend) SyncTargets(subGraph string) (string, []string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.syncSet {
		return "", nil, errkind.New(errkind.Precondition, "backend: sync targets of %q: no model subscribed", subGraph)
	}
	targets := []string{}
	for _, info := range b.svc[b.syncMdl][subGraph] {
		if info.GRPC != nil {
			targets = append(targets, *info.GRPC)
		}
	}
	return b.syncMdl + ":" + subGraph, targets, nil
}

// wrapErr adds the operation to a ZooKeeper error; nil stays nil.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("backend: %s: %w", op, err)
}

// savedModelNames are the "model:sub_graph" names of sms, for the log.
func savedModelNames(sms []SavedModel) []string {
	names := make([]string, len(sms))
	for i, sm := range sms {
		names[i] = sm.String()
	}
	return names
}
