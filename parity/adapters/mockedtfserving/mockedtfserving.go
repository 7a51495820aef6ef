// Package mockedtfserving replays the goldens of monolith/agent_service/mocked_tfserving.py (the
// reference's fake TF Serving model manager) against pkg/tfs/faketfs. The reference scenarios ran
// the queue synchronously (no poll thread, no random versions); so do these, with ModelMgr.Step.
package mockedtfserving

import (
	"encoding/json"
	"fmt"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// Register adds the mocked_tfserving adapters.
func Register(r *harness.Registry) {
	r.Register("ModelMgr([gen_model_config(...)]) + synchronous event processing + remove", loadRemove)
	r.Register("ModelMgr.load two configs, simulated new version, remove unknown, get_metadata", multiModelNewVersion)
	r.Register("ModelMgr.load over an existing model", reloadSameName)
}

// model is how the goldens show a model: its policy, version_data, unloading flag and
// [version, "STATE"] pairs.
type model struct {
	Policy      string  `json:"policy"`
	Unloading   bool    `json:"unloading"`
	VersionData any     `json:"version_data"`
	Versions    [][]any `json:"versions"`
}

func models(m *faketfs.ModelMgr) map[string]model {
	out := map[string]model{}
	for name, s := range m.Snapshot() {
		versions := [][]any{}
		for _, v := range s.Versions {
			versions = append(versions, []any{v.Version, v.State.String()})
		}
		out[name] = model{Policy: s.Conf.VersionPolicy, Unloading: s.Unloading, VersionData: s.Conf.VersionData(), Versions: versions}
	}
	return out
}

// traceEntry is one handled event and the models after it.
type traceEntry struct {
	Event  []any            `json:"event"`
	Models map[string]model `json:"models"`
}

// drain handles the queue one event at a time, as the reference scenarios did.
func drain(m *faketfs.ModelMgr) []traceEntry {
	trace := []traceEntry{}
	for {
		e, ok := m.Step()
		if !ok {
			return trace
		}
		trace = append(trace, traceEntry{Event: []any{e.ModelName, e.Version, e.State.String()}, Models: models(m)})
	}
}

// statusEntry is get_status for one [name, version, label] spec, as text-format statuses.
type statusEntry struct {
	Spec   []any    `json:"spec"`
	Status []string `json:"status"`
}

func status(m *faketfs.ModelMgr, name string, version *int64, label *string) statusEntry {
	spec := modelconfig.ModelSpec(name, modelconfig.Version{Number: version, Label: label}, nil)
	e := statusEntry{Spec: []any{name, nil, nil}}
	if version != nil {
		e.Spec[1] = *version
	}
	if label != nil {
		e.Spec[2] = *label
	}
	for _, s := range m.Status(spec) {
		e.Status = append(e.Status, pytext.Format(s))
	}
	return e
}

func ptr[T any](v T) *T { return &v }

// pyError writes an error as this golden records a caught exception: {"type": T, "message": M}
// bare, a form the harness's ErrorValue (which matches {"error": {...}}) does not cover. Only the
// kind this scenario raises is named; any other comes out under its errkind name, so it cannot
// pass for the reference's exception.
func pyError(err error) any {
	if err == nil {
		return nil
	}
	typ := errkind.Of(err).String()
	if errkind.Of(err) == errkind.NotFound {
		typ = "KeyError"
	}
	return map[string]string{"type": typ, "message": err.Error()}
}

// versionData decodes gen_model_config's int-or-list version_data.
func versionData(raw json.RawMessage) (modelconfig.VersionData, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return modelconfig.VersionData{N: n}, nil
	}
	var list []int64
	if err := json.Unmarshal(raw, &list); err != nil {
		return modelconfig.VersionData{}, &harness.InputError{Key: "model_config.version_data", Msg: fmt.Sprintf("want an int or a list of ints, got %s", raw)}
	}
	return modelconfig.VersionData{List: list, IsList: true}, nil
}

// modelConfig reads input.model_config: gen_model_config's arguments.
func modelConfig(in harness.Input) (*servingconfig.ModelConfig, string, error) {
	var args struct {
		Name          string           `json:"name"`
		BasePath      string           `json:"base_path"`
		VersionPolicy string           `json:"version_policy"`
		VersionData   json.RawMessage  `json:"version_data"`
		VersionLabels map[string]int64 `json:"version_labels"`
	}
	if err := in.Decode("model_config", &args); err != nil {
		return nil, "", err
	}
	data, err := versionData(args.VersionData)
	if err != nil {
		return nil, "", err
	}
	mc, err := modelconfig.ModelConfig(args.Name, args.BasePath, args.VersionPolicy, data, args.VersionLabels)
	if err != nil {
		return nil, "", err
	}
	return mc, args.Name, nil
}

// loadRemove: ModelMgr([config]); drain; the statuses of a fixed set of specs; remove; drain.
func loadRemove(_ *harness.Ctx, in harness.Input) (any, error) {
	mc, name, err := modelConfig(in)
	if err != nil {
		return nil, err
	}
	m := faketfs.NewModelMgr([]*servingconfig.ModelConfig{mc}, nil)
	out := map[string]any{"after_load": models(m), "alive": m.AliveModelNames()}
	out["load_trace"] = drain(m)
	out["status_loaded"] = []statusEntry{
		status(m, name, nil, nil),
		status(m, name, ptr[int64](1), nil),
		status(m, name, ptr[int64](10), nil),
		status(m, name, nil, ptr("stable")),
		status(m, "missing", nil, nil),
	}
	if err := m.Remove([]string{name}); err != nil {
		return nil, err
	}
	out["alive_after_remove_call"] = m.AliveModelNames()
	out["remove_trace"] = drain(m)
	out["status_removed"] = []statusEntry{status(m, name, nil, nil)}
	return out, nil
}

// multiModelNewVersion: two models (entry latest 1, ps_0 specific 4) loaded at once; drained; a
// new version of entry (what the reference's poll loop does every 30 s) drained, evicting version
// 1; remove of an unknown model; get_metadata of ps_0 version 4 (values as Python str()).
func multiModelNewVersion(_ *harness.Ctx, _ harness.Input) (any, error) {
	entry, err := modelconfig.ModelConfig("a:entry", "/a/entry", modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
	if err != nil {
		return nil, err
	}
	ps, err := modelconfig.ModelConfig("a:ps_0", "/a/ps_0", modelconfig.PolicySpecific, modelconfig.VersionData{N: 4}, nil)
	if err != nil {
		return nil, err
	}
	m := faketfs.NewModelMgr([]*servingconfig.ModelConfig{entry, ps}, nil)
	out := map[string]any{"trace1": drain(m)}
	if _, ok := m.NewVersion("a:entry"); !ok {
		return nil, fmt.Errorf("no new version of a:entry")
	}
	out["trace_new_version"] = drain(m)
	out["remove_unknown"] = pyError(m.Remove([]string{"nope"}))
	md, err := m.Metadata(modelconfig.ModelSpec("a:ps_0", modelconfig.Version{Number: ptr[int64](4)}, nil),
		[]string{"base_path", "version_policy", "version", "state", "num_versions"})
	if err != nil {
		return nil, err
	}
	metadata := map[string]string{}
	for k, v := range md {
		metadata[k] = faketfs.PyStr(v)
	}
	out["metadata"] = metadata
	return out, nil
}

// reloadSameName: r:entry (latest 1) loaded and drained, then loaded again as specific [9, 3] over
// the existing model; drained.
func reloadSameName(_ *harness.Ctx, _ harness.Input) (any, error) {
	first, err := modelconfig.ModelConfig("r:entry", "/r/entry", modelconfig.PolicyLatest, modelconfig.VersionData{N: 1}, nil)
	if err != nil {
		return nil, err
	}
	second, err := modelconfig.ModelConfig("r:entry", "/r/entry2", modelconfig.PolicySpecific, modelconfig.VersionData{List: []int64{9, 3}, IsList: true}, nil)
	if err != nil {
		return nil, err
	}
	m := faketfs.NewModelMgr([]*servingconfig.ModelConfig{first}, nil)
	out := map[string]any{"t1": drain(m)}
	m.Load([]*servingconfig.ModelConfig{second})
	out["after_reload"] = models(m)
	out["t2"] = drain(m)
	return out, nil
}
