// Package zkmirror adapts pkg/zkmirror to the parity cases of monolith/agent_service/zk_mirror.py:
// scripted sequences of ZKMirror calls, each step recording its result, the events it queued,
// the mirror's paths and a dump of the ZooKeeper tree.
package zkmirror

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

// Golden call names. They all replay input.ops against a ZKMirror started as the reference's
// test starts it (start(): service and publish watches); the last one on a real ZooKeeper.
const (
	CallCRUD    = "ZKMirror create/set/delete/exists"
	CallUnload  = "ZKMirror publish LOAD then UNLOAD"
	CallFakeSeq = "ZKMirror(FakeKazooClient) op sequence"
	CallRealSeq = "ZKMirror(real ZooKeeper) op sequence"
)

// realSuffix is appended to the bzid on a real ZooKeeper (goldens README).
const realSuffix = "rz"

// Register adds the zk_mirror.py calls.
func Register(r *harness.Registry) {
	for _, call := range []string{CallCRUD, CallUnload, CallFakeSeq} {
		r.Register(call, func(c *harness.Ctx, in harness.Input) (any, error) { return runFake(in) })
	}
	r.Register(CallRealSeq, runReal)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func runFake(in harness.Input) (any, error) {
	srv := zkfake.NewServer()
	client, writer := srv.Client(), srv.Client()
	defer client.Close()
	defer writer.Close()
	return runOps(in, client, writer, false, nil)
}

func runReal(_ *harness.Ctx, in harness.Input) (any, error) {
	srv, err := zktest.Launch()
	if err != nil {
		return nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var clients [2]zk.Client
	for i := range clients {
		c, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: 10 * time.Second, Logger: quiet})
		if err != nil {
			return nil, fmt.Errorf("connect to the real ZooKeeper: %w", err)
		}
		defer c.Close()
		clients[i] = c
	}
	return runOps(in, clients[0], clients[1], true, settleQuietly)
}

// step is one recorded call.
type step struct {
	Op             string            `json:"op"`
	Args           any               `json:"args"`
	Result         any               `json:"result"`
	Events         []any             `json:"events"`
	MirrorDataKeys []string          `json:"mirror_data_keys"`
	Tree           map[string]string `json:"tree"`
}

// op is one input step: [name, args]; args is a list of positional arguments or an object of
// keyword arguments.
type op struct {
	name string
	args json.RawMessage
}

func (o *op) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("want [name, args], got %s", b)
	}
	if err := json.Unmarshal(pair[0], &o.name); err != nil {
		return fmt.Errorf("op name: %w", err)
	}
	o.args = pair[1]
	return nil
}

// settleFunc waits until the watches have caught up with the last call.
type settleFunc func(m *zkmirror.Mirror, c zk.Client, root string)

// runOps replays input.ops on a mirror over client; writer (another session) writes input.pre,
// [path, text] nodes that exist before the mirror starts.
func runOps(in harness.Input, client, writer zk.Client, real bool, settle settleFunc) (any, error) {
	bzid, err := in.Str("bzid")
	if err != nil {
		return nil, err
	}
	var ops []op
	if err := in.Decode("ops", &ops); err != nil {
		return nil, err
	}
	shardID, err := intInput(in, "tce_shard_id", "SHARD_ID", -1)
	if err != nil {
		return nil, err
	}
	numShard, err := intInput(in, "num_tce_shard", "MONOLITH_HOST_SHARD_N", 1)
	if err != nil {
		return nil, err
	}
	rw := func(s string) string { return s }
	if real {
		// The reference's realzk run used a separate bzid; the inputs still name the plain one.
		old, nu := "/"+bzid, "/"+bzid+realSuffix
		rw = func(s string) string {
			if s == old || strings.HasPrefix(s, old+"/") {
				return nu + s[len(old):]
			}
			return s
		}
		bzid += realSuffix
	}
	ctx := context.Background()
	if in.Has("pre") {
		var pre [][2]string
		if err := in.Decode("pre", &pre); err != nil {
			return nil, err
		}
		for _, p := range pre {
			if _, err := writer.Create(ctx, rw(p[0]), []byte(p[1]), zk.CreateOptions{MakePath: true}); err != nil {
				return nil, fmt.Errorf("pre %s: %w", p[0], err)
			}
		}
	}
	m, err := zkmirror.New(zkmirror.Config{Client: client, BZID: bzid, ShardID: shardID, NumShard: numShard, Logger: quiet})
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	if err := m.Start(ctx, false); err != nil {
		return nil, err
	}
	root := "/" + bzid
	if settle != nil {
		settle(m, client, root)
	}
	steps := make([]step, 0, len(ops))
	for i, o := range ops {
		args, err := decodeArgs(o.args, rw)
		if err != nil {
			return nil, &harness.InputError{Key: fmt.Sprintf("ops[%d]", i), Msg: err.Error()}
		}
		result, err := apply(ctx, m, o.name, args)
		if err != nil {
			return nil, fmt.Errorf("ops[%d] %s: %w", i, o.name, err)
		}
		if settle != nil {
			settle(m, client, root)
		}
		st := step{Op: o.name, Args: args, Result: result, Events: drain(m.Queue()), MirrorDataKeys: m.MirroredPaths()}
		sort.Strings(st.MirrorDataKeys)
		if st.Tree, err = dumpTree(client, root); err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return map[string]any{"steps": steps}, nil
}

// intInput reads key (null: def, the constructor's default the recording used), else the
// environment variable env (the earlier recordings passed it), else def.
func intInput(in harness.Input, key, env string, def int) (int, error) {
	if in.Has(key) {
		if raw, _ := in.Raw(key); string(raw) == "null" {
			return def, nil
		}
		return in.Int(key)
	}
	if s, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, &harness.InputError{Key: "env." + env, Msg: "not an integer"}
		}
		return n, nil
	}
	return def, nil
}

// decodeArgs decodes an op's arguments keeping number literals, with every string rewritten.
func decodeArgs(raw json.RawMessage, rw func(string) string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return rewrite(v, rw), nil
}

func rewrite(v any, rw func(string) string) any {
	switch t := v.(type) {
	case string:
		return rw(t)
	case []any:
		for i := range t {
			t[i] = rewrite(t[i], rw)
		}
	case map[string]any:
		for k := range t {
			t[k] = rewrite(t[k], rw)
		}
	}
	return v
}

// drain empties the queue, rendering each event as the goldens do.
func drain(q *zkmirror.Queue) []any {
	events := []any{}
	for {
		ev, ok := q.TryGet()
		if !ok {
			return events
		}
		var js any
		dec := json.NewDecoder(bytes.NewReader(ev.Data))
		dec.UseNumber()
		if dec.Decode(&js) != nil {
			js = nil
		}
		events = append(events, map[string]any{
			"path": optStr(ev.Path), "etype": ev.EType.String(), "data": utils.PyBytes(ev.Data), "data_json": js,
		})
	}
}

// dumpTree is zk.ReadTree bounded by 10 s.
func dumpTree(c zk.Client, root string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return zk.ReadTree(ctx, c, root)
}

// settleQuietly waits until nothing observable (the tree, the mirror, the queue) has changed for
// quietFor: a real client runs the watch callbacks after the call that caused them has returned.
// The reference's run slept 0.4 s after each step.
func settleQuietly(m *zkmirror.Mirror, c zk.Client, root string) {
	const (
		quietFor = 150 * time.Millisecond
		poll     = 10 * time.Millisecond
		atMost   = 5 * time.Second
	)
	begin := time.Now()
	last, lastChange := "", begin
	for time.Since(begin) < atMost {
		tree, err := dumpTree(c, root)
		sig := fmt.Sprint(tree, err, mirrorState(m), m.Queue().Len())
		if sig != last {
			last, lastChange = sig, time.Now()
		} else if time.Since(lastChange) >= quietFor {
			return
		}
		time.Sleep(poll)
	}
}

// mirrorState is every mirrored path with its value.
func mirrorState(m *zkmirror.Mirror) string {
	var b strings.Builder
	for _, p := range m.MirroredPaths() {
		d, _ := m.Get(p)
		fmt.Fprintf(&b, "%s=%q\n", p, d)
	}
	return b.String()
}

func optStr(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func optInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}
