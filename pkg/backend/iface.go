package backend

import "context"

// LayoutEntry is one saved model of a layout with its deploy config.
type LayoutEntry struct {
	SavedModel   SavedModel
	DeployConfig SavedModelDeployConfig
}

// LayoutCallback receives the saved models of a layout after every change of it, in the order of
// the layout's children (sorted). Returning false stops the watch (the reference's ChildrenWatch
// stops when its function returns False).
type LayoutCallback func(entries []LayoutEntry) bool

// ServiceMap is model name -> sub-graph -> the service infos of the containers serving it.
type ServiceMap map[string]map[string][]ContainerServiceInfo

// AgentBackend is what a serving agent needs: its layout, and advertising what it serves.
type AgentBackend interface {
	// RegisterLayoutCallback calls cb with the layout's saved models now and after every change.
	RegisterLayoutCallback(ctx context.Context, layoutPath string, cb LayoutCallback) error
	// SyncAvailableSavedModels advertises that container serves exactly models.
	SyncAvailableSavedModels(ctx context.Context, container Container, models []SavedModel) error
	// ReportServiceInfo advertises how container can be reached.
	ReportServiceInfo(ctx context.Context, container Container, info ContainerServiceInfo) error
	// ServiceInfo returns what container advertised; ok is false when it advertised nothing.
	ServiceInfo(ctx context.Context, container Container) (info ContainerServiceInfo, ok bool, err error)
	// ServiceMap returns who serves the models of the layout (and the subscribed model).
	ServiceMap() ServiceMap
	Close() error
}

// CtrlBackend is what an operator's controller (agentctl) needs: declaring saved models and
// editing layouts.
type CtrlBackend interface {
	ListSavedModels(ctx context.Context, modelName string) ([]SavedModel, error)
	DeclSavedModel(ctx context.Context, sm SavedModel, cfg SavedModelDeployConfig) error
	AddToLayout(ctx context.Context, layoutPath string, sm SavedModel) error
	RemoveFromLayout(ctx context.Context, layoutPath string, sm SavedModel) error
	BzidInfo(ctx context.Context) (BzidInfo, error)
	Close() error
}

// SyncBackend is what a parameter-sync client needs: the addresses serving one model's sub-graphs.
type SyncBackend interface {
	// SubscribeModel starts following the bindings of modelName (one model per backend).
	SubscribeModel(ctx context.Context, modelName string) error
	// SyncTargets returns "model:sub_graph" and the gRPC addresses serving it.
	SyncTargets(subGraph string) (name string, targets []string, err error)
	Close() error
}

var (
	_ AgentBackend = (*ZKBackend)(nil)
	_ CtrlBackend  = (*ZKBackend)(nil)
	_ SyncBackend  = (*ZKBackend)(nil)
)
