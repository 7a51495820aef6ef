// Package agentsvc adapts pkg/agentsvc to the parity cases of monolith/agent_service/agent_service.py:
// it starts the AgentService gRPC server on loopback over the case's data source (the real
// replica.Watcher or zkmirror.Mirror on zkfake, seeded as the recording was, or the v3 callback)
// and replays the case's requests through the Go client, recording each answer in Python's text
// format.
package agentsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// Golden calls, one per data source.
const (
	// CallV1 serves a ReplicaWatcher (agent v1) on the reference's FakeKazooClient.
	CallV1 = "AgentService(ReplicaWatcher over FakeKazooClient) gRPC calls"
	// CallV2 serves a ZKMirror (agent v2) on the reference's FakeKazooClient.
	CallV2 = "AgentService(ZKMirror over FakeKazooClient, conf agent_version=2) gRPC calls"
	// CallV3 serves an AgentDataProvider (agent v3).
	CallV3 = "AgentService(AgentDataProvider, conf agent_version=3) gRPC calls"
)

// memoryPlaceholder is how the goldens write GetResource's memory (the host's available memory).
const memoryPlaceholder = "<memory>"

// rpcTimeout bounds each replayed call.
const rpcTimeout = 10 * time.Second

// Register adds the agent_service.py calls.
func Register(r *harness.Registry) {
	r.Register(CallV1, v1)
	r.Register(CallV2, v2)
	r.Register(CallV3, v3)
}

// defaultScript is the reference scenario of CallV1 and CallV3 (the CallV3 recording lists the
// requests in the output only): HeartBeat for PS and ENTRY, GetReplicas, GetResource.
// input.requests overrides it.
var defaultScript = []rpcRequest{
	{RPC: "HeartBeat", Request: map[string]any{"server_type": "PS"}},
	{RPC: "HeartBeat", Request: map[string]any{"server_type": "ENTRY"}},
	{RPC: "GetReplicas", Request: map[string]any{"server_type": "PS", "task": 0}},
	{RPC: "GetResource", Request: map[string]any{}},
}

type rpcRequest struct {
	RPC     string
	Request map[string]any
}

// requests reads input.requests ([["HeartBeat", {"server_type": "PS"}], ...]), or def without it.
func requests(in harness.Input, def []rpcRequest) ([]rpcRequest, error) {
	if !in.Has("requests") {
		return def, nil
	}
	var raw [][2]json.RawMessage
	if err := in.Decode("requests", &raw); err != nil {
		return nil, err
	}
	out := make([]rpcRequest, 0, len(raw))
	for _, r := range raw {
		var req rpcRequest
		if err := json.Unmarshal(r[0], &req.RPC); err != nil {
			return nil, &harness.InputError{Key: "requests", Msg: err.Error()}
		}
		if err := json.Unmarshal(r[1], &req.Request); err != nil {
			return nil, &harness.InputError{Key: "requests", Msg: err.Error()}
		}
		out = append(out, req)
	}
	return out, nil
}

func v3(c *harness.Ctx, in harness.Input) (any, error) {
	conf, err := inputConf(c, in)
	if err != nil {
		return nil, err
	}
	var addrs map[string][]string
	if err := in.Decode("addrs", &addrs); err != nil {
		return nil, err
	}
	reqs, err := requests(in, defaultScript)
	if err != nil {
		return nil, err
	}
	res, err := agentsvc.ResourceFromConfig(conf)
	if err != nil {
		return nil, err
	}
	svc := agentsvc.NewProviderService(func() map[string][]string { return addrs }, res)
	return replay(svc, reqs)
}

// replay serves svc on a free loopback port (conf's agent_port may be taken on this machine; the
// reported address still carries it) and makes each request through the Go client.
func replay(svc *agentsvc.Service, reqs []rpcRequest) (any, error) {
	srv, err := agentsvc.Listen(svc, 0)
	if err != nil {
		return nil, err
	}
	srv.Start()
	defer srv.Stop(time.Second)
	client, err := agentsvc.Dial(fmt.Sprintf("127.0.0.1:%d", srv.Port()), agentsvc.ClientOptions{Timeout: rpcTimeout})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	out := make([]map[string]any, 0, len(reqs))
	for _, r := range reqs {
		resp, err := send(client, r)
		rec := map[string]any{"rpc": r.RPC, "request": r.Request}
		if err != nil {
			st, ok := status.FromError(unwrap(err))
			if !ok {
				return nil, err
			}
			rec["grpc_error"] = map[string]string{"code": pythonCode(st.Code().String()), "details": st.Message()}
		} else {
			text, err := responseText(resp)
			if err != nil {
				return nil, err
			}
			rec["response_text"] = text
		}
		out = append(out, rec)
	}
	return out, nil
}

func send(c *agentsvc.Client, r rpcRequest) (proto.Message, error) {
	ctx := context.Background()
	var st pb.ServerType
	if name, ok := r.Request["server_type"].(string); ok {
		v, found := pb.ServerType_value[name]
		if !found {
			return nil, &harness.InputError{Key: "requests", Msg: "unknown server_type " + name}
		}
		st = pb.ServerType(v)
	}
	switch r.RPC {
	case "HeartBeat":
		return c.HeartBeat(ctx, st)
	case "GetReplicas":
		task, _ := r.Request["task"].(float64)
		model, _ := r.Request["model_name"].(string)
		return c.GetModelReplicas(ctx, model, st, int32(task))
	case "GetResource":
		return c.GetResource(ctx)
	}
	return nil, &harness.InputError{Key: "requests", Msg: "unknown rpc " + r.RPC}
}

var memoryLine = regexp.MustCompile(`(?m)^memory: (-?\d+)$`)

// responseText is the response in Python's text format, with GetResource's memory written as the
// goldens write it once it is checked to be a positive figure.
func responseText(resp proto.Message) (string, error) {
	text := pytext.Format(resp)
	if r, ok := resp.(*pb.GetResourceResponse); ok && r.Address != "" {
		if r.Memory <= 0 {
			return "", fmt.Errorf("GetResource memory %d is not a positive figure", r.Memory)
		}
		text = memoryLine.ReplaceAllString(text, "memory: "+memoryPlaceholder)
	}
	return text, nil
}

// pythonCode writes a Go status code name (InvalidArgument) as grpcio does (INVALID_ARGUMENT).
func pythonCode(goName string) string {
	var b strings.Builder
	for i, r := range goName {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

func unwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// inputConf is the AgentConfig the reference built from input.conf_kwargs.
func inputConf(c *harness.Ctx, in harness.Input) (*agentconf.AgentConfig, error) {
	raw, err := in.Raw("conf_kwargs")
	if err != nil {
		return nil, err
	}
	return utils.AgentConfigFromKwargs(c, raw)
}
