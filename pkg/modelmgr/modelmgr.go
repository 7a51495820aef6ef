// Package modelmgr is the Go port of monolith/agent_service/model_manager.py: it copies the latest
// exported version of a model from the p2p download area (the source path) to the local serving
// area (the receive path) that TensorFlow Serving polls, and keeps only the newest versions there.
//
// # Layout
//
// The source path holds, at its top level, one directory per downloaded version and a marker file
// that the downloader writes when the version is complete:
//
//	<source>/<model>@<version>/<model>/<sub_model>/<version>/...   the exported sub models
//	<source>/<model>@<version>.write.done                        the download is complete
//	<source>/<model>@<version>.read.lock                         written here while we read it
//
// and each sub model is copied to
//
//	<receive>/<model>/<sub_model>/<version>/...
//
// exactly as the reference does: the same marker and lock names, the same choice of version (the
// greatest version string among the complete downloads whose marker starts with the model name,
// compared as strings, as Python compares them), the same retention (the newest RemainVersionNum
// versions per model).
//
// # Better than the reference
//
// A version is copied into "<receive>/<model>/<sub_model>/<version>-temp" (a name TF Serving
// ignores: not a number) and renamed to its final name only when all sub models of the version are
// complete, so TF Serving never sees a half-copied version (tensorflow/serving#1086, the reason the
// markers exist). Nothing is fsynced: the page cache is shared by all processes, so a crash of the
// agent leaves TF Serving reading complete files, and after a crash of the machine Start deletes
// the receive path before TF Serving (a child of the agent) runs again, so a version torn by the
// crash is never loaded; waiting for the disk would halve the copy rate for nothing. A leftover
// temp directory is never trusted (the reference renamed it into place as if complete); it is
// copied again. A failure anywhere removes everything the attempt created under a version name.
// Old versions are renamed away before they are deleted, so a version being deleted is never seen
// half-deleted either.
//
// Bad input (a missing source directory, an unparsable "<model>@<version>" name, unreadable files)
// is logged with log/slog naming the path and the loop carries on. The loop takes a context and
// stops promptly on cancellation or Stop; no goroutine outlives Stop.
package modelmgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Marker and lock suffixes, as in the reference (ModelManager.WRITE_DONE / READ_LOCK).
const (
	// WriteDone ends the name of the file that marks "<model>@<version>" as completely downloaded.
	WriteDone = ".write.done"
	// ReadLock ends the name of the file that tells the downloader "<model>@<version>" is being read.
	ReadLock = ".read.lock"
	// TempSuffix ends the name a version is copied under before it is renamed into place.
	TempSuffix = "-temp"
	// MetricsPrefix is the metrics prefix the reference emits under (use_metrics=True).
	MetricsPrefix = "data.monolith_serving.online"
)

// Defaults, as in the reference.
const (
	DefaultWaitTimeout      = 1200 * time.Second // _wait_timeout
	DefaultLoopInterval     = 30 * time.Second   // _loop_interval
	DefaultPollInterval     = 10 * time.Second   // the sleeps of wait_for_download and _start
	DefaultRemainVersionNum = 5                  // _remain_version_num
)

// ErrStopped is returned by Start (and the waits inside it) when Stop was called.
var ErrStopped = errors.New("model manager stopped")

// Metrics receives the metrics the reference emits when use_metrics is set (its client for
// MetricsPrefix).
type Metrics interface {
	EmitCounter(name string, value int64, tags map[string]string)
	EmitStore(name string, value int64, tags map[string]string)
}

// Config configures a Manager. Zero durations and counts mean the reference's defaults.
type Config struct {
	// ModelName is the model to manage; "" (Python None) means no model manager is needed: Start
	// returns at once. Download markers are matched by prefix, as in the reference.
	ModelName string
	// SourcePath is the p2p download directory.
	SourcePath string
	// ReceivePath is the directory TF Serving loads models from.
	ReceivePath string
	// WaitTimeout bounds how long Start waits for the source path and a first complete download.
	WaitTimeout time.Duration
	// LoopInterval is the pause between two rounds of the background loop.
	LoopInterval time.Duration
	// PollInterval is the pause between two checks while Start waits for a download or retries.
	PollInterval time.Duration
	// RemainVersionNum is how many versions per model are kept in the receive path.
	RemainVersionNum int
	// CopyWorkers is how many files are copied at once (default: 16).
	CopyWorkers int
	// ProgressInterval is how often a model copy in progress is logged (default
	// DefaultProgressInterval).
	ProgressInterval time.Duration
	// Metrics, when set, receives the update-delay metrics after each round (use_metrics=True).
	Metrics Metrics
	// Logger receives the log records (default: slog.Default()).
	Logger *slog.Logger
}

// Version is one copied version of a model: its version string and the receive paths of its sub
// models, "<receive>/<model>/<sub_model>/<version>".
type Version struct {
	Version string
	Paths   []string
}

// Latest is the newest copied version of a model and when it was copied.
type Latest struct {
	Version    string
	UpdateTime time.Time
}

// Manager copies model versions from the source path to the receive path. Its methods are safe for
// concurrent use; the filesystem operations (LoopOnce, RemoveReadLocks, RemoveOldFiles) run one at
// a time.
type Manager struct {
	cfg Config
	log *slog.Logger

	// copyFile copies one regular file; tests replace it to inject failures.
	copyFile func(ctx context.Context, src, dst string, info fs.FileInfo) error

	op sync.Mutex // serializes the filesystem operations

	mu        sync.Mutex // guards the fields below
	models    map[string][]Version
	latest    map[string]Latest
	lockFiles map[string]struct{}
	orphans   []string // old versions whose deletion failed, retried by RemoveOldFiles
	started   bool
	done      chan struct{} // closed when the loop started by Start has returned

	stopCtx context.Context // cancelled by Stop
	stop    context.CancelFunc
}

// New returns a Manager for cfg. A negative duration or count is a Value error, as is a model name
// without both paths.
func New(cfg Config) (*Manager, error) {
	for name, d := range map[string]time.Duration{"WaitTimeout": cfg.WaitTimeout,
		"LoopInterval": cfg.LoopInterval, "PollInterval": cfg.PollInterval, "ProgressInterval": cfg.ProgressInterval} {
		if d < 0 {
			return nil, errkind.New(errkind.Value, "modelmgr: %s must not be negative, got %v", name, d)
		}
	}
	if cfg.RemainVersionNum < 0 || cfg.CopyWorkers < 0 {
		return nil, errkind.New(errkind.Value, "modelmgr: RemainVersionNum and CopyWorkers must not be negative, got %d and %d",
			cfg.RemainVersionNum, cfg.CopyWorkers)
	}
	if cfg.ModelName != "" && (cfg.SourcePath == "" || cfg.ReceivePath == "") {
		return nil, errkind.New(errkind.Value, "modelmgr: model %q needs a source path and a receive path", cfg.ModelName)
	}
	setDefault(&cfg.WaitTimeout, DefaultWaitTimeout)
	setDefault(&cfg.LoopInterval, DefaultLoopInterval)
	setDefault(&cfg.PollInterval, DefaultPollInterval)
	setDefault(&cfg.RemainVersionNum, DefaultRemainVersionNum)
	setDefault(&cfg.CopyWorkers, 16)
	setDefault(&cfg.ProgressInterval, DefaultProgressInterval)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	stopCtx, stop := context.WithCancel(context.Background())
	return &Manager{
		stopCtx:   stopCtx,
		stop:      stop,
		cfg:       cfg,
		log:       cfg.Logger.With("component", "modelmgr", "model", cfg.ModelName),
		copyFile:  copyRegularFile,
		models:    map[string][]Version{},
		latest:    map[string]Latest{},
		lockFiles: map[string]struct{}{},
	}, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Config returns the configuration in effect (defaults filled in).
func (m *Manager) Config() Config { return m.cfg }

// Start prepares the receive path and starts the background loop, as the reference's start: it
// deletes the receive path, waits (up to WaitTimeout) for the source path and a complete download
// of the model, copies the latest version (retrying every PollInterval until a round succeeds),
// removes the read locks and starts the loop in a goroutine. With no model name it does nothing.
//
// ctx bounds the whole life of the manager: cancelling it stops the waits and the loop, as Stop
// does. Call Stop to wait for the loop to finish.
func (m *Manager) Start(ctx context.Context) (err error) {
	if m.cfg.ModelName == "" {
		m.log.Info("model manager is not needed")
		return nil
	}
	m.mu.Lock()
	switch {
	case m.stopCtx.Err() != nil:
		m.mu.Unlock()
		return errkind.New(errkind.Runtime, "model manager start: %w", ErrStopped)
	case m.started:
		m.mu.Unlock()
		return errkind.New(errkind.Runtime, "model manager start: already started")
	}
	m.started = true
	m.mu.Unlock()

	ctx, release := m.bind(ctx)
	defer func() {
		if err != nil {
			release()
		}
	}()
	if err := Delete(m.cfg.ReceivePath); err != nil {
		m.log.Error("model manager start failed", "path", m.cfg.ReceivePath, "err", err)
		return fmt.Errorf("model manager start: clear receive path: %w", err)
	}
	if err := m.WaitForDownload(ctx); err != nil {
		m.log.Error("model manager start failed", "err", err)
		return fmt.Errorf("model manager start: %w", err)
	}
	for {
		err := m.LoopOnce(ctx)
		if err == nil {
			break
		}
		m.log.Error("model manager loop once failed, waiting for a ready model", "err", err)
		if err := sleep(ctx, m.cfg.PollInterval); err != nil {
			return fmt.Errorf("model manager start: %w", err)
		}
	}
	if err := m.RemoveReadLocks(); err != nil {
		m.log.Error("remove read locks failed", "err", err)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	// stopCtx is checked under mu: Stop cancels it before it looks for the loop to wait for, so
	// either the loop is not started or Stop waits for it.
	if m.stopCtx.Err() != nil {
		return errkind.New(errkind.Runtime, "model manager start: %w", ErrStopped)
	}
	if err := alive(ctx); err != nil {
		return fmt.Errorf("model manager start: %w", err)
	}
	done := make(chan struct{})
	m.done = done
	go func() {
		defer close(done)
		defer release()
		m.Run(ctx)
	}()
	return nil
}

// Stop stops the background loop (and any wait or copy of Start, LoopOnce or Run) and waits until
// the loop started by Start has returned. A copy in progress is abandoned and its temp directory
// removed. Stop may be called more than once, and before or without Start; a stopped Manager does
// not start again.
func (m *Manager) Stop() {
	m.stop()
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Run is the background loop (the reference's run): a round, the read locks removed, the metrics
// emitted, a pause of LoopInterval, the old versions removed; until ctx is cancelled or Stop is
// called. Failures are logged and the loop carries on.
func (m *Manager) Run(ctx context.Context) {
	ctx, release := m.bind(ctx)
	defer release()
	for alive(ctx) == nil {
		if err := m.LoopOnce(ctx); err != nil {
			m.log.Error("model manager loop once failed", "err", err)
		}
		if err := m.RemoveReadLocks(); err != nil {
			m.log.Error("remove read locks failed", "err", err)
		}
		if m.cfg.Metrics != nil {
			m.CheckModelUpdateTime(time.Now())
		}
		if sleep(ctx, m.cfg.LoopInterval) != nil {
			return
		}
		if err := m.RemoveOldFiles(); err != nil {
			m.log.Error("remove old versions failed", "err", err)
		}
	}
}

// bind returns ctx, also cancelled (with cause ErrStopped) by Stop, and the function releasing it.
func (m *Manager) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unregister := context.AfterFunc(m.stopCtx, func() { cancel(ErrStopped) })
	return ctx, func() {
		unregister()
		cancel(nil)
	}
}

// alive returns nil while ctx is not done, else why it is (ErrStopped after Stop).
func alive(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return errkind.New(errkind.Runtime, "model manager: %w", context.Cause(ctx))
}

// sleep waits d, or less when ctx is done (then it says why).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return alive(ctx)
	}
}

// LoopOnce is one round (the reference's loop_once): it scans the source path (writing read locks,
// see SourceData) and copies, for each model found, its latest complete version when it is newer
// (as a string) than the newest one copied. It returns nil when every copy it attempted succeeded,
// including when there was nothing to copy, and an error when the source path cannot be read or a
// copy failed; a failed copy leaves nothing under the version's name.
func (m *Manager) LoopOnce(ctx context.Context) error {
	m.op.Lock()
	defer m.op.Unlock()
	ctx, release := m.bind(ctx)
	defer release()
	source, err := m.sourceData()
	if err != nil {
		m.log.Error("get download data failed", "path", m.cfg.SourcePath, "err", err)
		return fmt.Errorf("loop once: %w", err)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(source)) {
		if err := alive(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		sv := source[name]
		if old, ok := m.newestCopied(name); ok && old >= sv.Version {
			continue
		}
		paths, err := m.copyModel(ctx, name, sv.Version, sv.SubModels)
		if err != nil {
			m.log.Error("copy model failed", "model_name", name, "version", sv.Version, "err", err)
			errs = append(errs, fmt.Errorf("copy %s@%s: %w", name, sv.Version, err))
			continue
		}
		m.mu.Lock()
		m.models[name] = append(m.models[name], Version{Version: sv.Version, Paths: paths})
		m.latest[name] = Latest{Version: sv.Version, UpdateTime: time.Now()}
		m.mu.Unlock()
		m.log.Info("model updated", "model_name", name, "version", sv.Version)
	}
	if len(errs) > 0 {
		return fmt.Errorf("loop once: %w", errors.Join(errs...))
	}
	return nil
}

func (m *Manager) newestCopied(model string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.models[model]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1].Version, true
}

// CopyModel copies the sub models of one version to "<receive>/<model>/<sub_model>/<version>"
// atomically (see the package doc) and returns those paths, in the order of subModels. A sub model
// whose final directory already exists is taken as copied, as in the reference. On failure nothing
// is left under any final name and the temp directories are removed.
func (m *Manager) CopyModel(ctx context.Context, model, version string, subModels []SubModel) ([]string, error) {
	m.op.Lock()
	defer m.op.Unlock()
	ctx, release := m.bind(ctx)
	defer release()
	return m.copyModel(ctx, model, version, subModels)
}

// Models returns, per model, the copied versions still kept, oldest first (the reference's _models).
func (m *Manager) Models() map[string][]Version {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]Version, len(m.models))
	for name, vs := range m.models {
		cp := make([]Version, len(vs))
		for i, v := range vs {
			cp[i] = Version{Version: v.Version, Paths: append([]string(nil), v.Paths...)}
		}
		out[name] = cp
	}
	return out
}

// LatestVersions returns, per model, the newest copied version and when it was copied (the
// reference's _latest_models).
func (m *Manager) LatestVersions() map[string]Latest {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Latest, len(m.latest))
	for k, v := range m.latest {
		out[k] = v
	}
	return out
}

// RemoveOldFiles deletes the oldest copied versions of each model beyond RemainVersionNum (the
// reference's remove_old_file, which drops one per call; the loop adds at most one per round, so
// the result is the same). A version is renamed away before it is deleted. Paths that could not be
// deleted are retried on the next call; the error joins the failures.
func (m *Manager) RemoveOldFiles() error {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	todo := m.orphans
	m.orphans = nil
	for _, name := range slices.Sorted(maps.Keys(m.models)) {
		vs := m.models[name]
		for len(vs) > m.cfg.RemainVersionNum {
			todo = append(todo, vs[0].Paths...)
			vs = vs[1:]
		}
		m.models[name] = vs
	}
	m.mu.Unlock()

	var errs []error
	var failed []string
	for _, p := range todo {
		if err := retire(p); err != nil {
			m.log.Error("delete old version failed", "path", p, "err", err)
			errs = append(errs, err)
			failed = append(failed, p)
			continue
		}
		m.log.Info("deleted old version", "path", p)
	}
	if len(failed) > 0 {
		m.mu.Lock()
		m.orphans = append(m.orphans, failed...)
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

// CheckModelUpdateTime emits the reference's metrics for the managed model: "version.delay" (now
// minus the version, read as Unix seconds) and "update.delay" (now minus the copy time) as stores,
// or the counter "loop_once_failed" when no version was copied yet. It does nothing without
// Config.Metrics. A version that is not a number is logged and its delay skipped (the reference's
// thread died on it).
func (m *Manager) CheckModelUpdateTime(now time.Time) {
	if m.cfg.Metrics == nil {
		return
	}
	tags := map[string]string{"model": m.cfg.ModelName}
	m.mu.Lock()
	l, ok := m.latest[m.cfg.ModelName]
	m.mu.Unlock()
	if !ok {
		m.log.Error("model not in latest models")
		m.cfg.Metrics.EmitCounter("loop_once_failed", 1, tags)
		return
	}
	cur := now.Unix()
	if v, err := pyint.Parse(l.Version); err != nil {
		m.log.Error("version is not a number, version.delay not emitted", "version", l.Version)
	} else {
		m.cfg.Metrics.EmitStore("version.delay", cur-v, tags)
	}
	m.cfg.Metrics.EmitStore("update.delay", cur-l.UpdateTime.Unix(), tags)
}
