package replica

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// DefaultVersionCheckInterval is the reference's period of the version metrics (_watch_update
// sleeps 60 s).
const DefaultVersionCheckInterval = 60 * time.Second

// GlobalMetricsPrefix is the prefix of the global metrics client.
const GlobalMetricsPrefix = "data.monolith_serving.global"

// Metrics receives stored values (the reference's metrics cli emit_store). A client that also has
// Flush() gets it after each model's values.
type Metrics interface {
	EmitStore(name string, value int64, tags map[string]string)
}

// MetricsPrefix is the prefix of the per-model metrics client: MONOLITH_METRIC_PREFIX (MLP), else
// TCE_PSM (Byterec), else data.monolith_serving.{base_name}.
func MetricsPrefix(env agentconf.LookupEnv, baseName string) string {
	if p, ok := env("MONOLITH_METRIC_PREFIX"); ok {
		return p
	}
	if p, ok := env("TCE_PSM"); ok {
		return p
	}
	return "data.monolith_serving." + baseName
}

// versionState remembers, per model, the latest version seen and when it was first seen.
type versionState struct {
	latest     map[string]int64
	lastUpdate map[string]int64 // unix seconds
}

func newVersionState() versionState {
	return versionState{latest: map[string]int64{}, lastUpdate: map[string]int64{}}
}

// CheckVersions emits the version metrics of each model (the reference's _check_version):
// serving_model.latest_version, serving_model.since_last_update (global client, seconds since the
// latest version appeared) and serving_model.update_ts (when a newer version appears), tagged
// with model_name, idc ("{idc}:{cluster}"), replica_id, shard_id and base_name. A model whose
// status cannot be read is skipped (the reference gave up on the round); the errors are joined.
func (u *Updater) CheckVersions(ctx context.Context) error {
	if u.opts.Metrics == nil {
		return nil
	}
	var errs []error
	for _, name := range u.ModelNames() {
		if err := u.checkVersion(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("check version of %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (u *Updater) checkVersion(ctx context.Context, name string) error {
	rctx, cancel := context.WithTimeout(ctx, u.opts.CallTimeout)
	statuses, err := u.status.VersionStatus(rctx, name, modelconfig.Version{}, nil)
	cancel()
	if err != nil {
		return err
	}
	if len(statuses) == 0 {
		return nil
	}
	latest := latestStatus(statuses)
	if latest.GetStatus().GetErrorCode() != tfprotobuf.Code_OK {
		return errkind.New(errkind.Generic, "%s", latest.GetStatus().GetErrorMessage())
	}
	version := latest.GetVersion()
	tags := map[string]string{
		"model_name": name,
		"idc":        pyfmt.OptStr(u.conf.IDC()) + ":" + pyfmt.OptStr(u.conf.Cluster()),
		"replica_id": strconv.Itoa(u.ReplicaID()),
		"shard_id":   strconv.Itoa(u.shardID),
		"base_name":  pyfmt.OptStr(u.conf.BaseName),
	}
	now := u.opts.Now().Unix()
	u.opts.Metrics.EmitStore("serving_model.latest_version", version, tags)
	u.mu.Lock()
	last, seen := u.versions.lastUpdate[name]
	prev, known := u.versions.latest[name]
	newer := !known || prev < version
	if newer {
		u.versions.latest[name] = version
		u.versions.lastUpdate[name] = now
	}
	u.mu.Unlock()
	if seen && u.opts.GlobalMetrics != nil {
		u.opts.GlobalMetrics.EmitStore("serving_model.since_last_update", now-last, tags)
	}
	if newer {
		u.opts.Metrics.EmitStore("serving_model.update_ts", now, tags)
	}
	if f, ok := u.opts.Metrics.(interface{ Flush() }); ok {
		f.Flush()
	}
	return nil
}

func (u *Updater) versionLoop(ctx context.Context) {
	defer u.wg.Done()
	t := time.NewTicker(u.opts.VersionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := u.CheckVersions(ctx); err != nil && ctx.Err() == nil {
			u.log.Warn("version metrics failed", "err", err)
		}
	}
}
