package agentv3

import (
	"fmt"
	"time"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/agent/filter"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// Decision is what the filters decided for one saved model of a layout.
type Decision struct {
	Entry backend.LayoutEntry
	// Loaded says whether the model goes into TF Serving's config.
	Loaded bool
	// Filter accepted it (nil when there are no filters, or when it is not loaded).
	Filter *filter.Filter
}

// BuildModelServerConfig applies filters to a layout (the body of layout_update_callback): each
// saved model a filter accepts (all of them without filters) becomes a ModelConfig named
// "model:sub_graph" with its deploy config's base path and version policy (version data 1), in
// layout order. Any error (a filter that fails on a sub graph, a deploy config without a version
// policy or with an unknown one) fails the whole layout, as the reference's exception did, so the
// previous config stays in place rather than a partial one unloading models.
func BuildModelServerConfig(filters filter.Set, entries []backend.LayoutEntry) (*servingconfig.ModelServerConfig, []Decision, error) {
	list := &servingconfig.ModelConfigList{}
	decisions := make([]Decision, 0, len(entries))
	for _, e := range entries {
		ok, f, err := filters.Accept(e.SavedModel.SubGraph)
		if err != nil {
			return nil, nil, err
		}
		decisions = append(decisions, Decision{Entry: e, Loaded: ok, Filter: f})
		if !ok {
			continue
		}
		name := e.SavedModel.String()
		if e.DeployConfig.VersionPolicy == nil {
			// gen_model_config(version_policy=None) raised AttributeError.
			return nil, nil, errkind.New(errkind.Attribute, "saved model %s: deploy config has no version_policy", name)
		}
		base := ""
		if e.DeployConfig.ModelBasePath != nil {
			base = *e.DeployConfig.ModelBasePath
		}
		mc, err := modelconfig.ModelConfig(name, base, *e.DeployConfig.VersionPolicy, modelconfig.VersionData{N: 1}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("saved model %s: %w", name, err)
		}
		list.Config = append(list.Config, mc)
	}
	// model_config_list is set even when empty (SetInParent): TF Serving then unloads everything.
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: list}}, decisions, nil
}

// LayoutUpdate is the layout callback (layout_update_callback): it writes the model server config
// of the accepted saved models to the model config file, in the text format Python's
// text_format.MessageToString writes, and hands it to the reloader. A layout that cannot be
// applied is logged and reported; the previous config stays. It returns false once the agent
// stops, which ends the watch.
func (a *Agent) LayoutUpdate(entries []backend.LayoutEntry) bool {
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped {
		return false
	}
	a.log.Info("layout callback", "saved_models", len(entries))
	now := time.Now()
	cfg, decisions, err := BuildModelServerConfig(a.filters, entries)
	summary := make([]agentstatus.LayoutEntry, len(entries))
	for i, e := range entries {
		summary[i] = agentstatus.LayoutEntry{SavedModel: e.SavedModel.String(),
			BasePath: e.DeployConfig.ModelBasePath, VersionPolicy: e.DeployConfig.VersionPolicy}
	}
	if err == nil {
		for i, d := range decisions {
			summary[i].Loaded = d.Loaded
			if d.Filter != nil && d.Loaded {
				summary[i].Filter = d.Filter.String()
				a.log.Info("loading saved model", "saved_model", d.Entry.SavedModel.String(), "rule", d.Filter.String())
			}
		}
	}
	var text string
	result := agentstatus.LayoutError
	if err == nil {
		text = pytext.Format(cfg)
		a.mu.Lock()
		unchanged := text == a.lastText
		a.mu.Unlock()
		if unchanged {
			result = agentstatus.LayoutUnchanged
		} else if err = writeConfigFile(a.configFile, text); err == nil {
			result = agentstatus.LayoutWritten
			a.log.Info("wrote model server config", "file", a.configFile, "models", len(cfg.GetModelConfigList().GetConfig()))
		}
	}
	a.metrics.LayoutUpdate(result)
	a.mu.Lock()
	a.layout.UpdatedAt = now
	a.layout.Entries = summary
	a.layout.Error = ""
	if err != nil {
		a.layout.Error = err.Error()
	} else if result == agentstatus.LayoutWritten {
		a.lastText = text
	}
	a.mu.Unlock()
	if err != nil {
		a.log.Error("layout not applied, the previous model server config stays", "layout", a.layoutPath, "err", err)
		return true
	}
	if result == agentstatus.LayoutWritten {
		if a.reloader != nil {
			a.reloader.submit(cfg)
		}
		a.wakeSync()
	}
	return true
}
