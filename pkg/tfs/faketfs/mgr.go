package faketfs

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// State is a model version's state (the reference's ModelState).
type State = servingapis.ModelVersionStatus_State

// The states a version goes through.
const (
	StateUnknown   = servingapis.ModelVersionStatus_UNKNOWN
	StateStart     = servingapis.ModelVersionStatus_START
	StateLoading   = servingapis.ModelVersionStatus_LOADING
	StateAvailable = servingapis.ModelVersionStatus_AVAILABLE
	StateUnloading = servingapis.ModelVersionStatus_UNLOADING
	StateEnd       = servingapis.ModelVersionStatus_END
)

// Version policies as ModelConf records them: the all policy is recorded as latest with no
// NumVersions, as the reference does.
const (
	PolicyLatest   = "latest"
	PolicySpecific = "specific"
)

// MaxSimulatedVersions bounds the versions simulated for a latest policy (num_versions is a
// uint32; the reference would build them all).
const MaxSimulatedVersions = 1000

// ModelConf is what the fake keeps of a model's config (the reference's ModelConf).
type ModelConf struct {
	ModelName string
	BasePath  string
	// VersionPolicy is PolicyLatest (for the latest and all policies) or PolicySpecific.
	VersionPolicy string
	// NumVersions is latest's num_versions; nil under the all policy (the reference's
	// version_data None).
	NumVersions *int64
	// Versions are specific's versions, sorted (the reference's version_data list).
	Versions []int64
	// ModelPlatform is always "tensorflow" and SignatureName always ("update", "predict"): the
	// reference's defaults, whatever the config says.
	ModelPlatform string
	SignatureName []string
}

// VersionData is the reference's version_data: NumVersions (int64 or nil) under latest, the
// versions ([]int64) under specific.
func (c *ModelConf) VersionData() any {
	if c.VersionPolicy == PolicySpecific {
		return slices.Clone(c.Versions)
	}
	if c.NumVersions == nil {
		return nil
	}
	return *c.NumVersions
}

func (c *ModelConf) clone() ModelConf {
	out := *c
	if c.NumVersions != nil {
		n := *c.NumVersions
		out.NumVersions = &n
	}
	out.Versions = slices.Clone(c.Versions)
	out.SignatureName = slices.Clone(c.SignatureName)
	return out
}

// ModelVersion is one version of a model (the reference's ModelVersion).
type ModelVersion struct {
	Version int64
	// VersionLabel is always nil: like the reference, the fake never assigns the config's
	// version_labels, so a ModelSpec naming a label finds nothing.
	VersionLabel *string
	State        State
}

// Event is one queued transition: Version of ModelName is to enter State.
type Event struct {
	ModelName string
	Version   int64
	State     State
}

func (e Event) String() string { return fmt.Sprintf("%s-%d: %s", e.ModelName, e.Version, e.State) }

type modelMeta struct {
	conf      ModelConf
	versions  []*ModelVersion
	unloading bool
}

// ModelSnapshot is a copy of one model's state.
type ModelSnapshot struct {
	Conf      ModelConf
	Unloading bool
	Versions  []ModelVersion
}

// ModelMgr holds the models and the event queue that moves their versions between states (the
// reference's ModelMgr). It is safe for concurrent use; nothing changes state except the calls
// below (see Step, Tick, Drain).
type ModelMgr struct {
	mu     sync.Mutex
	models map[string]*modelMeta
	queue  []Event
	log    *slog.Logger
}

// NewModelMgr returns a manager that has loaded configs (nothing processed yet). A nil logger
// discards the log.
func NewModelMgr(configs []*servingconfig.ModelConfig, logger *slog.Logger) *ModelMgr {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &ModelMgr{models: map[string]*modelMeta{}, log: logger}
	m.Load(configs)
	return m
}

// Load adds (or replaces) each config's model with all its versions UNKNOWN and queues START for
// them, in order. A model loaded over an existing one replaces it without unloading anything, as in
// the reference, and the events still queued for the old one are dropped (the reference lets them
// apply to the new model).
func (m *ModelMgr) Load(configs []*servingconfig.ModelConfig) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loadLocked(configs)
}

func (m *ModelMgr) loadLocked(configs []*servingconfig.ModelConfig) {
	for _, config := range configs {
		conf := ModelConf{
			ModelName:     config.GetName(),
			BasePath:      config.GetBasePath(),
			ModelPlatform: "tensorflow",
			SignatureName: []string{"update", "predict"},
		}
		var numbers []int64
		vp := config.GetModelVersionPolicy()
		switch {
		case vp.GetLatest() != nil:
			n := int64(vp.GetLatest().GetNumVersions())
			conf.VersionPolicy, conf.NumVersions = PolicyLatest, &n
			if n > MaxSimulatedVersions {
				m.log.Warn("simulating fewer versions than num_versions", "model", conf.ModelName, "num_versions", n, "simulated", MaxSimulatedVersions)
			}
			for i := int64(1); i <= min(n, MaxSimulatedVersions); i++ {
				numbers = append(numbers, i)
			}
		case vp.GetAll() != nil:
			conf.VersionPolicy = PolicyLatest
			numbers = []int64{1}
		case vp.GetSpecific() != nil:
			conf.VersionPolicy = PolicySpecific
			conf.Versions = slices.Clone(vp.GetSpecific().GetVersions())
			slices.Sort(conf.Versions)
			numbers = slices.Clone(conf.Versions)
		default:
			// TF Serving's default policy; the reference reads a missing policy as an empty
			// specific list and never serves a version.
			n := int64(1)
			conf.VersionPolicy, conf.NumVersions = PolicyLatest, &n
			numbers = []int64{1}
		}
		meta := &modelMeta{conf: conf}
		for _, v := range numbers {
			meta.versions = append(meta.versions, &ModelVersion{Version: v})
		}
		if len(meta.versions) == 0 {
			// The reference's `versions or [ModelVersion()]`: version 0, never loaded.
			meta.versions = []*ModelVersion{{}}
		}
		if _, ok := m.models[conf.ModelName]; ok {
			// A model loaded over another starts afresh: the events still queued for the old one
			// (its pending removal, say) are dropped. The reference lets them apply to the new
			// model, so a model re-added while its removal is queued is removed anyway.
			m.queue = slices.DeleteFunc(m.queue, func(e Event) bool { return e.ModelName == conf.ModelName })
		}
		m.models[conf.ModelName] = meta
		m.log.Info("start load a new model", "model", conf.ModelName, "policy", conf.VersionPolicy, "versions", numbers)
		for _, v := range numbers {
			m.queue = append(m.queue, Event{conf.ModelName, v, StateStart})
		}
	}
}

// Remove marks each model unloading and queues UNLOADING for its versions, in order. A name that
// is not loaded is an error of kind NotFound (the reference's KeyError, message the quoted name);
// the names before it have been marked.
func (m *ModelMgr) Remove(names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeLocked(names)
}

func (m *ModelMgr) removeLocked(names []string) error {
	for _, name := range names {
		model, ok := m.models[name]
		if !ok {
			return errkind.New(errkind.NotFound, "%s", pyfmt.StrRepr(name))
		}
		model.unloading = true
		m.log.Info("start remove the model", "model", name)
		for _, v := range model.versions {
			m.queue = append(m.queue, Event{name, v.Version, StateUnloading})
		}
	}
	return nil
}

// Reload applies a new model config list as HandleReloadConfigRequest does: the alive models whose
// names are not in configs are removed (in name order), the configs whose names are not alive are
// loaded (in request order), and the rest are left alone. It returns the names removed and loaded.
// Unlike the reference the whole reload holds the lock.
func (m *ModelMgr) Reload(configs []*servingconfig.ModelConfig) (removed, loaded []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.aliveLocked()
	fresh := map[string]bool{}
	for _, c := range configs {
		fresh[c.GetName()] = true
	}
	for _, name := range old {
		if !fresh[name] {
			removed = append(removed, name)
		}
	}
	_ = m.removeLocked(removed) // every name is loaded
	var load []*servingconfig.ModelConfig
	for _, c := range configs {
		if !slices.Contains(old, c.GetName()) {
			load = append(load, c)
			if !slices.Contains(loaded, c.GetName()) {
				loaded = append(loaded, c.GetName())
			}
		}
	}
	m.loadLocked(load)
	return removed, loaded
}

// AliveModelNames returns the models not being removed, sorted.
func (m *ModelMgr) AliveModelNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.aliveLocked()
}

func (m *ModelMgr) aliveLocked() []string {
	names := []string{}
	for name, model := range m.models {
		if !model.unloading {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Status answers GetModelStatus: every version of the model when spec names no version, else the
// version with that number or label. When nothing matches (or the model is unknown) it is one
// status of version -1 with error NOT_FOUND and message "<name> is not found".
func (m *ModelMgr) Status(spec *servingapis.ModelSpec) []*servingapis.ModelVersionStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*servingapis.ModelVersionStatus
	if model, ok := m.models[spec.GetName()]; ok {
		switch choice := spec.GetVersionChoice().(type) {
		case nil:
			for _, v := range model.versions {
				out = append(out, modelconfig.VersionStatus(v.Version, v.State, tfprotobuf.Code_OK, nil))
			}
		case *servingapis.ModelSpec_Version:
			if _, v := m.findVersion(model, choice.Version.GetValue()); v != nil {
				out = append(out, modelconfig.VersionStatus(v.Version, v.State, tfprotobuf.Code_OK, nil))
			}
		case *servingapis.ModelSpec_VersionLabel:
			for _, v := range model.versions {
				if v.VersionLabel != nil && *v.VersionLabel == choice.VersionLabel {
					out = append(out, modelconfig.VersionStatus(v.Version, v.State, tfprotobuf.Code_OK, nil))
					break
				}
			}
		}
	}
	if len(out) == 0 {
		msg := spec.GetName() + " is not found"
		out = append(out, modelconfig.VersionStatus(-1, StateUnknown, tfprotobuf.Code_NOT_FOUND, &msg))
	}
	return out
}

// Metadata answers GetModelMetadata: for each requested field that names an attribute of the
// model's ModelConf (model_name, base_path, version_policy, version_data, model_platform,
// signature_name), its value, then, when spec names a version the model has, the attributes of that
// ModelVersion (version, version_label, state). Values are what the reference holds: string, int64,
// nil (None), []int64 (a list) or Tuple; PyRepr formats them. No fields gives no metadata, even for
// an unknown model; otherwise an unknown model is an error of kind NotFound (the reference's
// KeyError).
func (m *ModelMgr) Metadata(spec *servingapis.ModelSpec, fields []string) (map[string]any, error) {
	out := map[string]any{}
	if len(fields) == 0 {
		return out, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	model, ok := m.models[spec.GetName()]
	if !ok {
		return nil, errkind.New(errkind.NotFound, "%s", pyfmt.StrRepr(spec.GetName()))
	}
	c := &model.conf
	for _, f := range fields {
		switch f {
		case "model_name":
			out[f] = c.ModelName
		case "base_path":
			out[f] = c.BasePath
		case "version_policy":
			out[f] = c.VersionPolicy
		case "version_data":
			out[f] = c.VersionData()
		case "model_platform":
			out[f] = c.ModelPlatform
		case "signature_name":
			out[f] = Tuple(slices.Clone(c.SignatureName))
		}
	}
	if choice, ok := spec.GetVersionChoice().(*servingapis.ModelSpec_Version); ok {
		if _, v := m.findVersion(model, choice.Version.GetValue()); v != nil {
			for _, f := range fields {
				switch f {
				case "version":
					out[f] = v.Version
				case "version_label":
					if v.VersionLabel == nil {
						out[f] = nil
					} else {
						out[f] = *v.VersionLabel
					}
				case "state":
					out[f] = int64(v.State)
				}
			}
		}
	}
	return out, nil
}

// Pending returns how many events are queued.
func (m *ModelMgr) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

// Step handles the oldest queued event and returns it; false when the queue is empty.
func (m *ModelMgr) Step() (Event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) == 0 {
		return Event{}, false
	}
	e := m.pop()
	m.handleLocked(e)
	return e, true
}

// Tick handles the events queued before the call (those they queue wait for the next tick), so
// each version moves at most one state per tick. It returns how many it handled.
func (m *ModelMgr) Tick() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.queue)
	for i := 0; i < n; i++ {
		m.handleLocked(m.pop())
	}
	return n
}

// Drain handles events until the queue is empty and returns how many it handled. It terminates:
// every event either does nothing or moves a version forward, and versions are only added by Load
// and NewVersion.
func (m *ModelMgr) Drain() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for len(m.queue) > 0 {
		m.handleLocked(m.pop())
		n++
	}
	return n
}

func (m *ModelMgr) pop() Event {
	e := m.queue[0]
	m.queue[0] = Event{}
	m.queue = m.queue[1:]
	if len(m.queue) == 0 {
		m.queue = nil // let the backing array go
	}
	return e
}

// NewVersion adds version last+1 to the model and queues its START, as the reference's poll loop
// does every 30 s for a random model. It returns the new version; false when the model is unknown,
// being removed, or under the specific policy (nothing happens then).
func (m *ModelMgr) NewVersion(name string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.newVersionLocked(name)
}

func (m *ModelMgr) newVersionLocked(name string) (int64, bool) {
	model, ok := m.models[name]
	if !ok || model.unloading || model.conf.VersionPolicy == PolicySpecific {
		return 0, false
	}
	var v int64 = 1
	if n := len(model.versions); n > 0 {
		v = model.versions[n-1].Version + 1
	}
	model.versions = append(model.versions, &ModelVersion{Version: v})
	m.log.Info("start load a new version of model", "model", name, "version", v)
	m.queue = append(m.queue, Event{name, v, StateStart})
	return v, true
}

// NewRandomVersion calls NewVersion for a model picked with r among those it applies to (alive,
// not specific). It returns the model and version; false when there is none.
func (m *ModelMgr) NewRandomVersion(r *rand.Rand) (string, int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for name, model := range m.models {
		if !model.unloading && model.conf.VersionPolicy != PolicySpecific {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", 0, false
	}
	sort.Strings(names)
	name := names[r.IntN(len(names))]
	v, ok := m.newVersionLocked(name)
	return name, v, ok
}

// Snapshot returns a copy of every model's state, by name.
func (m *ModelMgr) Snapshot() map[string]ModelSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]ModelSnapshot, len(m.models))
	for name, model := range m.models {
		s := ModelSnapshot{Conf: model.conf.clone(), Unloading: model.unloading}
		for _, v := range model.versions {
			s.Versions = append(s.Versions, *v)
		}
		out[name] = s
	}
	return out
}

func (m *ModelMgr) findVersion(model *modelMeta, version int64) (int, *ModelVersion) {
	for i, v := range model.versions {
		if v.Version == version {
			return i, v
		}
	}
	return -1, nil
}

// handleLocked is the reference's _event_handler.
func (m *ModelMgr) handleLocked(e Event) {
	model, ok := m.models[e.ModelName]
	if !ok {
		m.log.Error("model has been removed", "model", e.ModelName, "event", e.String())
		return
	}
	changed := false
	advance := func(from State, next State) {
		if _, v := m.findVersion(model, e.Version); v != nil && v.State == from {
			v.State = e.State
			changed = true
			if next != StateUnknown {
				m.queue = append(m.queue, Event{e.ModelName, e.Version, next})
			}
		}
	}
	switch e.State {
	case StateStart:
		advance(StateUnknown, StateLoading)
	case StateLoading:
		advance(StateStart, StateAvailable)
	case StateAvailable:
		advance(StateLoading, StateUnknown)
		// Latest-N eviction: UNLOADING for the oldest versions beyond N (the reference queues it
		// for the oldest one only, which is the same unless several versions arrived at once).
		// The all policy (NumVersions nil) keeps every version.
		if changed && model.conf.VersionPolicy == PolicyLatest && model.conf.NumVersions != nil {
			for i := 0; int64(len(model.versions)-i) > *model.conf.NumVersions; i++ {
				m.queue = append(m.queue, Event{e.ModelName, model.versions[i].Version, StateUnloading})
			}
		}
	case StateUnloading:
		if _, v := m.findVersion(model, e.Version); v != nil && v.State != StateUnloading && v.State != StateEnd {
			v.State = StateUnloading
			changed = true
			m.queue = append(m.queue, Event{e.ModelName, e.Version, StateEnd})
		}
	case StateEnd:
		// As in the reference the version is dropped whatever its state.
		if i, v := m.findVersion(model, e.Version); v != nil {
			if v.State == StateUnloading {
				v.State = StateEnd
				changed = true
			}
			model.versions = slices.Delete(model.versions, i, i+1)
			m.log.Info("version removed", "model", e.ModelName, "version", e.Version)
		}
		if len(model.versions) == 0 {
			delete(m.models, e.ModelName)
			m.log.Info("model removed", "model", e.ModelName)
		}
	default:
		m.log.Error("unknown event", "event", e.String())
	}
	if changed {
		m.log.Info("state changed", "model", e.ModelName, "version", e.Version, "state", e.State.String())
	}
}
