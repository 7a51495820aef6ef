// Command agent_client is the reference's agent_client.py: an operator's client of a serving agent
// (AgentService over gRPC) and of the bzid's ZooKeeper trees, configured by the agent's agent.conf
// (bzid, zk_servers, agent_port, base_name):
//
//	--cmd_type=hb                    HeartBeat: the address table of --server_type
//	--cmd_type=gr                    GetReplicas: the addresses of --server_type:--task of the model
//	--cmd_type=addr (get --args=addr) the model's replicas under /{bzid}/service/{model}
//	--cmd_type=get --args=res|pub|portal|lock|elect
//	                                 the nodes under /{bzid}/resource|publish|portal|lock|election
//	--cmd_type=get --args=info       the sizes of the sub models of the export --model_dir
//	--cmd_type=load / unload         write / delete the model's node /{bzid}/portal/{model}
//	--cmd_type=clean --args=portal|pub|addr|res
//	                                 delete the children of /{bzid}/portal|publish|service|resource
//
// Output is the reference's, byte for byte. --timeout bounds the whole command. Exit status: 0 on
// success, 2 for bad flags or input (checked before anything is contacted), 1 when a call failed.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	clientspec "github.com/monolith-go/monolith/gen/spec/agent_service/agent_client"
	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/resource"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
)

// cmdFlags is the command line: the flags the specs declare.
type cmdFlags struct {
	cli.Common
	utilsspec.ConfFlags
	clientspec.AgentClientFlags
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv, dialZK))
}

// dialFunc opens a ZooKeeper session on servers (kazoo's hosts string); the caller closes it.
// Tests pass one that returns an in-memory fake.
type dialFunc func(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error)

// dialZK connects to a real ensemble.
func dialZK(ctx context.Context, servers string, log *slog.Logger) (zk.Client, error) {
	return zkreal.ConnectHosts(ctx, servers, zkreal.Options{Logger: log})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env agentconf.LookupEnv, dial dialFunc) int {
	var c cmdFlags
	if code, done := cli.Parse("agent_client", "Client of a Monolith serving agent (AgentService) and of its bzid's ZooKeeper trees.", &c, args, stdout, stderr, 2); done {
		return code
	}
	log := c.Logger(stderr, nil)
	// Packages that log through slog's default logger log in the same format.
	slog.SetDefault(log)
	cmd, err := prepare(c, env, log, dial)
	if err == nil {
		var out string
		if out, err = cmd.execute(ctx); err == nil {
			_, err = io.WriteString(stdout, out)
		}
	}
	// Errors of the packages used may already name the command: cli.Exit does not repeat it.
	return cli.Exit("agent_client", err, stderr)
}

// command is one checked command line with its agent conf.
type command struct {
	cmdFlags
	conf  *agentconf.AgentConfig
	model string // the agent conf's base_name, else --model_name
	bzid  string
	log   *slog.Logger
	dial  dialFunc
}

// zkSubtrees are the trees get --args lists and clean --args empties (the latter recursively
// where the reference did): args -> node under /{bzid}.
var zkSubtrees = map[string]struct {
	node      string
	cleanable bool
	recursive bool
}{
	"res":    {"resource", true, true},
	"pub":    {"publish", true, false},
	"portal": {"portal", true, false},
	"lock":   {"lock", false, false},
	"elect":  {"election", false, false},
	"addr":   {"service", true, true},
}

// prepare loads the agent conf and checks that the command has what it needs, before anything is
// contacted (the reference asserted or failed halfway).
func prepare(c cmdFlags, env agentconf.LookupEnv, log *slog.Logger, dial dialFunc) (*command, error) {
	if c.Timeout <= 0 {
		return nil, cli.Usage(fmt.Errorf("--timeout %v is not positive", c.Timeout))
	}
	if c.Conf == "" {
		return nil, cli.Usage(errors.New("--conf is needed: the agent conf names the bzid, zk_servers and agent_port"))
	}
	conf, err := agentconf.FromFile(c.Conf, agentconf.Options{Env: env, Logger: log})
	if err != nil {
		return nil, cli.Usage(err)
	}
	if c.Port != 0 {
		port := c.Port
		conf.AgentPort = &port
	}
	cmd := &command{cmdFlags: c, conf: conf, model: c.ModelName, log: log, dial: dial}
	if conf.BaseName != nil && *conf.BaseName != "" { // agent_conf.base_name or FLAGS.model_name
		cmd.model = *conf.BaseName
	}

	usesZK := true
	needsModel := true
	switch {
	case c.CmdType == "hb":
		usesZK, needsModel = false, false
	case c.CmdType == "gr":
		usesZK = false
	case c.CmdType == "get" && c.Args == "info":
		usesZK, needsModel = false, false
		if c.ModelDir == "" {
			return nil, cli.Usage(errors.New("get --args=info needs --model_dir, the export directory"))
		}
	case c.CmdType == "get" && c.Args != "addr", c.CmdType == "clean":
		needsModel = false
		if c.CmdType == "clean" && !zkSubtrees[c.Args].cleanable {
			return nil, cli.Usage(fmt.Errorf("%s is not support!", c.Args))
		}
	}
	if needsModel {
		if cmd.model == "" {
			return nil, cli.Usage(fmt.Errorf("%s needs a model name: --model_name or the agent conf's base_name", c.CmdType))
		}
		if usesZK && (strings.Contains(cmd.model, "/") || cmd.model == "." || cmd.model == "..") {
			return nil, cli.Usage(fmt.Errorf("model name %q is not a ZooKeeper node name", cmd.model))
		}
	}
	if usesZK {
		if conf.Bzid == nil || *conf.Bzid == "" || strings.Contains(*conf.Bzid, "/") {
			return nil, cli.Usage(fmt.Errorf("%s: bzid %s: want a name without '/'", c.Conf, pyfmt.Repr(optAny(conf.Bzid))))
		}
		cmd.bzid = *conf.Bzid
		if conf.ZKServers == nil || strings.TrimSpace(*conf.ZKServers) == "" {
			return nil, cli.Usage(fmt.Errorf("%s: no zk_servers", c.Conf))
		}
		if _, _, err := zkreal.ParseHosts(*conf.ZKServers); err != nil {
			return nil, cli.Usage(fmt.Errorf("%s: %w", c.Conf, err))
		}
	}
	return cmd, nil
}

func optAny(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// execute runs the command and returns what it prints.
func (c *command) execute(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	switch {
	case c.CmdType == "hb":
		return c.heartBeat(ctx)
	case c.CmdType == "gr":
		return c.getReplicas(ctx)
	case c.CmdType == "get" && c.Args == "info":
		return c.modelInfo()
	}
	var out string
	err := c.withZK(ctx, func(client zk.Client) error {
		var err error
		switch {
		case c.CmdType == "addr", c.CmdType == "get" && c.Args == "addr":
			out, err = listReplicas(ctx, client, c.bzid, c.model)
		case c.CmdType == "get":
			out, err = listNodes(ctx, client, c.bzid, c.Args)
		case c.CmdType == "load":
			err = c.load(ctx, client)
		case c.CmdType == "unload":
			err = c.unload(ctx, client)
		case c.CmdType == "clean":
			err = c.clean(ctx, client)
		default:
			err = cli.Usage(fmt.Errorf("--cmd_type %q is not supported", c.CmdType))
		}
		return err
	})
	return out, err
}

// withZK runs fn with a session on the agent conf's zk_servers, closed afterwards.
func (c *command) withZK(ctx context.Context, fn func(zk.Client) error) error {
	servers := *c.conf.ZKServers
	client, err := c.dial(ctx, servers, c.log)
	if err != nil {
		return fmt.Errorf("connect to ZooKeeper %s: %w", servers, err)
	}
	defer client.Close()
	return fn(client)
}

// serverType maps --server_type as the reference does: ps, dense, anything else entry.
func (c *command) serverType() pb.ServerType {
	switch c.ServerType {
	case "ps":
		return pb.ServerType_PS
	case "dense":
		return pb.ServerType_DENSE
	}
	return pb.ServerType_ENTRY
}

// dialAgent connects to the AgentService: --target, else this host and the agent port.
func (c *command) dialAgent() (*agentsvc.Client, error) {
	target := c.Target
	if target == "" {
		t, err := agentsvc.Target(c.conf)
		if err != nil {
			return nil, cli.Usage(err)
		}
		target = t
	}
	creds, err := tlsconfig.Files{Cert: c.TlsCert, Key: c.TlsKey, CA: c.TlsCa}.DialOption()
	if err != nil {
		return nil, cli.Usage(err)
	}
	client, err := agentsvc.Dial(target, agentsvc.ClientOptions{Timeout: c.Timeout, DialOptions: []grpc.DialOption{creds}})
	if err != nil {
		return nil, cli.Usage(err)
	}
	return client, nil
}

// heartBeat prints each address list of the table as the reference does: its text format split
// into lines ("address: \"host:port\""), under "{key}  -> ({n}) ". Keys are sorted.
func (c *command) heartBeat(ctx context.Context) (string, error) {
	client, err := c.dialAgent()
	if err != nil {
		return "", err
	}
	defer client.Close()
	resp, err := client.HeartBeat(ctx, c.serverType())
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(resp.GetAddresses())) {
		addrs := strings.Split(strings.TrimSpace(pytext.Format(resp.GetAddresses()[k])), "\n")
		fmt.Fprintf(&b, "%s  -> (%d) \n\t%s\n", k, len(addrs), strings.Join(addrs, "\n\t"))
	}
	return b.String(), nil
}

// getReplicas prints print(ServerType.Name(st), task, " => ", addresses).
func (c *command) getReplicas(ctx context.Context) (string, error) {
	client, err := c.dialAgent()
	if err != nil {
		return "", err
	}
	defer client.Close()
	st := c.serverType()
	resp, err := client.GetModelReplicas(ctx, c.model, st, int32(c.Task))
	if err != nil {
		return "", err
	}
	addrs := resp.GetAddressList().GetAddress()
	if addrs == nil {
		addrs = []string{}
	}
	return fmt.Sprintf("%s %d  =>  %s\n", st, c.Task, pyfmt.Repr(addrs)), nil
}

// modelInfo prints cal_model_info_v2's dict: {'entry': (size, 'version path'), ...}, sorted by
// sub model.
func (c *command) modelInfo() (string, error) {
	info, err := resource.ModelInfo(c.ModelDir, resource.ModelInfoOptions{Ckpt: c.Ckpt, Logger: c.log})
	if err != nil {
		return "", cli.Usage(err)
	}
	names := slices.Sorted(maps.Keys(info))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: (%d, %s)", pyfmt.StrRepr(n), info[n].Size, pyfmt.StrRepr(info[n].VersionPath))
	}
	return "{" + strings.Join(parts, ", ") + "}\n", nil
}

// taskNode is a "server_type:task" child of a model's service node (TASK in the reference, whose
// \w and \d are Unicode classes and whose $ also matches before a final newline); other children
// are "idc:cluster" locations holding task nodes.
var taskNode = regexp.MustCompile(`^([\p{L}\p{N}_]+):(\p{Nd}+)\n?$`)

// fetchLimit bounds the concurrent reads of a listing.
const fetchLimit = 16

// node is a child read by fetchAll; ok is false when it vanished before it was read.
type node struct {
	path string
	data []byte
	ok   bool
}

// fetchAll reads the nodes at paths concurrently; a node that vanished is not ok.
func fetchAll(ctx context.Context, client zk.Client, paths []string) ([]node, error) {
	out := make([]node, len(paths))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchLimit)
	for i, p := range paths {
		g.Go(func() error {
			data, _, err := client.Get(ctx, p)
			switch {
			case errors.Is(err, zk.ErrNoNode):
				out[i] = node{path: p}
			case err != nil:
				return err
			default:
				out[i] = node{path: p, data: data, ok: true}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// children lists path; ok is false when it does not exist.
func children(ctx context.Context, client zk.Client, path string) (names []string, ok bool, err error) {
	names, err = client.Children(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return names, true, nil
}

// listReplicas prints the replicas under /{bzid}/service/{model}, one line each, sorted:
// path, archon address, address and state name.
func listReplicas(ctx context.Context, client zk.Client, bzid, model string) (string, error) {
	prefix := "/" + bzid + "/service/" + model
	top, ok, err := children(ctx, client, prefix)
	if err != nil {
		return "", err
	}
	if !ok {
		return model + " has not load !\n", nil
	}
	var servers []string
	for _, child := range top {
		if taskNode.MatchString(child) {
			servers = append(servers, child)
			continue
		}
		tasks, _, err := children(ctx, client, prefix+"/"+child) // a vanished location has none
		if err != nil {
			return "", err
		}
		for _, t := range tasks {
			servers = append(servers, child+"/"+t)
		}
	}
	// The task nodes are listed, and then the replicas read, concurrently: a listing is a few
	// hundred round trips otherwise.
	replicas := make([][]string, len(servers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchLimit)
	for i, s := range servers {
		g.Go(func() error {
			var err error
			replicas[i], _, err = children(gctx, client, prefix+"/"+s) // a vanished task has none
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	var paths []string
	for i, s := range servers {
		for _, r := range replicas[i] {
			paths = append(paths, prefix+"/"+s+"/"+r)
		}
	}
	nodes, err := fetchAll(ctx, client, paths)
	if err != nil {
		return "", err
	}
	lines := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if !n.ok {
			continue
		}
		rm, err := datadef.DeserializeReplicaMeta(n.data)
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.path, err)
		}
		lines = append(lines, fmt.Sprintf("%s\tarchon_address: %s\taddress: %s\tstate: %s",
			n.path, pyfmt.OptStr(rm.ArchonAddress), pyfmt.OptStr(rm.Address), rm.Stat))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}

// listNodes prints the children of /{bzid}/{tree} sorted, each with its data as Python prints
// bytes ("0:0 b'{...}'"), or "{}" when there are none.
func listNodes(ctx context.Context, client zk.Client, bzid, args string) (string, error) {
	base := "/" + bzid + "/" + zkSubtrees[args].node
	names, ok, err := children(ctx, client, base)
	if err != nil {
		return "", err
	}
	if !ok {
		return "no " + args + " found !\n", nil
	}
	sort.Strings(names)
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = base + "/" + n
	}
	nodes, err := fetchAll(ctx, client, paths)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	for i, n := range nodes {
		if n.ok {
			fmt.Fprintf(&b, "%s %s\n", names[i], pyfmt.BytesRepr(n.data))
		}
	}
	if b.Len() == 0 {
		return "{}\n", nil
	}
	return b.String(), nil
}

func (c *command) portalPath() string { return "/" + c.bzid + "/portal/" + c.model }

// load writes the model's ModelMeta to its portal node, creating it (and its parents) or
// replacing its data.
func (c *command) load(ctx context.Context, client zk.Client) error {
	mm := datadef.NewModelMeta()
	mm.ModelName = &c.model
	if c.ModelDir != "" {
		mm.ModelDir = &c.ModelDir
	}
	if c.Ckpt != "" {
		mm.Ckpt = &c.Ckpt
	}
	mm.NumShard = c.NumShard
	data, path := mm.Serialize(), c.portalPath()
	_, err := client.Create(ctx, path, data, zk.CreateOptions{MakePath: true})
	if errors.Is(err, zk.ErrNodeExists) {
		c.log.Info("portal node exists, replacing its data", "path", path)
		_, err = client.Set(ctx, path, data, zk.AnyVersion)
	}
	if err != nil {
		return fmt.Errorf("load %s: %w", c.model, err)
	}
	return nil
}

// unload deletes the model's portal node; one already gone is fine.
func (c *command) unload(ctx context.Context, client zk.Client) error {
	path := c.portalPath()
	err := client.Delete(ctx, path, zk.DeleteOptions{})
	if errors.Is(err, zk.ErrNoNode) {
		c.log.Info("nothing to unload", "path", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("unload %s: %w", c.model, err)
	}
	return nil
}

// clean deletes every child of the --args tree (recursively for addr and res), and reports the
// deletions that failed.
func (c *command) clean(ctx context.Context, client zk.Client) error {
	tree := zkSubtrees[c.Args]
	base := "/" + c.bzid + "/" + tree.node
	names, ok, err := children(ctx, client, base)
	if err != nil {
		return err
	}
	if !ok {
		c.log.Info("nothing to clean", "path", base)
		return nil
	}
	var errs []error
	for _, n := range names {
		err := client.Delete(ctx, base+"/"+n, zk.DeleteOptions{Recursive: tree.recursive})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean %s: %w", base, err)
	}
	return nil
}
