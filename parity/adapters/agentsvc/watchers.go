package agentsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// seedTimeout bounds the ZooKeeper writes that seed a case.
const seedTimeout = 10 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// v1 serves a real ReplicaWatcher: input.seed ([path, ReplicaMeta fields] pairs) is written to a
// zkfake tree by another session, as registering replicas would, and the watcher loads it on
// Start (the reference's watch_data); its reconciliation poll is off, as the recording's was.
func v1(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := inputConf(c, in)
	if err != nil {
		return nil, err
	}
	var seed [][2]json.RawMessage
	if err := in.Decode("seed", &seed); err != nil {
		return nil, err
	}
	reqs, err := requests(in, defaultScript)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	defer writer.Close()
	defer client.Close()
	if err := utils.SeedReplicas(ctx, writer, seed); err != nil {
		return nil, err
	}
	w, err := replica.NewWatcher(client, conf, replica.WatcherOptions{
		Env: agentconf.MapEnv(c.Env), PollInterval: -1, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()
	svc := agentsvc.NewWatcherService(agentsvc.FromWatcher(w), agentsvc.WatcherConfigFrom(conf), agentsvc.WithLogger(quiet))
	return replay(svc, reqs)
}

// v2Script is the reference scenario of CallV2 when input.requests is absent.
var v2Script = []rpcRequest{
	{RPC: "HeartBeat", Request: map[string]any{"server_type": "PS"}},
	{RPC: "GetReplicas", Request: map[string]any{"server_type": "PS", "task": 0, "model_name": "mm"}},
	{RPC: "GetResource", Request: map[string]any{}},
}

// replicaInput is one input.replicas entry: ReplicaMeta's fields.
type replicaInput struct {
	Address    *string `json:"address"`
	ModelName  *string `json:"model_name"`
	ServerType *string `json:"server_type"`
	Stat       *int    `json:"stat"`
	Task       *int    `json:"task"`
	Replica    *int    `json:"replica"`
}

// v2 serves a real ZKMirror of conf's bzid on zkfake: the mirror is started (service and publish
// watches) and input.replicas are registered through its update_service, so the service nodes reach
// the answers through the mirror's watches. GetResource reports conf's agent_port, SHARD_ID and
// REPLICA_ID, as the reference's v2 impl read them from conf.
func v2(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := inputConf(c, in)
	if err != nil {
		return nil, err
	}
	var reps []replicaInput
	if err := in.Decode("replicas", &reps); err != nil {
		return nil, err
	}
	rms := make([]datadef.ReplicaMeta, 0, len(reps))
	for i, r := range reps {
		if r.Stat == nil || r.Task == nil || r.Replica == nil {
			return nil, &harness.InputError{Key: fmt.Sprintf("replicas[%d]", i), Msg: "stat, task and replica are required"}
		}
		rm := datadef.NewReplicaMeta()
		rm.Address, rm.ModelName, rm.ServerType = r.Address, r.ModelName, r.ServerType
		rm.Stat, rm.Task, rm.Replica = datadef.ModelState(*r.Stat), *r.Task, *r.Replica
		rms = append(rms, rm)
	}
	reqs, err := requests(in, v2Script)
	if err != nil {
		return nil, err
	}
	if conf.Bzid == nil {
		return nil, &harness.InputError{Key: "conf_kwargs", Msg: "bzid is required for a ZKMirror"}
	}
	shard, err := conf.ShardID()
	if err != nil {
		return nil, err
	}
	numShard, err := conf.NumTCEShard()
	if err != nil {
		return nil, err
	}
	res, err := agentsvc.ResourceFromConfig(conf)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), seedTimeout)
	defer cancel()
	client := zkfake.NewServer().Client()
	defer client.Close()
	m, err := zkmirror.New(zkmirror.Config{Client: client, BZID: *conf.Bzid, ShardID: shard, NumShard: numShard,
		DeployType: conf.Deploy, Env: agentconf.MapEnv(c.Env), Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	if err := m.Start(ctx, false); err != nil {
		return nil, err
	}
	if err := m.UpdateService(ctx, rms); err != nil {
		return nil, err
	}
	svc := agentsvc.NewMirrorService(agentsvc.FromMirror(m), res, agentsvc.WithLogger(quiet))
	return replay(svc, reqs)
}
