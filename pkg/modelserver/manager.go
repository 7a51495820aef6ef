package modelserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

// State is a model version's state, as GetModelStatus reports it.
type State = servingapis.ModelVersionStatus_State

// The states a version goes through: START (found, waiting for a load slot), LOADING, AVAILABLE,
// UNLOADING (no new requests; waiting for those in flight, then closing), END (unloaded, or failed
// to load: then with an error status).
const (
	StateStart     = servingapis.ModelVersionStatus_START
	StateLoading   = servingapis.ModelVersionStatus_LOADING
	StateAvailable = servingapis.ModelVersionStatus_AVAILABLE
	StateUnloading = servingapis.ModelVersionStatus_UNLOADING
	StateEnd       = servingapis.ModelVersionStatus_END
)

// maxEndedVersions bounds the ended versions a model keeps for GetModelStatus (a model under
// latest 1 with a new version every few minutes must not grow without end).
const maxEndedVersions = 8

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	// Loaders load the versions, by the models' sub-graph kind (KindOf).
	Loaders Loaders
	// LoadThreads bounds the versions loading at once; 0: no bound, every version loads in its own
	// goroutine, so a slow one holds back no other model.
	LoadThreads int
	// MaxLoadRetries is how many times a load failing for a reason that may pass (not
	// IsPermanent) is tried again, LoadRetryInterval apart.
	MaxLoadRetries    int
	LoadRetryInterval time.Duration
	// Logger receives state changes and failures; nil discards them.
	Logger *slog.Logger
	// Metrics, when set, count the loads.
	Metrics *Metrics
}

// Manager loads and unloads the versions of the configured models: TF Serving's
// AspiredVersionsManager with the file system source. Each sync lists every model's base path,
// picks the versions its policy serves (the aspired versions), starts loading the new ones, cancels
// the loads of versions no longer aspired and unloads the available ones once another aspired
// version is available (availability first, as TF Serving's default policy), or at once when the
// model has no aspired version left. It is safe for concurrent use.
type Manager struct {
	opts ManagerOptions
	log  *slog.Logger
	sem  chan struct{} // load slots; nil when unbounded

	syncMu sync.Mutex // one sync at a time: listing runs outside mu
	mu     sync.Mutex
	models map[string]*model
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // loads and unloads
}

type model struct {
	conf *servingconfig.ModelConfig
	kind string
	// removed is true once a reload dropped the model: its versions unload, and their END states
	// are still reported.
	removed bool
	// gen counts the model's config changes: a version that failed to load is tried again only
	// under a new config.
	gen      int
	versions map[int64]*version
	// found is the last listing of the base path under this config (listed: there was one);
	// failed are the versions of it that failed to load under this config. The latest policy
	// skips them (aspired), and their ended records are kept while they are on disk, so
	// GetModelStatus keeps reporting the failure.
	found  []modelconfig.VersionDir
	listed bool
	failed map[int64]bool
	// listErr is the last error listing the base path, missing the versions the config names that
	// are not there (each logged once until it changes).
	listErr, missing string
}

type version struct {
	num   int64
	dir   string
	gen   int
	state State
	// err is why the version ended without being asked to (a failed load).
	err error
	// aspired is whether the policy serves it.
	aspired  bool
	servable Servable
	// inflight counts the requests holding the servable; unloading waits for them.
	inflight sync.WaitGroup
	cancel   context.CancelFunc
	changed  time.Time
}

// NewManager returns a manager with no model.
func NewManager(opts ManagerOptions) *Manager {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, log: log, models: map[string]*model{}}
	if opts.LoadThreads > 0 {
		m.sem = make(chan struct{}, opts.LoadThreads)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// CheckConfig reports what is wrong with a model config list (a reload applying it would refuse
// it): a model without a name or base path, a name twice, a platform other than tensorflow.
func CheckConfig(configs []*servingconfig.ModelConfig) error {
	seen := map[string]bool{}
	for i, c := range configs {
		switch {
		case c.GetName() == "":
			return fmt.Errorf("model config %d has no name", i)
		case seen[c.GetName()]:
			return fmt.Errorf("model %q is configured twice", c.GetName())
		case c.GetBasePath() == "":
			return fmt.Errorf("model %q has no base_path", c.GetName())
		case c.GetModelPlatform() != "" && c.GetModelPlatform() != "tensorflow":
			return fmt.Errorf("model %q: platform %q is not served (tensorflow only)", c.GetName(), c.GetModelPlatform())
		}
		seen[c.GetName()] = true
	}
	return nil
}

// Reload makes configs the served models (HandleReloadConfigRequest): models not in it are
// removed (their versions unload), new ones added, changed ones take their new config. It then
// syncs with the file system, so the versions found are START or LOADING when it returns; it does
// not wait for loads (TF Serving waits for new models, and a reload can then hang for as long as a
// large shard loads). A bad config (CheckConfig) is refused whole, as an INVALID_ARGUMENT status.
func (m *Manager) Reload(configs []*servingconfig.ModelConfig) error {
	if err := CheckConfig(configs); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return status.Error(codes.Unavailable, "model server is stopping")
	}
	fresh := map[string]bool{}
	for _, c := range configs {
		fresh[c.GetName()] = true
		md, ok := m.models[c.GetName()]
		switch {
		case !ok:
			md = &model{versions: map[int64]*version{}}
			m.models[c.GetName()] = md
		case !md.removed && proto.Equal(md.conf, c):
			continue
		}
		md.conf, md.removed, md.listErr = proto.Clone(c).(*servingconfig.ModelConfig), false, ""
		md.kind = KindOf(c.GetName(), c.GetBasePath())
		md.gen++
		md.found, md.listed, md.failed = nil, false, nil
		m.log.Info("model configured", "model", c.GetName(), "base_path", c.GetBasePath(), "kind", md.kind, "policy", policyString(c))
	}
	for name, md := range m.models {
		if !fresh[name] && !md.removed {
			md.removed = true
			md.gen++
			m.log.Info("model removed from the config", "model", name)
		}
	}
	m.mu.Unlock()
	m.Sync()
	return nil
}

func policyString(c *servingconfig.ModelConfig) string {
	p := c.GetModelVersionPolicy()
	switch {
	case p.GetAll() != nil:
		return "all"
	case p.GetSpecific() != nil:
		return fmt.Sprintf("specific %v", p.GetSpecific().GetVersions())
	case p.GetLatest() != nil:
		return fmt.Sprintf("latest %d", p.GetLatest().GetNumVersions())
	}
	return "default (latest 1)"
}

// Sync lists every model's base path and applies what it finds (see Manager).
func (m *Manager) Sync() {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	type job struct {
		name    string
		md      *model
		gen     int
		conf    *servingconfig.ModelConfig
		removed bool
		found   []modelconfig.VersionDir
		err     error
	}
	var jobs []*job
	m.mu.Lock()
	for name, md := range m.models {
		jobs = append(jobs, &job{name: name, md: md, gen: md.gen, conf: md.conf, removed: md.removed})
	}
	m.mu.Unlock()
	// Listing may be slow (a network file system): no lock held.
	for _, j := range jobs {
		if !j.removed {
			j.found, j.err = modelconfig.VersionDirs(j.conf.GetBasePath())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, j := range jobs {
		md := j.md
		if m.models[j.name] != md || md.gen != j.gen {
			continue // reconfigured meanwhile: the next sync sees it
		}
		if md.removed {
			m.applyLocked(j.name, md, map[int64]string{})
			continue
		}
		if j.err != nil {
			// A base path that cannot be listed changes nothing (TF Serving skips it too): a
			// glitch of the file system must not unload what serves.
			if e := j.err.Error(); e != md.listErr {
				md.listErr = e
				m.log.Warn("cannot list the model's versions", "model", j.name, "base_path", md.conf.GetBasePath(), "err", j.err)
			}
			continue
		}
		if md.listErr != "" {
			m.log.Info("the model's versions can be listed again", "model", j.name, "base_path", md.conf.GetBasePath())
			md.listErr = ""
		}
		md.found, md.listed = j.found, true
		for num := range md.failed {
			if !slices.ContainsFunc(j.found, func(v modelconfig.VersionDir) bool { return v.Number == num }) {
				delete(md.failed, num) // gone from disk: nothing to report or skip
			}
		}
		want, missing := aspired(md.conf, j.found, md.failed)
		if msg := fmt.Sprint(missing); len(missing) > 0 && msg != md.missing {
			m.log.Warn("versions the config names are not on disk", "model", j.name, "versions", missing, "base_path", md.conf.GetBasePath())
		}
		md.missing = fmt.Sprint(missing)
		m.applyLocked(j.name, md, want)
	}
}

// applyLocked makes want (version -> directory) the model's aspired versions, then settles.
func (m *Manager) applyLocked(name string, md *model, want map[int64]string) {
	for _, v := range md.versions {
		_, v.aspired = want[v.num]
	}
	for num, dir := range want {
		if _, ok := md.versions[num]; !ok {
			// An ended placeholder: settle starts its load.
			md.versions[num] = &version{num: num, dir: dir, gen: md.gen, state: StateEnd, aspired: true, changed: time.Now()}
		}
	}
	m.settleLocked(name, md)
}

// reaspireLocked picks the model's aspired versions again from its last listing (a version failed
// to load: under the latest policy the next newest is aspired instead), then settles.
func (m *Manager) reaspireLocked(name string, md *model) {
	if md.removed || !md.listed {
		m.settleLocked(name, md)
		return
	}
	want, _ := aspired(md.conf, md.found, md.failed)
	m.applyLocked(name, md, want)
}

// settleLocked moves the model's versions toward their aspired state: it starts loading the
// aspired versions that have ended (new ones, unloaded ones asked for again, failed ones under a
// new config), cancels the loads of versions no longer aspired, and unloads the available ones
// that may go: all of them when the model has no aspired version and none failed, else once an
// aspired one is available (a failed new version leaves the old one serving). It also forgets the
// oldest ended versions beyond maxEndedVersions, but not those that failed under the current
// config and are still on disk.
func (m *Manager) settleLocked(name string, md *model) {
	if !m.closed {
		for num, v := range md.versions {
			if v.aspired && v.state == StateEnd && (v.err == nil || v.gen != md.gen) {
				nv := &version{num: num, dir: v.dir, gen: md.gen, state: StateStart, aspired: true, changed: time.Now()}
				md.versions[num] = nv
				m.startLoadLocked(name, md, nv)
			}
		}
	}
	// A version that failed counts as wanted: the old version keeps serving rather than none.
	anyAspired, aspiredServing := len(md.failed) > 0, false
	for _, v := range md.versions {
		if v.aspired {
			// Also one that failed: the old version keeps serving rather than none.
			anyAspired = true
			aspiredServing = aspiredServing || v.state == StateAvailable
		}
	}
	for _, v := range md.versions {
		if v.aspired {
			continue
		}
		switch v.state {
		case StateStart, StateLoading:
			v.cancel()
		case StateAvailable:
			if md.removed || m.closed || !anyAspired || aspiredServing {
				m.startUnloadLocked(name, v)
			}
		}
	}
	var ended []*version
	for _, v := range md.versions {
		if v.state == StateEnd && !v.aspired && !(md.failed[v.num] && v.err != nil) {
			ended = append(ended, v)
		}
	}
	if len(ended) > maxEndedVersions {
		slices.SortFunc(ended, func(a, b *version) int { return a.changed.Compare(b.changed) })
		for _, v := range ended[:len(ended)-maxEndedVersions] {
			delete(md.versions, v.num)
		}
	}
	if md.removed && len(md.versions) == 0 {
		delete(m.models, name)
	}
}

func (m *Manager) setStateLocked(name string, v *version, s State) {
	v.state, v.changed = s, time.Now()
	m.log.Info("version state", "model", name, "version", v.num, "state", s.String())
}

func (m *Manager) startLoadLocked(name string, md *model, v *version) {
	ctx, cancel := context.WithCancel(m.ctx)
	v.cancel = cancel
	src := Source{Model: name, Kind: md.kind, Version: v.num, Dir: v.dir}
	m.log.Info("version state", "model", name, "version", v.num, "state", StateStart.String(), "dir", v.dir)
	m.wg.Add(1)
	go m.load(ctx, md, v, src)
}

// load loads v in the background: waits for a slot, tries the loader (retrying what may pass),
// and leaves v AVAILABLE, or END with the error naming the directory.
func (m *Manager) load(ctx context.Context, md *model, v *version, src Source) {
	defer m.wg.Done()
	defer v.cancel()
	if m.sem != nil {
		select {
		case m.sem <- struct{}{}:
			defer func() { <-m.sem }()
		case <-ctx.Done():
			m.finishLoad(md, v, src, nil, ctx.Err(), 0)
			return
		}
	}
	m.mu.Lock()
	if ctx.Err() == nil {
		m.setStateLocked(src.Model, v, StateLoading)
	}
	m.mu.Unlock()
	start := time.Now()
	var s Servable
	var err error
	loader := m.opts.Loaders[src.Kind]
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if loader == nil {
			err = Permanent(fmt.Errorf("no loader for model %s (sub-graph kind %q; served: entry, ps_<i>)", src.Model, src.Kind))
			break
		}
		s, err = loader(ctx, src)
		if err == nil || IsPermanent(err) || attempt >= m.opts.MaxLoadRetries {
			break
		}
		m.log.Warn("load failed; retrying", "model", src.Model, "version", src.Version, "dir", src.Dir, "attempt", attempt+1, "retry_in", m.opts.LoadRetryInterval, "err", err)
		t := time.NewTimer(m.opts.LoadRetryInterval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	m.finishLoad(md, v, src, s, err, time.Since(start))
}

func (m *Manager) finishLoad(md *model, v *version, src Source, s Servable, err error, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cancelled := errors.Is(err, context.Canceled)
	if err == nil && (m.closed || !v.aspired) {
		err, cancelled = context.Canceled, true
	}
	switch {
	case err == nil:
		v.servable = s
		m.setStateLocked(src.Model, v, StateAvailable)
		m.opts.Metrics.load(src.Model, "ok", took)
	case cancelled:
		// Unloaded (or the server stopped) while loading: no failure.
		if s != nil {
			m.closeAsyncLocked(src.Model, v, s)
		}
		m.setStateLocked(src.Model, v, StateEnd)
		m.opts.Metrics.load(src.Model, "cancelled", took)
	default:
		v.err = fmt.Errorf("load %s version %d from %s: %w", src.Model, v.num, src.Dir, err)
		v.state, v.changed = StateEnd, time.Now()
		m.log.Error("version failed to load", "model", src.Model, "version", v.num, "dir", src.Dir, "err", err)
		m.opts.Metrics.load(src.Model, "error", took)
		if m.models[src.Model] == md && v.gen == md.gen && !md.removed {
			if md.failed == nil {
				md.failed = map[int64]bool{}
			}
			md.failed[v.num] = true
			m.reaspireLocked(src.Model, md)
			if isLatest(md.conf) {
				m.log.Warn("version skipped until the model's config changes: the newest versions that load are served",
					"model", src.Model, "version", v.num, "aspired", aspiredList(md))
			}
			return
		}
	}
	if m.models[src.Model] == md {
		m.settleLocked(src.Model, md)
	}
}

// aspiredList is the model's aspired versions, by number.
func aspiredList(md *model) []int64 {
	var out []int64
	for _, v := range md.versions {
		if v.aspired {
			out = append(out, v.num)
		}
	}
	slices.Sort(out)
	return out
}

// closeAsyncLocked closes a servable nobody holds, in the background.
func (m *Manager) closeAsyncLocked(name string, v *version, s Servable) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := s.Close(); err != nil {
			m.log.Warn("closing a servable", "model", name, "version", v.num, "err", err)
		}
	}()
}

func (m *Manager) startUnloadLocked(name string, v *version) {
	m.setStateLocked(name, v, StateUnloading)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		// No request can take the servable now (acquire wants AVAILABLE): wait for those in flight.
		v.inflight.Wait()
		err := v.servable.Close()
		m.mu.Lock()
		defer m.mu.Unlock()
		v.servable = nil
		if err != nil {
			m.log.Warn("closing a servable", "model", name, "version", v.num, "err", err)
		}
		m.setStateLocked(name, v, StateEnd)
		if md, ok := m.models[name]; ok && md.versions[v.num] == v {
			m.settleLocked(name, md)
		}
	}()
}

// Handle is a servable taken for a request; Release gives it back.
type Handle struct {
	Servable
	Model   string
	Version int64
	v       *version
	once    sync.Once
}

// Release ends the request's hold on the servable (once; later calls do nothing).
func (h *Handle) Release() { h.once.Do(h.v.inflight.Done) }

// Acquire takes the servable spec asks for: the version it names (by number or label), else the
// newest available one. It must be released. Errors are gRPC statuses: NOT_FOUND for a model or
// version that is not available, INVALID_ARGUMENT for an unknown label.
func (m *Manager) Acquire(spec *servingapis.ModelSpec) (*Handle, error) {
	name := spec.GetName()
	m.mu.Lock()
	defer m.mu.Unlock()
	md, ok := m.models[name]
	if !ok || md.removed {
		return nil, status.Errorf(codes.NotFound, "Servable not found for request: Latest(%s)", name)
	}
	want, err := wantedVersion(md, spec)
	if err != nil {
		return nil, err
	}
	var v *version
	if want != nil {
		if v = md.versions[*want]; v == nil || v.state != StateAvailable {
			return nil, status.Errorf(codes.NotFound, "Servable not found for request: Specific(%s, %d)", name, *want)
		}
	} else {
		for _, c := range md.versions {
			if c.state == StateAvailable && (v == nil || c.num > v.num) {
				v = c
			}
		}
		if v == nil {
			return nil, status.Errorf(codes.NotFound, "Servable not found for request: Latest(%s)", name)
		}
	}
	v.inflight.Add(1)
	return &Handle{Servable: v.servable, Model: name, Version: v.num, v: v}, nil
}

// wantedVersion is the version spec names, by number or by one of the model's labels; nil when it
// names none. An unknown label is an INVALID_ARGUMENT status.
func wantedVersion(md *model, spec *servingapis.ModelSpec) (*int64, error) {
	switch choice := spec.GetVersionChoice().(type) {
	case *servingapis.ModelSpec_Version:
		n := choice.Version.GetValue()
		return &n, nil
	case *servingapis.ModelSpec_VersionLabel:
		n, ok := md.conf.GetVersionLabels()[choice.VersionLabel]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "Unrecognized servable version label: %s", choice.VersionLabel)
		}
		return &n, nil
	}
	return nil, nil
}

// Status answers GetModelStatus: every version the model has (newest first, as TF Serving), or
// the one spec names. An unknown model or version is a NOT_FOUND status.
func (m *Manager) Status(spec *servingapis.ModelSpec) ([]*servingapis.ModelVersionStatus, error) {
	name := spec.GetName()
	m.mu.Lock()
	defer m.mu.Unlock()
	md, ok := m.models[name]
	if !ok || len(md.versions) == 0 {
		return nil, status.Errorf(codes.NotFound, "Could not find any versions of model %s", name)
	}
	want, err := wantedVersion(md, spec)
	if err != nil {
		return nil, err
	}
	var out []*servingapis.ModelVersionStatus
	for _, v := range md.versions {
		if want != nil && v.num != *want {
			continue
		}
		out = append(out, versionStatus(v))
	}
	if len(out) == 0 {
		return nil, status.Errorf(codes.NotFound, "Could not find version %d of model %s", *want, name)
	}
	slices.SortFunc(out, func(a, b *servingapis.ModelVersionStatus) int { return cmp.Compare(b.GetVersion(), a.GetVersion()) })
	return out, nil
}

func versionStatus(v *version) *servingapis.ModelVersionStatus {
	if v.err == nil {
		return modelconfig.VersionStatus(v.num, v.state, tfprotobuf.Code_OK, nil)
	}
	msg := v.err.Error()
	return modelconfig.VersionStatus(v.num, v.state, tfprotobuf.Code(StatusOf(v.err).Code()), &msg)
}

// VersionInfo describes one version, for status pages and metrics.
type VersionInfo struct {
	Model   string
	Version int64
	Dir     string
	State   State
	// Err is why a version ended without being asked to (a failed load).
	Err error
}

// Versions lists every model's versions, by model name then version.
func (m *Manager) Versions() []VersionInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []VersionInfo
	for name, md := range m.models {
		for _, v := range md.versions {
			out = append(out, VersionInfo{Model: name, Version: v.num, Dir: v.dir, State: v.state, Err: v.err})
		}
	}
	slices.SortFunc(out, func(a, b VersionInfo) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Version, b.Version))
	})
	return out
}

// Config is the model config the model is served under (a copy), or nil.
func (m *Manager) Config(name string) *servingconfig.ModelConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	if md, ok := m.models[name]; ok && !md.removed {
		return proto.Clone(md.conf).(*servingconfig.ModelConfig)
	}
	return nil
}

// Close stops the manager: loads are cancelled, available versions unloaded (once the requests
// holding them return) and closed. It waits until all of that is done or ctx ends.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		m.cancel()
		for name, md := range m.models {
			for _, v := range md.versions {
				v.aspired = false
			}
			m.settleLocked(name, md)
		}
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("model server: unloading: %w", ctx.Err())
	}
}

// available counts the model's available versions.
func (m *Manager) available(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if md, ok := m.models[name]; ok {
		for _, v := range md.versions {
			if v.state == StateAvailable {
				n++
			}
		}
	}
	return n
}
