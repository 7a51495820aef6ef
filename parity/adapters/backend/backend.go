// Package backend adapts pkg/backend to the parity cases of monolith/agent_service/backends.py:
// the dataclasses' JSON, and scripted op sequences against a fake and against a real ZooKeeper
// (which the adapter starts itself), with every step's result, layout callback calls and
// ZooKeeper tree compared.
package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	bk "github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

// Register adds the backends.py calls.
func Register(r *harness.Registry) {
	r.Register("SavedModelDeployConfig/ContainerServiceInfo.serialize, SavedModel/Container str", serialize)
	r.Register("SavedModelDeployConfig/ContainerServiceInfo.deserialize", deserialize)
	r.Register("ZKBackend(bzid, FakeKazooClient) op sequence", scenarioFake)
	r.Register("ZKBackend(bzid, real ZooKeeper) op sequence", scenarioRealZK)
	registerDataclasses(r)
}

func str(s string) *string { return &s }

// serialize: the case records the reference's objects in its output only; these are the
// constructor arguments it used (ContainerServiceInfo("a:1", "a:2", "a:3", "a:4", "LQ", "d"),
// SavedModelDeployConfig("/p", "latest"), the defaults, SavedModel("m", "ps_0") and
// Container("psm;idc;cl", "pod")).
func serialize(*harness.Ctx, harness.Input) (any, error) {
	return map[string]any{
		"ContainerServiceInfo": utils.PyBytes(bk.ContainerServiceInfo{GRPC: str("a:1"), HTTP: str("a:2"), Archon: str("a:3"),
			Agent: str("a:4"), IDC: str("LQ"), DebugInfo: str("d")}.Serialize()),
		"ContainerServiceInfo_default":   utils.PyBytes(bk.ContainerServiceInfo{}.Serialize()),
		"SavedModelDeployConfig":         utils.PyBytes(bk.SavedModelDeployConfig{ModelBasePath: str("/p"), VersionPolicy: str("latest")}.Serialize()),
		"SavedModelDeployConfig_default": utils.PyBytes(bk.SavedModelDeployConfig{}.Serialize()),
		"SavedModel_str":                 bk.SavedModel{ModelName: "m", SubGraph: "ps_0"}.String(),
		"Container_str":                  bk.Container{Cluster: "psm;idc;cl", ID: "pod"}.String(),
	}, nil
}

// deserialize: inputs[0] is read as a SavedModelDeployConfig, inputs[1] as a ContainerServiceInfo.
func deserialize(_ *harness.Ctx, in harness.Input) (any, error) {
	var inputs []string
	if err := in.Decode("inputs", &inputs); err != nil {
		return nil, err
	}
	if len(inputs) != 2 {
		return nil, &harness.InputError{Key: "inputs", Msg: "want a deploy config and a service info"}
	}
	cfg, err := bk.DeserializeSavedModelDeployConfig([]byte(inputs[0]))
	if err != nil {
		return nil, err
	}
	info, err := bk.DeserializeContainerServiceInfo([]byte(inputs[1]))
	if err != nil {
		return nil, err
	}
	return []any{configDict(cfg), infoDict(info)}, nil
}

func configDict(c bk.SavedModelDeployConfig) map[string]any {
	return map[string]any{"model_base_path": c.ModelBasePath, "version_policy": c.VersionPolicy}
}

func infoDict(s bk.ContainerServiceInfo) map[string]any {
	return map[string]any{"grpc": s.GRPC, "http": s.HTTP, "archon": s.Archon, "agent": s.Agent, "idc": s.IDC,
		"debug_info": s.DebugInfo}
}

// scenarioTimeout bounds a whole op sequence.
const scenarioTimeout = 2 * time.Minute

func scenarioFake(_ *harness.Ctx, in harness.Input) (any, error) {
	client := zkfake.New()
	defer client.Close()
	return runScenario(in, client)
}

func scenarioRealZK(_ *harness.Ctx, in harness.Input) (any, error) {
	srv, stop, err := startServer()
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: quietLog})
	if err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	defer client.Close()
	return runScenario(in, client)
}

var quietLog = slog.New(slog.DiscardHandler)

// step is one op of the plan: [op, args].
type step struct {
	op   string
	args []json.RawMessage
}

func (s *step) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 2 {
		return fmt.Errorf("want [op, args], got %.60s", b)
	}
	if err := json.Unmarshal(raw[0], &s.op); err != nil {
		return fmt.Errorf("op: %w", err)
	}
	return json.Unmarshal(raw[1], &s.args)
}

// callbackCall is one call of a layout callback as the goldens record it.
type callbackCall struct {
	Layout string `json:"layout"`
	Arg    []any  `json:"arg"`
}

// calls collects layout callback calls; with a real server they come from the client's goroutines.
type calls struct {
	mu   sync.Mutex
	list []callbackCall
}

func (c *calls) callback(layout string) bk.LayoutCallback {
	return func(entries []bk.LayoutEntry) bool {
		arg := []any{}
		for _, e := range entries {
			arg = append(arg, []any{e.SavedModel.String(), configDict(e.DeployConfig)})
		}
		c.mu.Lock()
		c.list = append(c.list, callbackCall{Layout: layout, Arg: arg})
		c.mu.Unlock()
		return true
	}
}

func (c *calls) take() []callbackCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.list
	c.list = nil
	if out == nil {
		out = []callbackCall{}
	}
	return out
}

// runScenario replays the plan on a backend over client. After each step it waits for the
// backend's watches to settle (immediate on the fake, whose watches run synchronously), then
// records the result, the layout callback calls the step caused and the tree under /{bzid}.
func runScenario(in harness.Input, client zk.Client) (any, error) {
	bzid, err := in.Str("bzid")
	if err != nil {
		return nil, err
	}
	var plan []step
	if err := in.Decode("plan", &plan); err != nil {
		return nil, err
	}
	b, err := bk.New(client, bk.Config{Bzid: bzid, Logger: quietLog})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	cbs := &calls{}
	var steps []any
	for i, st := range plan {
		result, err := runStep(ctx, b, cbs, st)
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, st.op, err)
		}
		if err := b.Settle(ctx); err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, st.op, err)
		}
		tree, err := zk.ReadTree(ctx, client, "/"+bzid)
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, st.op, err)
		}
		steps = append(steps, map[string]any{"op": st.op, "args": st.args, "result": result,
			"callback_calls": cbs.take(), "tree": tree})
	}
	return map[string]any{"steps": steps}, nil
}

func runStep(ctx context.Context, b *bk.ZKBackend, cbs *calls, st step) (any, error) {
	a := args(st.args)
	switch st.op {
	case "report_service_info":
		c, err := a.container(0)
		if err != nil {
			return nil, err
		}
		info, err := a.serviceInfo(1)
		if err != nil {
			return nil, err
		}
		return nil, b.ReportServiceInfo(ctx, c, info)
	case "register_layout_callback":
		layout, err := a.str(0)
		if err != nil {
			return nil, err
		}
		return nil, b.RegisterLayoutCallback(ctx, layout, cbs.callback(layout))
	case "decl_saved_model":
		sm, err := a.savedModel(0)
		if err != nil {
			return nil, err
		}
		cfg, err := a.deployConfig(1)
		if err != nil {
			return nil, err
		}
		return nil, b.DeclSavedModel(ctx, sm, cfg)
	case "add_to_layout", "remove_from_layout":
		layout, err := a.str(0)
		if err != nil {
			return nil, err
		}
		sm, err := a.savedModel(1)
		if err != nil {
			return nil, err
		}
		if st.op == "add_to_layout" {
			return nil, b.AddToLayout(ctx, layout, sm)
		}
		return nil, b.RemoveFromLayout(ctx, layout, sm)
	case "sync_available_saved_models":
		c, err := a.container(0)
		if err != nil {
			return nil, err
		}
		var pairs [][2]string
		if err := a.decode(1, &pairs); err != nil {
			return nil, err
		}
		var sms []bk.SavedModel
		for _, p := range pairs {
			sms = append(sms, bk.SavedModel{ModelName: p[0], SubGraph: p[1]})
		}
		return nil, b.SyncAvailableSavedModels(ctx, c, sms)
	case "get_service_map":
		out := map[string]any{}
		for m, subs := range b.ServiceMap() {
			sg := map[string]any{}
			for name, infos := range subs {
				list := []any{}
				for _, info := range infos {
					list = append(list, infoDict(info))
				}
				sg[name] = list
			}
			out[m] = sg
		}
		return out, nil
	case "subscribe_model":
		m, err := a.str(0)
		if err != nil {
			return nil, err
		}
		return nil, b.SubscribeModel(ctx, m)
	case "get_sync_targets":
		sg, err := a.str(0)
		if err != nil {
			return nil, err
		}
		name, targets, err := b.SyncTargets(sg)
		if err != nil {
			return nil, err
		}
		return []any{name, targets}, nil
	case "bzid_info":
		info, err := b.BzidInfo(ctx)
		if err != nil {
			return nil, err
		}
		return info, nil // its MarshalJSON writes the reference's dict
	case "list_saved_models":
		m, err := a.str(0)
		if err != nil {
			return nil, err
		}
		sms, err := b.ListSavedModels(ctx, m)
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, sm := range sms {
			out = append(out, sm.String())
		}
		return out, nil
	case "get_service_info":
		c, err := a.container(0)
		if err != nil {
			return nil, err
		}
		info, ok, err := b.ServiceInfo(ctx, c)
		if err != nil || !ok {
			return nil, err
		}
		return infoDict(info), nil
	}
	return nil, &harness.InputError{Key: "plan", Msg: "unknown op " + st.op}
}

// args reads a step's positional arguments.
type args []json.RawMessage

func (a args) decode(i int, v any) error {
	if i >= len(a) {
		return &harness.InputError{Key: "plan", Msg: fmt.Sprintf("missing argument %d", i)}
	}
	if err := json.Unmarshal(a[i], v); err != nil {
		return &harness.InputError{Key: "plan", Msg: fmt.Sprintf("argument %d: %v", i, err)}
	}
	return nil
}

func (a args) str(i int) (string, error) {
	var s string
	return s, a.decode(i, &s)
}

func (a args) pair(i int) ([2]string, error) {
	var p [2]string
	return p, a.decode(i, &p)
}

func (a args) savedModel(i int) (bk.SavedModel, error) {
	p, err := a.pair(i)
	return bk.SavedModel{ModelName: p[0], SubGraph: p[1]}, err
}

func (a args) container(i int) (bk.Container, error) {
	p, err := a.pair(i)
	return bk.Container{Cluster: p[0], ID: p[1]}, err
}

// deployConfig reads the constructor's keyword arguments (absent ones are None).
func (a args) deployConfig(i int) (bk.SavedModelDeployConfig, error) {
	if i >= len(a) {
		return bk.SavedModelDeployConfig{}, &harness.InputError{Key: "plan", Msg: fmt.Sprintf("missing argument %d", i)}
	}
	cfg, err := bk.DeserializeSavedModelDeployConfig(a[i])
	if err != nil {
		return cfg, &harness.InputError{Key: "plan", Msg: err.Error()}
	}
	return cfg, nil
}

func (a args) serviceInfo(i int) (bk.ContainerServiceInfo, error) {
	if i >= len(a) {
		return bk.ContainerServiceInfo{}, &harness.InputError{Key: "plan", Msg: fmt.Sprintf("missing argument %d", i)}
	}
	info, err := bk.DeserializeContainerServiceInfo(a[i])
	if err != nil {
		return info, &harness.InputError{Key: "plan", Msg: err.Error()}
	}
	return info, nil
}
