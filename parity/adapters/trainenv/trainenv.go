// Package trainenv adapts pkg/trainenv and pkg/trainenv/mlpenv to the parity cases of
// monolith/native_training's mlp_utils.py, env_utils.py, hvd_lib.py, distribution_utils.py and
// yarn_runtime.py. Every call reads the case's input.env, never the process environment, so the
// checker's own variables (an MLP_* or OMPI_* set where it runs) cannot leak into a case.
package trainenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainenv/mlpenv"
)

// Register adds the calls of the five modules.
func Register(r *harness.Registry) {
	r.Register("MLPEnv(env)", newMLPEnv)
	r.Register("MLPEnv.get_host(role,index,is_primary)", getHost)
	r.Register("MLPEnv.get_addr(role,index,is_primary)", getAddr)
	r.Register("MLPEnv.get_all_host(role,is_primary)", getAllHost)
	r.Register("MLPEnv.get_all_addrs(role,is_primary)", getAllAddrs)
	r.Register("MLPEnv.get_port(role,index)", getPort)
	r.Register("MLPEnv.num_replicas(role)", numReplicas)
	r.Register("MLPEnv.dispatcher_target(role)", dispatcherTarget)
	r.Register("check_port(host,port,timeout)", checkPort)
	r.Register("generate_psm_from_uuid(s)", generatePSM)
	r.Register("get_zk_auth_data()", zkAuthData)
	r.Register("hvd_lib.enable_bps", enableBPS)
	r.Register("get_mpi_rank/get_mpi_local_rank/get_mpi_size/get_mpi_local_size()", mpiVars)
	r.Register("get_local_host()", localHost)
}

// callTimeout bounds a case's network calls.
const callTimeout = 30 * time.Second

// NoResolve is the resolver of every case: the goldens give the host in the environment, and the
// checker must not look host names up (it sends traffic to loopback only).
func NoResolve(context.Context, string) ([]string, error) {
	return nil, errors.New("the parity checker does not resolve host names; give YARN_INET_ADDR or CLOUDNATIVE_INET_ADDR")
}

// NewMLPEnv is mlpenv.New on the case's environment.
func NewMLPEnv(c *harness.Ctx) (*mlpenv.Env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return mlpenv.New(ctx, trainenv.Env(c.Env), NoResolve)
}

func newMLPEnv(c *harness.Ctx, _ harness.Input) (any, error) {
	e, err := NewMLPEnv(c)
	if err != nil {
		return nil, err
	}
	// The reference's instance attributes (vars(MLPEnv)) and its two properties.
	return map[string]any{
		"_mlp_env": e.Vars, "all_roles": e.AllRoles, "avaiable": e.Available, "cpu": e.CPU,
		"debug_port": e.DebugPort, "enable_mpi": e.EnableMPI(), "entrypoint_dir": e.EntrypointDir,
		"framework": e.Framework, "gpu": e.GPU, "gpu_type": e.GPUType, "host": e.Host, "index": e.Index,
		"log_path": e.LogPath, "mem": e.Mem, "port": e.Port, "queue_device": e.QueueDevice(), "role": e.Role,
		"ssh_port": e.SSHPort, "task_cmd": e.TaskCmd,
	}, nil
}

// mlpArgs are input.args of the MLPEnv methods; None is null.
type mlpArgs struct {
	Role      *string `json:"role"`
	Index     *int    `json:"index"`
	IsPrimary *bool   `json:"is_primary"`
}

func (a mlpArgs) role() string {
	if a.Role == nil {
		return ""
	}
	return *a.Role
}

func (a mlpArgs) index() int {
	if a.Index == nil {
		return mlpenv.NoIndex
	}
	return *a.Index
}

// primary is is_primary, True by default as in the reference's signatures.
func (a mlpArgs) primary() bool { return a.IsPrimary == nil || *a.IsPrimary }

func withEnv(c *harness.Ctx, in harness.Input) (*mlpenv.Env, mlpArgs, error) {
	var a mlpArgs
	if err := in.Decode("args", &a); err != nil {
		return nil, a, err
	}
	e, err := NewMLPEnv(c)
	return e, a, err
}

// orNone is s, or None when absent.
func orNone(s string, ok bool) any {
	if !ok {
		return nil
	}
	return s
}

func getHost(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	return orNone(e.ReplicaHost(a.role(), a.index(), a.primary())), nil
}

func getAddr(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	addr, ok, err := e.ReplicaAddr(a.role(), a.index(), a.primary())
	if err != nil {
		return nil, err
	}
	return orNone(addr, ok), nil
}

func getAllHost(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	return orNone(e.AllHosts(a.role(), a.primary())), nil
}

func getAllAddrs(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	return e.AllAddrs(a.role(), a.primary()), nil
}

func getPort(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	return e.ReplicaPort(a.role(), a.index())
}

func numReplicas(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	return e.NumReplicas(a.role())
}

func dispatcherTarget(c *harness.Ctx, in harness.Input) (any, error) {
	e, a, err := withEnv(c, in)
	if err != nil {
		return nil, err
	}
	return e.DispatcherTarget(a.role())
}

// checkPort: the golden's port ("<port>") was a free port on host with a listening socket, or, when
// input.listening is false, a port the recorder bound and closed again; the adapter does the same.
func checkPort(_ *harness.Ctx, in harness.Input) (any, error) {
	host, err := in.Str("host")
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, &harness.InputError{Key: "host", Msg: fmt.Sprintf("%q is not a loopback address; the checker connects to loopback only", host)}
	}
	timeout, err := in.Int("timeout")
	if err != nil {
		return nil, err
	}
	listening := true
	if in.Has("listening") {
		if listening, err = in.Bool("listening"); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("check_port: listen: %w", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if !listening {
		ln.Close()
	}
	return mlpenv.CheckPort(context.Background(), host, port, time.Duration(timeout)*time.Second), nil
}

func generatePSM(_ *harness.Ctx, in harness.Input) (any, error) {
	s, err := in.Str("s")
	if err != nil {
		return nil, err
	}
	return trainenv.GeneratePSMFromUUID(s), nil
}

func zkAuthData(c *harness.Ctx, _ harness.Input) (any, error) {
	auth := trainenv.ZKAuthData(trainenv.Env(c.Env))
	if auth == nil {
		return nil, nil
	}
	out := make([][2]string, len(auth))
	for i, a := range auth {
		out[i] = [2]string{a.Scheme, a.Credential}
	}
	return out, nil
}

func enableBPS(c *harness.Ctx, _ harness.Input) (any, error) {
	return trainenv.EnableBPS(trainenv.Env(c.Env))
}

func mpiVars(c *harness.Ctx, _ harness.Input) (any, error) {
	env := trainenv.Env(c.Env)
	out := map[string]int{}
	for name, f := range map[string]func(trainenv.Env) (int, error){
		"get_mpi_rank": trainenv.MPIRank, "get_mpi_local_rank": trainenv.MPILocalRank,
		"get_mpi_size": trainenv.MPISize, "get_mpi_local_size": trainenv.MPILocalSize,
	} {
		n, err := f(env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}

func localHost(c *harness.Ctx, _ harness.Input) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return trainenv.LocalHost(ctx, trainenv.Env(c.Env), NoResolve)
}
