package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// Bounds of a ZooKeeper scenario.
const (
	scenarioTimeout = 2 * time.Minute
	// settleTimeout bounds the wait for the watches after a step (the recorder paused 0.5 s).
	settleTimeout = 10 * time.Second
)

// zkStep is one step of a plan: [instance, op, args].
type zkStep struct {
	instance string
	op
}

func (s *zkStep) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != 3 {
		return fmt.Errorf("want [instance, op, args], got %.60s", b)
	}
	if err := json.Unmarshal(parts[0], &s.instance); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	rest, _ := json.Marshal([]json.RawMessage{parts[1], parts[2]})
	return s.op.UnmarshalJSON(rest)
}

// zkScenario replays input.plan on a real ZooKeeper started for the case ("<zk>" in the golden).
// After each step it waits until every open instance's map is what the tree says (the recorder
// paused 0.5 s for the watches), then records the step's result and the tree under /monolith.
func zkScenario(_ *harness.Ctx, in harness.Input) (any, error) {
	var plan []zkStep
	if err := in.Decode("plan", &plan); err != nil {
		return nil, err
	}
	srv, err := zktest.Launch()
	if err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	observer, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, Logger: quietLog})
	if err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	defer observer.Close()
	open := map[string]*discovery.ZKDiscovery{}
	jobs := map[string]string{}
	defer func() {
		for _, d := range open {
			d.Close()
		}
	}()
	steps := []map[string]any{}
	for i, st := range plan {
		result, err := zkOp(ctx, srv.Addr(), open, jobs, st)
		var bad *badArgs
		if errors.As(err, &bad) {
			return nil, &harness.InputError{Key: fmt.Sprintf("plan[%d]", i), Msg: bad.Error()}
		}
		tree, terr := settle(ctx, observer, open, jobs)
		if terr != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i, st.name, terr)
		}
		steps = append(steps, map[string]any{"instance": st.instance, "op": st.name, "args": st.raw,
			"result": result, "error": pyError(err), "tree": tree})
	}
	return map[string]any{"steps": steps}, nil
}

func zkOp(ctx context.Context, servers string, open map[string]*discovery.ZKDiscovery, jobs map[string]string, st zkStep) (any, error) {
	if st.name == "new" {
		var job string
		if len(st.args) != 1 || json.Unmarshal(st.args[0], &job) != nil {
			return nil, &badArgs{fmt.Errorf("new wants (job_name)")}
		}
		if open[st.instance] != nil {
			return nil, &badArgs{fmt.Errorf("instance %q exists", st.instance)}
		}
		d, err := discovery.NewZK(ctx, discovery.ZKOptions{JobName: job, Servers: servers, Logger: quietLog})
		if err != nil {
			return nil, err
		}
		open[st.instance], jobs[st.instance] = d, job
		return nil, nil
	}
	d := open[st.instance]
	if d == nil {
		return nil, &badArgs{fmt.Errorf("no instance %q", st.instance)}
	}
	switch st.name {
	case "register", "deregister":
		name, index, addr, err := registration(st.args)
		if err != nil {
			return nil, &badArgs{err}
		}
		if st.name == "register" {
			return nil, d.Register(ctx, name, index, addr)
		}
		return nil, d.Deregister(ctx, name, index, addr)
	case "query":
		var name string
		if len(st.args) != 1 || json.Unmarshal(st.args[0], &name) != nil {
			return nil, &badArgs{fmt.Errorf("query wants (name)")}
		}
		return d.Query(ctx, name)
	case "close":
		delete(open, st.instance)
		return nil, d.Close()
	}
	return nil, &badArgs{fmt.Errorf("unknown op %q", st.name)}
}

// settle waits until each open instance's cluster map is the one the tree under its job holds,
// and returns the tree under /monolith.
func settle(ctx context.Context, observer zk.Client, open map[string]*discovery.ZKDiscovery, jobs map[string]string) (map[string]string, error) {
	deadline := time.Now().Add(settleTimeout)
	for {
		tree, err := zk.ReadTree(ctx, observer, discovery.ZKRoot)
		if err != nil {
			return nil, err
		}
		settled := true
		for inst, d := range open {
			if !sameCluster(d.Snapshot(), clusterOf(tree, jobs[inst])) {
				settled = false
			}
		}
		if settled {
			return tree, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the watches did not follow the tree within %v", settleTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// clusterOf is the map the tree implies for job: /monolith/<job>/<type>.<index> with an address.
func clusterOf(tree map[string]string, job string) map[string]map[int]string {
	out := map[string]map[int]string{}
	prefix := zk.Join(discovery.ZKRoot, job) + "/"
	for p, data := range tree {
		child, ok := strings.CutPrefix(p, prefix)
		if !ok || strings.Contains(child, "/") || data == "" {
			continue
		}
		i := strings.LastIndexByte(child, '.')
		var idx int
		if i <= 0 {
			continue
		}
		if _, err := fmt.Sscanf(child[i+1:], "%d", &idx); err != nil {
			continue
		}
		if out[child[:i]] == nil {
			out[child[:i]] = map[int]string{}
		}
		out[child[:i]][idx] = data
	}
	return out
}

// sameCluster compares two maps, a server type without replicas counting as absent.
func sameCluster(a, b map[string]map[int]string) bool {
	nonEmpty := func(m map[string]map[int]string) map[string]map[int]string {
		out := map[string]map[int]string{}
		for k, v := range m {
			if len(v) > 0 {
				out[k] = v
			}
		}
		return out
	}
	a, b = nonEmpty(a), nonEmpty(b)
	return maps.EqualFunc(a, b, func(x, y map[int]string) bool { return maps.Equal(x, y) })
}
