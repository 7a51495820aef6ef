// Package discovery adapts pkg/discovery to the parity cases of
// monolith/native_training/service_discovery.py: TfConfigServiceDiscovery's properties and query,
// MLPServiceDiscovery on an MLP environment (one call, or an op sequence), and ZKServiceDiscovery
// op sequences on a real ZooKeeper the adapter starts.
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	trainenvadapter "github.com/monolith-go/monolith/parity/adapters/trainenv"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
)

// Register adds the service_discovery.py calls.
func Register(r *harness.Registry) {
	r.Register("TfConfigServiceDiscovery.addr", tfConfigProp(func(d *discovery.TFConfig) (any, error) { return d.Addr() }))
	r.Register("TfConfigServiceDiscovery.index", tfConfigProp(func(d *discovery.TFConfig) (any, error) { return d.Index() }))
	r.Register("TfConfigServiceDiscovery.server_type", tfConfigProp(func(d *discovery.TFConfig) (any, error) { return d.ServerType() }))
	r.Register("TfConfigServiceDiscovery.query(name)", tfConfigQuery)
	r.Register("MLPServiceDiscovery(env)", mlpProps)
	r.Register("MLPServiceDiscovery.query_all()", mlpQueryAll)
	r.Register("MLPServiceDiscovery op sequence", mlpOps)
	r.Register("ZKServiceDiscovery(job_name, real ZooKeeper) op sequence", zkScenario)
}

// callTimeout bounds one call of a case.
const callTimeout = 30 * time.Second

var quietLog = slog.New(slog.DiscardHandler)

func tfConfig(in harness.Input) (*discovery.TFConfig, error) {
	raw, err := in.Raw("tf_config")
	if err != nil {
		return nil, err
	}
	// The reference got the dict json.loads made of TF_CONFIG; this is that text.
	return discovery.NewTFConfig(string(raw))
}

func tfConfigProp(prop func(*discovery.TFConfig) (any, error)) harness.Func {
	return func(_ *harness.Ctx, in harness.Input) (any, error) {
		d, err := tfConfig(in)
		if err != nil {
			return nil, err
		}
		return prop(d)
	}
}

func tfConfigQuery(_ *harness.Ctx, in harness.Input) (any, error) {
	name, err := in.Str("name")
	if err != nil {
		return nil, err
	}
	d, err := tfConfig(in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return d.Query(ctx, name)
}

func newMLP(c *harness.Ctx) (*discovery.MLPDiscovery, error) {
	e, err := trainenvadapter.NewMLPEnv(c)
	if err != nil {
		return nil, err
	}
	return discovery.NewMLP(e), nil
}

func mlpProps(c *harness.Ctx, _ harness.Input) (any, error) {
	d, err := newMLP(c)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	addr, err := d.Addr()
	if err != nil {
		return nil, err
	}
	idx, err := d.Index()
	if err != nil {
		return nil, err
	}
	st, err := d.ServerType()
	if err != nil {
		return nil, err
	}
	return map[string]any{"addr": addr, "index": idx, "server_type": st}, nil
}

func mlpQueryAll(c *harness.Ctx, _ harness.Input) (any, error) {
	d, err := newMLP(c)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return d.QueryAll(ctx)
}

// op is one step of an op sequence: [op, args].
type op struct {
	name string
	args []json.RawMessage
	raw  json.RawMessage // args as given, echoed in the step
}

func (o *op) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != 2 {
		return fmt.Errorf("want [op, args], got %.60s", b)
	}
	if err := json.Unmarshal(parts[0], &o.name); err != nil {
		return fmt.Errorf("op: %w", err)
	}
	o.raw = parts[1]
	return json.Unmarshal(parts[1], &o.args)
}

// registration reads the args (name, index, addr) of register and deregister.
func registration(args []json.RawMessage) (string, int, string, error) {
	var name, addr string
	var index int
	if len(args) != 3 {
		return "", 0, "", fmt.Errorf("want (name, index, addr), got %d args", len(args))
	}
	if err := errors.Join(json.Unmarshal(args[0], &name), json.Unmarshal(args[1], &index), json.Unmarshal(args[2], &addr)); err != nil {
		return "", 0, "", err
	}
	return name, index, addr, nil
}

func mlpOps(c *harness.Ctx, in harness.Input) (any, error) {
	var ops []op
	if err := in.Decode("ops", &ops); err != nil {
		return nil, err
	}
	d, err := newMLP(c)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	steps := []map[string]any{}
	for i, o := range ops {
		result, err := mlpOp(ctx, d, o)
		var bad *badArgs
		if errors.As(err, &bad) {
			return nil, &harness.InputError{Key: fmt.Sprintf("ops[%d]", i), Msg: bad.Error()}
		}
		steps = append(steps, map[string]any{"op": o.name, "args": o.raw, "result": result, "error": pyError(err)})
	}
	return map[string]any{"steps": steps}, nil
}

// badArgs is an op the adapter cannot read (a broken golden, not an outcome of the port).
type badArgs struct{ err error }

func (b *badArgs) Error() string { return b.err.Error() }

func mlpOp(ctx context.Context, d *discovery.MLPDiscovery, o op) (any, error) {
	switch o.name {
	case "register", "deregister":
		name, index, addr, err := registration(o.args)
		if err != nil {
			return nil, &badArgs{err}
		}
		if o.name == "register" {
			return nil, d.Register(ctx, name, index, addr)
		}
		return nil, d.Deregister(ctx, name, index, addr)
	case "query":
		var name string
		skip := false
		if len(o.args) < 1 || json.Unmarshal(o.args[0], &name) != nil {
			return nil, &badArgs{fmt.Errorf("query wants (name[, skip_port_check])")}
		}
		if len(o.args) > 1 && json.Unmarshal(o.args[1], &skip) != nil {
			return nil, &badArgs{fmt.Errorf("query: skip_port_check is not a bool")}
		}
		return d.QueryWith(ctx, name, skip)
	case "query_all":
		return d.QueryAll(ctx)
	}
	return nil, &badArgs{fmt.Errorf("unknown op %q", o.name)}
}

// pyKinds names, for the step errors of op sequences, the Python exception each errkind stands
// for (the inverse of the harness's table for the kinds these modules raise).
var pyKinds = map[errkind.Kind]string{
	errkind.Precondition: "AssertionError",
	errkind.Value:        "ValueError",
	errkind.Type:         "TypeError",
	errkind.NotFound:     "KeyError",
	errkind.Runtime:      "RuntimeError",
}

// pyError writes a step's error as the goldens record a caught exception, {"type", "message"}.
// Three messages are the reference's by construction: a bare assert's is empty, so a Precondition
// error (the Go form of those asserts) is written with none; a NotRegisteredError is the
// reference's KeyError on the (name, index) key, whose message is that tuple's repr; an AddrError
// (an address without a colon) is the ValueError of unpacking addr.split(':') into two names. Any
// other error keeps its Go message and its kind's name, so it cannot pass for a Python exception.
func pyError(err error) any {
	if err == nil {
		return nil
	}
	kind := errkind.Of(err)
	typ, ok := pyKinds[kind]
	if !ok {
		typ = "errkind." + kind.String()
	}
	msg := err.Error()
	var nr *discovery.NotRegisteredError
	var bad *discovery.AddrError
	switch {
	case errors.As(err, &nr):
		msg = fmt.Sprintf("(%s, %d)", pyfmt.StrRepr(nr.Name), nr.Index)
	case errors.As(err, &bad):
		msg = "not enough values to unpack (expected 2, got 1)"
	case kind == errkind.Precondition:
		msg = ""
	}
	return map[string]string{"type": typ, "message": msg}
}
