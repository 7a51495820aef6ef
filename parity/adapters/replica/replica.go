// Package replica adapts pkg/replica to the parity cases of monolith/agent_service/replica_manager.py.
// Both scenarios run on zkfake, the port of the reference's FakeKazooClient, and on a real
// ZooKeeper that the adapter starts for the case (zktest.Launch).
package replica

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/replica"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// Calls of the replica_manager goldens.
const (
	CallRegister     = "ReplicaUpdater(FakeKazooClient, conf).register()"
	CallWatch        = "ReplicaWatcher(FakeKazooClient seeded, conf).watch_data + queries (poll thread disabled)"
	CallRegisterReal = "ReplicaUpdater(real ZooKeeper, conf).register()"
	CallWatchReal    = "ReplicaWatcher(real ZooKeeper seeded, conf).watch_data + queries (poll thread disabled)"
)

// Register adds the replica_manager.py calls.
func Register(r *harness.Registry) {
	r.Register(CallRegister, func(c *harness.Ctx, in harness.Input) (any, error) { return register(c, in, false) })
	r.Register(CallWatch, func(c *harness.Ctx, in harness.Input) (any, error) { return watch(c, in, false) })
	r.Register(CallRegisterReal, func(c *harness.Ctx, in harness.Input) (any, error) { return register(c, in, true) })
	r.Register(CallWatchReal, func(c *harness.Ctx, in harness.Input) (any, error) { return watch(c, in, true) })
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// config builds the case's AgentConfig. The recording's config always had bzid "bz" and base_name
// "mdl" (every recorded path starts /bz/service/mdl); conf_kwargs lists the other fields only.
func config(c *harness.Ctx, in harness.Input) (*agentconf.AgentConfig, error) {
	var kw map[string]json.RawMessage
	if err := in.Decode("conf_kwargs", &kw); err != nil {
		return nil, err
	}
	return configFromKwargs(c, kw)
}

// configFromKwargs is config for conf_kwargs already read; the process environment must be the
// one the config is made in.
func configFromKwargs(c *harness.Ctx, kw map[string]json.RawMessage) (*agentconf.AgentConfig, error) {
	if kw == nil {
		kw = map[string]json.RawMessage{}
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

// other is an updater registered before the case's own ("before"): another replica of the
// deployment, with its own config and environment.
type other struct {
	ConfKwargs map[string]json.RawMessage `json:"conf_kwargs"`
	Env        map[string]string          `json:"env"`
}

// register replays ReplicaUpdater.register(): the seed written first, then the "before" updaters
// registered (each in its own environment and, on a real ZooKeeper, its own session), then the
// case's updater registered register_calls times, the "between" mutations applied before each
// call after the first.
func register(c *harness.Ctx, in harness.Input, real bool) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		seed    [][2]json.RawMessage
		between []string
		before  []other
		calls   = 1
		rawDump bool
		err     error
	)
	if in.Has("seed") {
		if err := in.Decode("seed", &seed); err != nil {
			return nil, err
		}
	}
	if in.Has("between") {
		if err := in.Decode("between", &between); err != nil {
			return nil, err
		}
	}
	if in.Has("before") {
		if err := in.Decode("before", &before); err != nil {
			return nil, err
		}
	}
	if in.Has("register_calls") {
		if calls, err = in.Int("register_calls"); err != nil {
			return nil, err
		}
	}
	if in.Has("dump_raw") {
		if rawDump, err = in.Bool("dump_raw"); err != nil {
			return nil, err
		}
	}
	zks, err := newZK(real)
	if err != nil {
		return nil, err
	}
	defer zks.close()
	client, err := zks.client(ctx)
	if err != nil {
		return nil, err
	}
	writer, err := zks.client(ctx)
	if err != nil {
		return nil, err
	}
	if err := seedNodes(ctx, writer, seed); err != nil {
		return nil, err
	}
	for i, o := range before {
		oc, err := zks.client(ctx)
		if err != nil {
			return nil, err
		}
		if err := registerOther(ctx, c, oc, o); err != nil {
			return nil, fmt.Errorf("before[%d]: %w", i, err)
		}
	}

	conf, err := config(c, in)
	if err != nil {
		return nil, err
	}
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
	for i := 0; i < calls; i++ {
		if i > 0 {
			for _, m := range between {
				if err := mutate(ctx, writer, m); err != nil {
					return nil, err
				}
			}
		}
		if err := u.Register(ctx); err != nil {
			return nil, err
		}
	}
	out["replica_id_after"] = u.ReplicaID()
	out["meta_keys"] = orEmpty(u.Paths())
	root := "/"
	if real {
		root = "/bz" // the recording cleared and dumped /bz on its server
	}
	tree, err := zk.ReadTree(ctx, client, root)
	if err != nil {
		return nil, err
	}
	delete(tree, "/") // the goldens list the nodes below the root
	out["tree_after_register"] = tree
	if rawDump {
		raw, err := readRaw(ctx, client, "/bz")
		if err != nil {
			return nil, err
		}
		out["raw_after_register"] = raw
	}
	return out, nil
}

// registerOther registers another replica in its own environment (the process environment is
// the case's again afterwards; the harness restores it fully after the case too).
func registerOther(ctx context.Context, c *harness.Ctx, client zk.Client, o other) error {
	restore, err := harness.ApplyEnv(o.Env)
	if err != nil {
		return err
	}
	defer restore()
	conf, err := configFromKwargs(c, o.ConfKwargs)
	if err != nil {
		return err
	}
	u, err := replica.NewUpdater(client, conf, replica.UpdaterOptions{
		Env: agentconf.MapEnv(o.Env), Resolver: noResolver{}, Logger: quiet})
	if err != nil {
		return err
	}
	return u.Register(ctx)
}

// readRaw is every node under root as kazoo reads it: repr of the data (None for no data, b""
// for empty data) and the stat's data length.
func readRaw(ctx context.Context, client zk.Client, root string) (map[string]any, error) {
	out := map[string]any{}
	var walk func(p string) error
	walk = func(p string) error {
		data, st, err := client.Get(ctx, p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		repr := "None"
		if data != nil {
			repr = pyfmt.BytesRepr(data)
		}
		out[p] = map[string]any{"py_repr": repr, "data_length": st.DataLength}
		kids, err := client.Children(ctx, p)
		if err != nil {
			return fmt.Errorf("children of %s: %w", p, err)
		}
		for _, k := range kids {
			if err := walk(zk.Join(p, k)); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(root)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func watch(c *harness.Ctx, in harness.Input, real bool) (any, error) {
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
	// {prefix} is the config's path_prefix, which the reference evaluated only for a mutation
	// naming it (a dc-aware config without a location has none).
	prefix := ""
	for _, m := range mutations {
		if strings.Contains(m, "{prefix}") {
			if prefix, err = conf.PathPrefix(); err != nil {
				return nil, err
			}
			break
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	zks, err := newZK(real)
	if err != nil {
		return nil, err
	}
	defer zks.close()
	writer, err := zks.client(ctx)
	if err != nil {
		return nil, err
	}
	client, err := zks.client(ctx)
	if err != nil {
		return nil, err
	}
	if err := seedNodes(ctx, writer, seed); err != nil {
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
	settle := func() map[string]any { return queries(w, conf) }
	if real {
		settle = func() map[string]any { return settled(func() map[string]any { return queries(w, conf) }) }
	}
	out := map[string]any{"initial": settle()}
	for _, m := range mutations {
		if err := mutate(ctx, writer, strings.ReplaceAll(m, "{prefix}", prefix)); err != nil {
			return nil, err
		}
		if real {
			settle()
		}
	}
	out["after_mutation"] = settle()
	return out, nil
}

// settled calls query until its answer has not changed for a while: a real client runs the watch
// callbacks after the change that caused them (the recording paused 0.4 s after each step).
func settled(query func() map[string]any) map[string]any {
	const (
		quietFor = 200 * time.Millisecond
		poll     = 10 * time.Millisecond
		atMost   = 5 * time.Second
	)
	begin := time.Now()
	last := query()
	lastSig, lastChange := fmt.Sprint(last), begin
	for time.Since(begin) < atMost {
		time.Sleep(poll)
		cur := query()
		if sig := fmt.Sprint(cur); sig != lastSig {
			last, lastSig, lastChange = cur, sig, time.Now()
		} else if time.Since(lastChange) >= quietFor {
			return cur
		}
	}
	return last
}

// zkServer hands out clients of one ZooKeeper: the fake, or a real server started for the case.
type zkServer struct {
	fake    *zkfake.Server
	real    *zktest.Server
	clients []zk.Client
}

func newZK(real bool) (*zkServer, error) {
	if !real {
		return &zkServer{fake: zkfake.NewServer()}, nil
	}
	srv, err := zktest.Launch()
	if err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	return &zkServer{real: srv}, nil
}

// client is a new session.
func (s *zkServer) client(ctx context.Context) (zk.Client, error) {
	var c zk.Client
	if s.fake != nil {
		c = s.fake.Client()
	} else {
		rc, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{s.real.Addr()}, SessionTimeout: 10 * time.Second, Logger: quiet})
		if err != nil {
			return nil, fmt.Errorf("connect to the real ZooKeeper: %w", err)
		}
		c = rc
	}
	s.clients = append(s.clients, c)
	return c, nil
}

func (s *zkServer) close() {
	for _, c := range s.clients {
		c.Close()
	}
	if s.real != nil {
		s.real.Close()
	}
}

// seedBytes is what the recording wrote for a seed value: ReplicaMeta(**fields).serialize() for an
// object (the reference's json.dumps, fields in declaration order, absent ones at their defaults,
// values as given, null included), b"" for null, the text itself for a string.
func seedBytes(raw json.RawMessage) ([]byte, error) {
	if string(raw) == "null" {
		return []byte{}, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []byte(text), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("want ReplicaMeta fields, null or a string: %w", err)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range datadef.NewReplicaMeta().PyDict().D { // the fields in order, at their defaults
		v, ok := fields[f.Key]
		delete(fields, f.Key)
		val := string(f.Val.JSON())
		if ok {
			var any any
			if err := json.Unmarshal(v, &any); err != nil {
				return nil, err
			}
			switch t := any.(type) {
			case string:
				val = pyfmt.JSONString(t)
			case nil:
				val = "null"
			default:
				val = strings.TrimSpace(string(v))
			}
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyfmt.JSONString(f.Key) + ": " + val)
	}
	b.WriteByte('}')
	if len(fields) > 0 {
		return nil, fmt.Errorf("unknown ReplicaMeta fields %v", fields)
	}
	return []byte(b.String()), nil
}

// seedNodes writes a case's seed, [path, value] pairs, through w (persistent nodes, parents made).
func seedNodes(ctx context.Context, w zk.Client, seed [][2]json.RawMessage) error {
	for i, s := range seed {
		var path string
		if err := json.Unmarshal(s[0], &path); err != nil {
			return &harness.InputError{Key: fmt.Sprintf("seed[%d]", i), Msg: err.Error()}
		}
		data, err := seedBytes(s[1])
		if err != nil {
			return &harness.InputError{Key: fmt.Sprintf("seed[%d]", i), Msg: err.Error()}
		}
		if _, err := w.Create(ctx, path, data, zk.CreateOptions{MakePath: true}); err != nil {
			return fmt.Errorf("seed %s: %w", path, err)
		}
	}
	return nil
}

// mutate applies one recorded mutation: "delete PATH", "set PATH stat=STATE", "create PATH" or
// "write PATH TEXT". The recording's create wrote ReplicaMeta(address='10.0.N.N:N',
// stat=AVAILABLE) for replica N (the input does not carry the payload; the recorded addresses
// show it); write sets the node to the bytes of TEXT (everything after the path and one space,
// possibly nothing), creating it with its parents when missing.
func mutate(ctx context.Context, client zk.Client, m string) error {
	if rest, ok := strings.CutPrefix(m, "write "); ok {
		path, text, _ := strings.Cut(rest, " ")
		_, err := client.Set(ctx, path, []byte(text), zk.AnyVersion)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = client.Create(ctx, path, []byte(text), zk.CreateOptions{MakePath: true})
		}
		return err
	}
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
