package zkmirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/zk"
)

// ReportResource writes r as the ephemeral node /{bzid}/resource/{shard_id}:{replica_id}.
func (m *Mirror) ReportResource(ctx context.Context, r datadef.ResourceSpec) error {
	return m.Create(ctx, r.Path(m.resourcePath), r.Serialize(), zk.CreateOptions{Ephemeral: true, MakePath: true})
}

// Resources returns the mirrored ResourceSpecs (see WatchResource), in mirror order; nodes that
// cannot be decoded are skipped and logged.
func (m *Mirror) Resources() []datadef.ResourceSpec {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []datadef.ResourceSpec{}
	for _, child := range m.data.children(m.resourcePath) {
		e := m.data.entry(zk.Join(m.resourcePath, child))
		if e == nil {
			continue // a deeper node: the reference would have failed on None
		}
		d, ok := valueOf[datadef.ResourceSpec](e)
		if !ok {
			m.log.Warn("resources: bad ResourceSpec, skipped", "path", e.path, "err", d.err)
			continue
		}
		out = append(out, cloneResource(d.v))
	}
	return out
}

// replicaCountsLocked counts, per replica id, the mirrored resource nodes {shard}:{replica}
// (entries, replica -1, are left out).
func (m *Mirror) replicaCountsLocked() map[int]int {
	counts := map[int]int{}
	m.data.under(m.resourcePath, func(rel string, _ *entry) {
		if strings.Contains(rel, "/") {
			return
		}
		id, err := pyint.Atoi(rel[strings.LastIndexByte(rel, ':')+1:])
		if err != nil {
			m.log.Debug("resource node without a replica id, skipped", "name", rel)
			return
		}
		if id != -1 {
			counts[id]++
		}
	})
	return counts
}

// NumTCEReplica waits until every replica that reported resources has reported them for all
// NumTCEShard shards, then returns the number of replicas (0 when none reported). It waits on
// the mirror's changes (WatchResource must run), logging every WaitLogInterval, and returns
// ctx's error or ErrStopped when those end first.
//
// The reference's num_tce_replica never worked: its counting helper returned nothing and it
// returned an undefined name; it also compared each count with tce_shard_id instead of
// num_tce_shard.
func (m *Mirror) NumTCEReplica(ctx context.Context) (int, error) {
	ticker := time.NewTicker(m.waitLog)
	defer ticker.Stop()
	for {
		m.mu.RLock()
		counts := m.replicaCountsLocked()
		changed := m.changed
		m.mu.RUnlock()
		complete := true
		for _, n := range counts {
			if n != m.numShard {
				complete = false
				break
			}
		}
		if complete {
			return len(counts), nil
		}
		select {
		case <-changed:
		case <-ticker.C:
			m.log.Info("cluster autoscaler or broken node, keep waiting", "shards_per_replica", fmt.Sprint(counts))
		case <-ctx.Done():
			return 0, fmt.Errorf("zkmirror: num_tce_replica: %w", context.Cause(ctx))
		case <-m.ctx.Done():
			return 0, ErrStopped
		}
	}
}
