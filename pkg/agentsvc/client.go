package agentsvc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// DefaultTimeout bounds each client call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// ClientOptions configure a Client.
type ClientOptions struct {
	// Timeout bounds each call whose context has no earlier deadline; 0 means DefaultTimeout.
	Timeout time.Duration
	// DialOptions are added to the connection's options (insecure transport by default).
	DialOptions []grpc.DialOption
}

// Client is the reference's SvrClient: AgentService calls over one lazily connected channel, each
// with a deadline.
type Client struct {
	conn    *grpc.ClientConn
	stub    pb.AgentServiceClient
	timeout time.Duration
}

// Dial returns a client of the AgentService at target ("host:port"). Like a gRPC channel it
// connects on first use.
func Dial(target string, opts ClientOptions) (*Client, error) {
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts.DialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("agent service client %s: %w", target, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{conn: conn, stub: pb.NewAgentServiceClient(conn), timeout: timeout}, nil
}

// Target is where the reference's SvrClient connects for conf: MY_HOST_IP, else this host's IP
// (agentconf.LocalIP), and agent_port.
func Target(conf *agentconf.AgentConfig) (string, error) {
	if conf.AgentPort == nil {
		return "", errkind.New(errkind.Attribute, "agent service client: agent_port is not set")
	}
	return net.JoinHostPort(agentconf.LocalIP(conf.LookupEnv), strconv.Itoa(*conf.AgentPort)), nil
}

// NewClient is SvrClient(config): a client of the agent described by conf (see Target).
func NewClient(conf *agentconf.AgentConfig, opts ClientOptions) (*Client, error) {
	target, err := Target(conf)
	if err != nil {
		return nil, err
	}
	return Dial(target, opts)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// callCtx bounds ctx by the client's timeout.
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// HeartBeat is SvrClient.heart_beat: the address table of server type st.
func (c *Client) HeartBeat(ctx context.Context, st pb.ServerType) (*pb.HeartBeatResponse, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.stub.HeartBeat(ctx, &pb.HeartBeatRequest{ServerType: st})
	if err != nil {
		return nil, fmt.Errorf("agent service HeartBeat(%s): %w", st, err)
	}
	return resp, nil
}

// GetReplicas is SvrClient.get_replicas: the addresses of task st:task.
func (c *Client) GetReplicas(ctx context.Context, st pb.ServerType, task int32) (*pb.GetReplicasResponse, error) {
	return c.GetModelReplicas(ctx, "", st, task)
}

// GetModelReplicas is GetReplicas for one model (agent v2 needs the model name).
func (c *Client) GetModelReplicas(ctx context.Context, model string, st pb.ServerType, task int32) (*pb.GetReplicasResponse, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.stub.GetReplicas(ctx, &pb.GetReplicasRequest{ServerType: st, Task: task, ModelName: model})
	if err != nil {
		return nil, fmt.Errorf("agent service GetReplicas(%s:%d): %w", st, task, err)
	}
	return resp, nil
}

// GetResource asks the agent for its process's resources.
func (c *Client) GetResource(ctx context.Context) (*pb.GetResourceResponse, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	resp, err := c.stub.GetResource(ctx, &pb.GetResourceRequest{})
	if err != nil {
		return nil, fmt.Errorf("agent service GetResource: %w", err)
	}
	return resp, nil
}

// ParseServerType is SvrClient.get_server_type for a name: "ps", "entry" or "dense" (any case).
// The reference ignored its argument and read an undefined FLAGS.server_type.
func ParseServerType(s string) (pb.ServerType, error) {
	if v, ok := pb.ServerType_value[strings.ToUpper(strings.TrimSpace(s))]; ok {
		return pb.ServerType(v), nil
	}
	return 0, errkind.New(errkind.Generic, "server_type error: %q is not ps, entry or dense", s)
}
