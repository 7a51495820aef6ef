package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// servingClient is the reference's ServingClient on an open ZooKeeper session.
type servingClient struct {
	zk     zk.Client
	mirror *zkmirror.Mirror
	bzid   string
	log    *slog.Logger
}

// newServingClient builds the client. Its mirror is used for writes only and so is not started
// (the reference's start(is_client=True) watched the whole service tree, which it never read).
func newServingClient(c zk.Client, bzid string, log *slog.Logger) (*servingClient, error) {
	replica := -1
	m, err := zkmirror.New(zkmirror.Config{
		Client: c, BZID: bzid, ShardID: -1, ReplicaID: &replica, LocalHost: "127.0.0.1", Logger: log,
		Env: func(string) (string, bool) { return "", false },
	})
	if err != nil {
		return nil, err
	}
	return &servingClient{zk: c, mirror: m, bzid: bzid, log: log}, nil
}

// Close stops the mirror; the session stays open.
func (s *servingClient) Close() { s.mirror.Stop() }

// portalPath is ModelMeta.get_path(portal_base_path) for a plain model name.
func (s *servingClient) portalPath(model string) (string, error) {
	if model == "" || strings.Contains(model, "/") {
		return "", errkind.New(errkind.Value, "model name %q: want a non-empty name without '/'", model)
	}
	mm := datadef.NewModelMeta()
	mm.ModelName = &model
	path, err := mm.Path(s.mirror.PortalPath())
	if err != nil {
		return "", err
	}
	if err := zk.ValidatePath(path); err != nil {
		return "", errkind.Wrap(errkind.Value, fmt.Errorf("model name %q: %w", model, err))
	}
	return path, nil
}

// exists asks ZooKeeper whether path exists; unlike the mirror's Exists, a failure is an error.
func (s *servingClient) exists(ctx context.Context, path string) (bool, error) {
	st, err := s.zk.Exists(ctx, path)
	if err != nil {
		return false, fmt.Errorf("exists %s: %w", path, err)
	}
	return st != nil, nil
}

// load creates the model's portal node holding its ModelMeta.
func (s *servingClient) load(ctx context.Context, model, modelDir string, ckpt *string, numShard int) error {
	path, err := s.portalPath(model)
	if err != nil {
		return err
	}
	ok, err := s.exists(ctx, path)
	if err != nil {
		return err
	}
	if ok {
		return errkind.New(errkind.Runtime, "%s has exists (%s)", model, path)
	}
	mm := datadef.NewModelMeta()
	mm.ModelName, mm.ModelDir, mm.Ckpt, mm.NumShard = &model, &modelDir, ckpt, numShard
	if err := s.mirror.Create(ctx, path, mm.Serialize(), zk.CreateOptions{MakePath: true}); err != nil {
		return fmt.Errorf("load %s: %w", model, err)
	}
	return nil
}

// unload deletes the model's portal node (and anything under it).
func (s *servingClient) unload(ctx context.Context, model string) error {
	path, err := s.portalPath(model)
	if err != nil {
		return err
	}
	ok, err := s.exists(ctx, path)
	if err != nil {
		return err
	}
	if !ok {
		s.log.Warn(model + " not exists, nothing to do!")
		return nil
	}
	if err := s.mirror.Delete(ctx, path, true); err != nil {
		return fmt.Errorf("unload %s: %w", model, err)
	}
	return nil
}

// replicaStat is one serving replica of the model: {server_type}:{task}:{replica} and its state.
type replicaStat struct {
	key  string
	stat int
}

// loadState is the reference's LoadSate dataclass.
type loadState struct {
	portal, publish *bool
	service         []replicaStat
}

// String is Python's repr of the LoadSate dataclass.
func (l loadState) String() string {
	opt := func(b *bool) string {
		if b == nil {
			return "None"
		}
		return pyfmt.Bool(*b)
	}
	parts := make([]string, len(l.service))
	for i, r := range l.service {
		parts[i] = pyfmt.StrRepr(r.key) + ": " + strconv.Itoa(r.stat)
	}
	return fmt.Sprintf("LoadSate(portal=%s, publish=%s, service={%s})", opt(l.portal), opt(l.publish), strings.Join(parts, ", "))
}

// children lists path's children; a missing node has none.
func (s *servingClient) children(ctx context.Context, path string) ([]string, error) {
	names, err := s.zk.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", path, err)
	}
	return names, nil
}

// status reads the model's load state from ZooKeeper (not from the mirror, as the reference).
func (s *servingClient) status(ctx context.Context, model string) (loadState, error) {
	var st loadState
	portal, err := s.portalPath(model)
	if err != nil {
		return st, err
	}
	yes := true
	ok, err := s.exists(ctx, portal)
	if err != nil {
		return st, err
	}
	if ok {
		st.portal = &yes
	}

	publishes, err := s.children(ctx, s.mirror.PublishPath())
	if err != nil {
		return st, err
	}
	for _, node := range publishes {
		parts := strings.Split(node, ":")
		if len(parts) != 3 {
			s.log.Warn("skipping a publish node not named {shard_id}:{replica_id}:{model_name}", "node", node)
			continue
		}
		if parts[2] == model {
			st.publish = &yes
			break
		}
	}

	modelPath := s.mirror.ServicePath() + "/" + model
	tasks, err := s.children(ctx, modelPath)
	if err != nil {
		return st, err
	}
	for _, task := range tasks {
		replicas, err := s.children(ctx, modelPath+"/"+task)
		if err != nil {
			return st, err
		}
		for _, replica := range replicas {
			path := modelPath + "/" + task + "/" + replica
			data, _, err := s.zk.Get(ctx, path)
			if errors.Is(err, zk.ErrNoNode) {
				continue // the replica went away while we listed
			}
			if err != nil {
				return st, fmt.Errorf("get %s: %w", path, err)
			}
			rm, err := datadef.DeserializeReplicaMeta(data)
			if err != nil {
				return st, fmt.Errorf("replica %s: %w", path, err)
			}
			st.service = append(st.service, replicaStat{key: task + ":" + replica, stat: int(rm.Stat)})
		}
	}
	return st, nil
}
