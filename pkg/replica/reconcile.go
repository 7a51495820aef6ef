package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// scanned is one replica node read by a reconciliation.
type scanned struct {
	meta  datadef.ReplicaMeta
	czxid int64
	bad   bool // empty or unreadable payload
}

// scan is the tree under the prefix as a reconciliation read it.
type scan struct {
	parents  []string // idc:cluster paths (the first nIDC), then task paths
	nIDC     int
	replicas map[string]scanned // cache key (task path/replica key) -> node
}

// pollLoop runs Reconcile every PollInterval until ctx ends (Stop), skipping rounds while paused.
func (w *Watcher) pollLoop(ctx context.Context, gen uint64) {
	defer w.wg.Done()
	t := time.NewTicker(w.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		skip := w.pollPaused || w.gen != gen
		w.mu.Unlock()
		if skip {
			continue
		}
		if err := w.Reconcile(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("replica reconciliation failed", "prefix", w.prefix, "err", err)
		}
	}
}

// Reconcile reads the whole tree under the prefix (the reference's _poll, in parallel) and makes
// the cache match it, except for the replicas a watch changed while it was reading, whose watch
// news is newer. Parents found without a watch get one. When OwnPaths and OnOwnMissing are set,
// own replica nodes that are missing are reported. Nothing changes when a read fails.
func (w *Watcher) Reconcile(ctx context.Context) error {
	w.reconcileMu.Lock()
	defer w.reconcileMu.Unlock()
	w.mu.Lock()
	if !w.running {
		w.mu.Unlock()
		return errkind.New(errkind.Runtime, "replica watcher: not started")
	}
	gen := w.gen
	w.touched = map[string]struct{}{}
	w.mu.Unlock()

	sc, err := w.scan(ctx)
	var own []string
	if err == nil && w.opts.OwnPaths != nil && w.opts.OnOwnMissing != nil {
		own = w.opts.OwnPaths()
	}
	w.mu.Lock()
	touched := w.touched
	w.touched = nil
	if err != nil || w.gen != gen {
		w.mu.Unlock()
		return err
	}
	w.applyLocked(sc, touched)
	var missing []string
	for _, p := range own {
		task, key, ok := splitReplicaPath(p)
		k := task + "/" + key
		if _, seen := sc.replicas[k]; ok && !seen {
			if _, changed := touched[k]; !changed {
				missing = append(missing, p)
			}
		}
	}
	w.mu.Unlock()

	var errs []error
	for i, p := range sc.parents {
		level := levelReplica
		if i < sc.nIDC {
			level = levelTask
		}
		if s, ok := w.reserve(gen, p); ok {
			errs = append(errs, w.startChildren(gen, p, s, level))
		}
	}
	if len(missing) > 0 {
		w.log.Warn("own replica nodes are missing", "paths", missing)
		w.opts.OnOwnMissing(missing)
	}
	return errors.Join(errs...)
}

// applyLocked makes the cache match sc for every key not in touched.
func (w *Watcher) applyLocked(sc *scan, touched map[string]struct{}) {
	for task, t := range w.cache.tasks {
		for key := range t.replicas {
			k := task + "/" + key
			if _, changed := touched[k]; changed {
				continue
			}
			if _, ok := sc.replicas[k]; !ok {
				w.cache.remove(task, key)
			}
		}
	}
	for k, r := range sc.replicas {
		if _, changed := touched[k]; changed {
			continue
		}
		task, key, _ := splitReplicaPath(k)
		if r.bad {
			w.cache.markUnknown(task, key)
		} else {
			w.cache.put(task, key, r.meta, r.czxid)
		}
	}
}

// scan reads the tree: the task paths, their replica nodes, each node's data, every level in
// parallel.
func (w *Watcher) scan(ctx context.Context) (*scan, error) {
	sc := &scan{replicas: map[string]scanned{}}
	tasks, err := w.childPaths(ctx, []string{w.prefix}, nil)
	if err != nil {
		return nil, err
	}
	if w.conf.DCAware {
		// The prefix's children are the idc:cluster paths; the tasks are one level down.
		sc.parents, sc.nIDC = tasks, len(tasks)
		if tasks, err = w.childPaths(ctx, sc.parents, nil); err != nil {
			return nil, err
		}
	}
	sc.parents = append(sc.parents, tasks...)

	paths, err := w.childPaths(ctx, tasks, func(name string) bool {
		_, ok := replicaKey(name)
		return ok
	})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	err = parallel(ctx, len(paths), w.opts.Parallelism, func(ctx context.Context, i int) error {
		cctx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
		defer cancel()
		data, st, err := w.zk.Get(cctx, paths[i])
		if errors.Is(err, zk.ErrNoNode) {
			return nil // deleted since it was listed
		}
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		r := scanned{czxid: st.Czxid, bad: len(data) == 0}
		if !r.bad {
			var derr error
			if r.meta, derr = datadef.DeserializeReplicaMeta(data); derr != nil {
				r.bad = true
				w.log.Warn("unreadable replica node", "path", paths[i], "err", derr)
			}
		}
		task, key, _ := splitReplicaPath(paths[i])
		mu.Lock()
		// Of two nodes naming one replica (1 and 00000000001) the newer counts, as in the cache.
		if prev, seen := sc.replicas[task+"/"+key]; !seen || r.czxid >= prev.czxid {
			sc.replicas[task+"/"+key] = r
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// childPaths lists the children of parents in parallel and returns their paths, parent by parent,
// leaving out the names keep rejects (none when keep is nil).
func (w *Watcher) childPaths(ctx context.Context, parents []string, keep func(name string) bool) ([]string, error) {
	lists := make([][]string, len(parents))
	err := parallel(ctx, len(parents), w.opts.Parallelism, func(ctx context.Context, i int) error {
		var err error
		lists[i], err = w.children(ctx, parents[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for i, names := range lists {
		for _, name := range names {
			if keep == nil || keep(name) {
				out = append(out, parents[i]+"/"+name)
			}
		}
	}
	return out, nil
}

// children lists path's children; a missing node has none.
func (w *Watcher) children(ctx context.Context, path string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	defer cancel()
	names, err := w.zk.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return names, nil
}

// parallel runs fn(ctx, 0..n-1), at most limit at a time, and returns the first error (the
// others are cancelled and the rest is not started) or ctx's.
func parallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	early := false
	for i := range n {
		if early = gctx.Err() != nil; early {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil || !early {
		return err
	}
	return ctx.Err() // stopped by ctx, not by fn
}
