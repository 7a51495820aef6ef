// Package replica adapts pkg/replica to the parity cases of monolith/agent_service/replica_manager.py.
// Both scenarios run on zkfake, the port of the reference's FakeKazooClient.
package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	agentpb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// Calls of the replica_manager goldens.
const (
	CallRegister = "ReplicaUpdater(FakeKazooClient, conf).register()"
	CallWatch    = "ReplicaWatcher(FakeKazooClient seeded, conf).watch_data + queries (poll thread disabled)"
)

// Register adds the replica_manager.py calls.
func Register(r *harness.Registry) {
	r.Register(CallRegister, register)
	r.Register(CallWatch, watch)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// config builds the case's AgentConfig. The recording's config always had bzid "bz" and base_name
// "mdl" (every recorded path starts /bz/service/mdl); conf_kwargs lists the other fields only.
func config(c *harness.Ctx, in harness.Input) (*agentconf.AgentConfig, error) {
	var kw map[string]json.RawMessage
	if err := in.Decode("conf_kwargs", &kw); err != nil {
		return nil, err
	}
	if _, ok := kw["bzid"]; !ok {
		kw["bzid"] = json.RawMessage(`"bz"`)
	}
	if _, ok := kw["base_name"]; !ok {
		kw["base_name"] = json.RawMessage(`"mdl"`)
	}
	raw, err := json.Marshal(kw)
	if err != nil {
		return nil, err
	}
	return utils.AgentConfigFromKwargs(c, raw)
}

// noResolver stands for a host whose name does not resolve: the cases give MY_HOST_IP and
// MY_HOST_IPV6 where they matter, so the machine running the check must not leak in.
type noResolver struct{}

func (noResolver) IPv4(context.Context) (string, error) {
	return "", fmt.Errorf("no resolution in parity cases")
}
func (noResolver) IPv6(context.Context) (string, error) {
	return "", fmt.Errorf("no resolution in parity cases")
}

func register(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := config(c, in)
	if err != nil {
		return nil, err
	}
	client := zkfake.New()
	defer client.Close()
	u, err := replica.NewUpdater(client, conf, replica.UpdaterOptions{
		Env: agentconf.MapEnv(c.Env), Resolver: noResolver{}, Logger: quiet})
	if err != nil {
		return nil, err
	}
	out := map[string]any{
		"replica_id_before": u.ReplicaID(),
		"entry_path":        u.EntryPath(),
		"dense_path":        u.DensePath(),
		"ps_path(1)":        u.PSPath(1),
		"model_names":       orEmpty(u.ModelNames()),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := u.Register(ctx); err != nil {
		return nil, err
	}
	out["replica_id_after"] = u.ReplicaID()
	out["meta_keys"] = orEmpty(u.Paths())
	tree, err := zk.ReadTree(ctx, client, "/")
	if err != nil {
		return nil, err
	}
	delete(tree, "/") // the goldens list the nodes below the root
	out["tree_after_register"] = tree
	return out, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func watch(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := config(c, in)
	if err != nil {
		return nil, err
	}
	var seed [][2]json.RawMessage
	if err := in.Decode("seed", &seed); err != nil {
		return nil, err
	}
	var mutations []string
	if err := in.Decode("mutations", &mutations); err != nil {
		return nil, err
	}
	useArchon, err := in.Bool("use_archon")
	if err != nil {
		return nil, err
	}
	family, err := in.Str("zk_watch_address_family")
	if err != nil {
		return nil, err
	}
	prefix, err := conf.PathPrefix()
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := zkfake.NewServer()
	writer, client := srv.Client(), srv.Client()
	defer writer.Close()
	defer client.Close()
	if err := utils.SeedReplicas(ctx, writer, seed); err != nil {
		return nil, err
	}

	w, err := replica.NewWatcher(client, conf, replica.WatcherOptions{
		UseArchon: useArchon, AddressFamily: family, Env: agentconf.MapEnv(c.Env), PollInterval: -1, Logger: quiet})
	if err != nil {
		return nil, err
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	defer w.Stop()
	out := map[string]any{"initial": queries(w, conf)}
	for _, m := range mutations {
		if err := mutate(ctx, writer, strings.ReplaceAll(m, "{prefix}", prefix)); err != nil {
			return nil, err
		}
	}
	out["after_mutation"] = queries(w, conf)
	return out, nil
}

// mutate applies one recorded mutation: "delete PATH", "set PATH stat=STATE" or "create PATH".
// The recording's create wrote ReplicaMeta(address='10.0.N.N:N', stat=AVAILABLE) for replica N
// (the input does not carry the payload; the recorded addresses show it).
func mutate(ctx context.Context, client zk.Client, m string) error {
	f := strings.Fields(m)
	if len(f) < 2 {
		return &harness.InputError{Key: "mutations", Msg: "cannot read " + strconv.Quote(m)}
	}
	path := f[1]
	switch {
	case f[0] == "delete" && len(f) == 2:
		return client.Delete(ctx, path, zk.DeleteOptions{})
	case f[0] == "set" && len(f) == 3 && strings.HasPrefix(f[2], "stat="):
		state, ok := stateByName(strings.TrimPrefix(f[2], "stat="))
		if !ok {
			return &harness.InputError{Key: "mutations", Msg: "unknown state in " + strconv.Quote(m)}
		}
		data, _, err := client.Get(ctx, path)
		if err != nil {
			return err
		}
		meta, err := datadef.DeserializeReplicaMeta(data)
		if err != nil {
			return err
		}
		meta.Stat = state
		_, err = client.Set(ctx, path, meta.Serialize(), zk.AnyVersion)
		return err
	case f[0] == "create" && len(f) == 2:
		n := zk.Base(path)
		meta := datadef.NewReplicaMeta()
		addr := fmt.Sprintf("10.0.%s.%s:%s", n, n, n)
		meta.Address, meta.Stat = &addr, datadef.StateAvailable
		_, err := client.Create(ctx, path, meta.Serialize(), zk.CreateOptions{MakePath: true})
		return err
	}
	return &harness.InputError{Key: "mutations", Msg: "cannot read " + strconv.Quote(m)}
}

func stateByName(name string) (datadef.ModelState, bool) {
	for _, s := range []datadef.ModelState{datadef.StateUnknown, datadef.StateStart, datadef.StateLoading,
		datadef.StateAvailable, datadef.StateUnloading, datadef.StateEnd} {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// addrs renders addresses as the reference's list: "" (no address) is None.
func addrs(list []string) []any {
	out := make([]any, len(list))
	for i, a := range list {
		if a != "" {
			out[i] = a
		}
	}
	return out
}

// queries are the reference scenario's queries, under the names it recorded them with.
func queries(w *replica.Watcher, conf *agentconf.AgentConfig) map[string]any {
	dc := replica.ConfDC(conf)
	ps, entry, dense := agentpb.ServerType_PS, agentpb.ServerType_ENTRY, agentpb.ServerType_DENSE
	all := func(st agentpb.ServerType, dc *replica.DC) map[string]any {
		out := map[string]any{}
		for k, v := range w.GetAllReplicas(st, dc) {
			out[k] = addrs(v)
		}
		return out
	}
	one := func(task, r int) any {
		switch got := w.GetReplica(ps, task, r, nil); len(got) {
		case 0:
			return nil
		case 1:
			return addrs(got)[0]
		default:
			return addrs(got)
		}
	}
	// The recording passed conf.idc and conf.cluster here although its label shows no location:
	// under dc_aware its output has no replica of the other location, while get_replicas(PS, 0)
	// recorded in the same run has one (TestExtraInfoEveryLocation covers the nil location).
	extra := map[string]any{}
	for addr, info := range w.GetReplicasWithExtraInfo(ps, 0, dc) {
		if addr == "" {
			addr = "<None>"
		}
		extra[addr] = info.TextFormat()
	}
	keys := map[string]any{}
	for _, t := range w.Snapshot() {
		ks := []string{}
		for _, r := range t.Replicas {
			ks = append(ks, r.Key)
		}
		keys[t.Path] = ks
	}
	return map[string]any{
		"get_all_replicas(DENSE)":               all(dense, nil),
		"get_all_replicas(DENSE, idc, cluster)": all(dense, dc),
		"get_all_replicas(ENTRY)":               all(entry, nil),
		"get_all_replicas(ENTRY, idc, cluster)": all(entry, dc),
		"get_all_replicas(PS)":                  all(ps, nil),
		"get_all_replicas(PS, idc, cluster)":    all(ps, dc),
		"get_replica(PS, 0, 1)":                 one(0, 1),
		"get_replica(PS, 1, 1)":                 one(1, 1),
		"get_replica(PS, 9, 0)":                 one(9, 0),
		"get_replicas(ENTRY, 0)":                addrs(w.GetReplicas(entry, 0, nil)),
		"get_replicas(PS, 0)":                   addrs(w.GetReplicas(ps, 0, nil)),
		"get_replicas(PS, 0, idc, cluster)":     addrs(w.GetReplicas(ps, 0, dc)),
		"get_replicas(PS, 1)":                   addrs(w.GetReplicas(ps, 1, nil)),
		"get_replicas(PS, 1, idc, cluster)":     addrs(w.GetReplicas(ps, 1, dc)),
		"get_replicas(PS, 2)":                   addrs(w.GetReplicas(ps, 2, nil)),
		"get_replicas(PS, 2, idc, cluster)":     addrs(w.GetReplicas(ps, 2, dc)),
		"get_replicas_with_extra_info(PS, 0)":   extra,
		"replicas_keys":                         keys,
	}
}
