package agentv3

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/agent/filter"
	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// Decision is what the agent decided for one saved model of a layout.
type Decision struct {
	Entry backend.LayoutEntry
	// Accepted says whether the filters accept it on this host.
	Accepted bool
	// Filter accepted it (nil when there are no filters, or when it is not accepted).
	Filter *filter.Filter
	// Config is its model config in TF Serving's config: the one its deploy config gives, or,
	// when Err is set, the previous one (nil when it is not served).
	Config *servingconfig.ModelConfig
	// Err says why an accepted saved model's deploy config is not applied: a bad deploy config,
	// or (Waiting) a latest_once model with no version yet. It names the saved model's node.
	Err error
	// Waiting: a latest_once model with no version under its base path yet; it is looked at
	// again until one appears.
	Waiting bool
}

// LatestOnceFunc gives the version a latest_once saved model serves; an error wrapping
// modelconfig.ErrNoVersion means there is none yet.
type LatestOnceFunc func(savedModel, basePath string) (int64, error)

// BuildOptions are what BuildModelServerConfig needs beyond the filters and the layout.
type BuildOptions struct {
	// Bzid names the saved models' nodes (/{bzid}/saved_models/{model}/{sub_graph}) in errors.
	Bzid string
	// LatestOnce resolves latest_once; nil makes every latest_once model wait.
	LatestOnce LatestOnceFunc
	// Previous are the model configs TF Serving has now, by name: a saved model whose deploy
	// config cannot be applied keeps its previous config rather than being unloaded.
	Previous map[string]*servingconfig.ModelConfig
}

// BuildModelServerConfig applies filters to a layout (the body of layout_update_callback): each
// saved model a filter accepts (all of them without filters) becomes a ModelConfig named
// "model:sub_graph" with its deploy config's base path and version policy (version data 1), in
// layout order. latest_once, which TF Serving does not know, becomes the specific version
// o.LatestOnce gives.
//
// A saved model whose deploy config cannot be applied (no version policy, an unknown one, a
// latest_once model without a version yet) is left out, or keeps its previous config, with the
// reason in its Decision; the rest of the layout is applied. A filter that fails on a sub graph
// fails the whole layout (the error), as the reference's exception did, so the previous config
// stays rather than a partial one unloading models.
func BuildModelServerConfig(filters filter.Set, entries []backend.LayoutEntry, o BuildOptions) (*servingconfig.ModelServerConfig, []Decision, error) {
	list := &servingconfig.ModelConfigList{}
	decisions := make([]Decision, 0, len(entries))
	for _, e := range entries {
		ok, f, err := filters.Accept(e.SavedModel.SubGraph)
		if err != nil {
			return nil, nil, err
		}
		d := Decision{Entry: e, Accepted: ok, Filter: f}
		if ok {
			name := e.SavedModel.String()
			d.Config, d.Err = modelConfig(e, o.LatestOnce)
			if d.Err != nil {
				d.Waiting = errors.Is(d.Err, modelconfig.ErrNoVersion)
				d.Err = fmt.Errorf("saved model %s (%s): %w", name, savedModelNode(o.Bzid, e.SavedModel), d.Err)
				d.Config = o.Previous[name]
			}
			if d.Config != nil {
				list.Config = append(list.Config, d.Config)
			}
		}
		decisions = append(decisions, d)
	}
	// model_config_list is set even when empty (SetInParent): TF Serving then unloads everything.
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{ModelConfigList: list}}, decisions, nil
}

// modelConfig is the model config of one accepted saved model.
func modelConfig(e backend.LayoutEntry, latestOnce LatestOnceFunc) (*servingconfig.ModelConfig, error) {
	name := e.SavedModel.String()
	policy := e.DeployConfig.VersionPolicy
	if policy == nil {
		// gen_model_config(version_policy=None) raised AttributeError.
		return nil, errkind.New(errkind.Attribute, "deploy config has no version_policy")
	}
	base := ""
	if e.DeployConfig.ModelBasePath != nil {
		base = *e.DeployConfig.ModelBasePath
	}
	data := modelconfig.VersionData{N: 1}
	if strings.EqualFold(*policy, modelconfig.PolicyLatestOnce) {
		v, err := resolveLatestOnce(name, base, latestOnce)
		if err != nil {
			return nil, err
		}
		policy, data = ptrTo(modelconfig.PolicySpecific), modelconfig.VersionData{N: v}
	}
	mc, err := modelconfig.ModelConfig(name, base, *policy, data, nil)
	if err != nil {
		return nil, fmt.Errorf("version_policy %q: %w", *policy, err)
	}
	return mc, nil
}

func resolveLatestOnce(name, base string, latestOnce LatestOnceFunc) (int64, error) {
	switch {
	case base == "":
		return 0, errkind.New(errkind.Value, "version_policy latest_once: no model_base_path to find versions in")
	case strings.Contains(base, "://"):
		return 0, errkind.New(errkind.Value, "version_policy latest_once: model_base_path %q is not a local path; its versions cannot be listed", base)
	case latestOnce == nil:
		return 0, errkind.Wrap(errkind.NotFound, fmt.Errorf("version_policy latest_once: %w: no resolver", modelconfig.ErrNoVersion))
	}
	v, err := latestOnce(name, base)
	if err != nil {
		return 0, fmt.Errorf("version_policy latest_once: %w", err)
	}
	return v, nil
}

func ptrTo[T any](v T) *T { return &v }

// savedModelNode is the ZooKeeper node of a saved model's deploy config.
func savedModelNode(bzid string, sm backend.SavedModel) string {
	return "/" + bzid + "/saved_models/" + sm.ModelName + "/" + sm.SubGraph
}

// latestOncePins remembers the version each latest_once saved model was resolved to, for the
// agent's life: "latest once" is the newest version present when the agent first sees the model,
// and it stays on it however many newer ones appear. A saved model declared again with another
// base path is resolved again. A pinned version TF Serving fails to load is replaced by the
// newest older one on disk that has not failed (fail), so the model serves the newest version
// that loads rather than none.
type latestOncePins struct {
	mu   sync.Mutex
	pins map[[2]string]int64 // {saved model, base path} -> version
}

// fail notes that TF Serving failed to load version of savedModel: when it is the version pinned
// (under any base path), the pin moves to the newest older version under that base path; repinned
// lists the moves. With no older version the pin stays.
func (p *latestOncePins) fail(savedModel string, version int64) (repinned []repin) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, v := range p.pins {
		if key[0] != savedModel || v != version {
			continue
		}
		vs, err := modelconfig.VersionDirs(key[1])
		if err != nil {
			continue
		}
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].Number < version {
				p.pins[key] = vs[i].Number
				repinned = append(repinned, repin{base: key[1], from: version, to: vs[i].Number})
				break
			}
		}
	}
	return repinned
}

// repin is a latest_once pin moved off a version that failed to load.
type repin struct {
	base     string
	from, to int64
}

// resolve returns the pinned version, or pins the newest version under base; fresh says it was
// pinned now.
func (p *latestOncePins) resolve(savedModel, base string) (v int64, fresh bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := [2]string{savedModel, base}
	if v, ok := p.pins[key]; ok {
		return v, false, nil
	}
	latest, err := modelconfig.LatestVersion(base)
	if err != nil {
		return 0, false, err
	}
	if p.pins == nil {
		p.pins = map[[2]string]int64{}
	}
	p.pins[key] = latest.Number
	return latest.Number, true, nil
}

// latestOnce is the agent's LatestOnceFunc: resolve, logging each new pin.
func (a *Agent) latestOnce(savedModel, base string) (int64, error) {
	v, fresh, err := a.pins.resolve(savedModel, base)
	if fresh {
		a.log.Info("latest_once saved model pinned to its newest version", "saved_model", savedModel, "base_path", base, "version", v)
	}
	return v, err
}

// LayoutUpdate is the layout callback (layout_update_callback): it writes the model server config
// of the accepted saved models to the model config file, in the text format Python's
// text_format.MessageToString writes, and hands it to the reloader. A layout that cannot be
// applied is logged and reported; the previous config stays. A saved model whose deploy config
// cannot be applied is logged, counted and reported, and the rest is applied. It returns false
// once the agent stops, which ends the watch.
func (a *Agent) LayoutUpdate(entries []backend.LayoutEntry) bool {
	a.layoutMu.Lock()
	defer a.layoutMu.Unlock()
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped {
		return false
	}
	a.log.Info("layout callback", "saved_models", len(entries))
	a.entries, a.haveEntries = entries, true
	a.applyLayout(true)
	return true
}

// failedLatestOnce moves the pins of latest_once saved models off versions that failed to load
// (failed: those newly seen) and applies the layout again when one moved, so TF Serving loads the
// next older version.
func (a *Agent) failedLatestOnce(failed []agentstatus.FailedLoad) {
	moved := false
	for _, f := range failed {
		for _, r := range a.pins.fail(f.Model, f.Version) {
			moved = true
			a.log.Warn("latest_once saved model moved to an older version: its pinned version failed to load", "saved_model", f.Model,
				"base_path", r.base, "failed_version", r.from, "version", r.to)
		}
	}
	if !moved {
		return
	}
	a.layoutMu.Lock()
	defer a.layoutMu.Unlock()
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if !stopped && a.haveEntries {
		a.applyLayout(false)
	}
}

// recheckLatestOnce applies the last layout again while a latest_once saved model waits for its
// first version, so it loads once one appears (a version directory is not a ZooKeeper event).
func (a *Agent) recheckLatestOnce() {
	a.layoutMu.Lock()
	defer a.layoutMu.Unlock()
	a.mu.Lock()
	stopped := a.stopped
	a.mu.Unlock()
	if stopped || !a.haveEntries || a.waiting == 0 {
		return
	}
	a.applyLayout(false)
}

// applyLayout builds the config of a.entries and applies it; fromZK says the layout changed (a
// re-check only updates the status and metrics when the config changes). a.layoutMu is held.
func (a *Agent) applyLayout(fromZK bool) {
	now := time.Now()
	cfg, decisions, err := BuildModelServerConfig(a.filters, a.entries,
		BuildOptions{Bzid: *a.conf.Bzid, LatestOnce: a.latestOnce, Previous: a.lastConfigs})
	summary := make([]agentstatus.LayoutEntry, len(a.entries))
	for i, e := range a.entries {
		summary[i] = agentstatus.LayoutEntry{SavedModel: e.SavedModel.String(),
			BasePath: e.DeployConfig.ModelBasePath, VersionPolicy: e.DeployConfig.VersionPolicy}
	}
	waiting, skipped := 0, map[string]string{}
	if err == nil {
		for i, d := range decisions {
			summary[i].Loaded = d.Accepted
			if d.Filter != nil && d.Accepted {
				summary[i].Filter = d.Filter.String()
			}
			if d.Err != nil {
				a.reportSkipped(d, skipped)
				summary[i].Error = d.Err.Error()
				if d.Waiting {
					waiting++
				}
			}
		}
	}
	var text string
	result := agentstatus.LayoutError
	if err == nil {
		text = pytext.Format(cfg)
		if text == a.lastText {
			result = agentstatus.LayoutUnchanged
		} else if err = writeConfigFile(a.configFile, text); err == nil {
			result = agentstatus.LayoutWritten
			for _, d := range decisions {
				if d.Config != nil && d.Err == nil && a.lastConfigs[d.Entry.SavedModel.String()] == nil {
					a.log.Info("loading saved model", "saved_model", d.Entry.SavedModel.String(), "rule", filterString(d.Filter))
				}
			}
			a.log.Info("wrote model server config", "file", a.configFile, "models", len(cfg.GetModelConfigList().GetConfig()))
		}
	}
	if fromZK || result == agentstatus.LayoutWritten {
		a.metrics.LayoutUpdate(result)
	}
	if err == nil {
		a.skipped, a.waiting = skipped, waiting
	}
	a.mu.Lock()
	if fromZK {
		a.layout.UpdatedAt = now
	}
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
		return
	}
	if result == agentstatus.LayoutWritten {
		a.lastConfigs = map[string]*servingconfig.ModelConfig{}
		for _, mc := range cfg.GetModelConfigList().GetConfig() {
			a.lastConfigs[mc.GetName()] = mc
		}
		if a.reloader != nil {
			a.reloader.submit(cfg)
		}
		a.wakeSync()
	}
}

// reportSkipped logs and counts a saved model whose deploy config is not applied, once per
// reason (a re-check or an unrelated layout change does not repeat it), and records it in now.
func (a *Agent) reportSkipped(d Decision, now map[string]string) {
	name, reason := d.Entry.SavedModel.String(), d.Err.Error()
	now[name] = reason
	if a.skipped[name] == reason {
		return
	}
	attrs := []any{"saved_model", name, "node", savedModelNode(*a.conf.Bzid, d.Entry.SavedModel),
		"version_policy", deref(d.Entry.DeployConfig.VersionPolicy), "model_base_path", deref(d.Entry.DeployConfig.ModelBasePath),
		"previous_config_kept", d.Config != nil, "err", d.Err}
	if d.Waiting {
		a.log.Warn("latest_once saved model waits for its first version", attrs...)
		return
	}
	a.metrics.LayoutEntrySkipped()
	a.log.Error("saved model skipped: its deploy config cannot be applied; the rest of the layout is", attrs...)
}

// deref is *s, or "<None>" for nil (the reference's None).
func deref(s *string) string {
	if s == nil {
		return "<None>"
	}
	return *s
}

func filterString(f *filter.Filter) string {
	if f == nil {
		return ""
	}
	return f.String()
}
