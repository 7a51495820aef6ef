// Package mlpenv reads the MLP platform's description of a job from its MLP_* variables
// (mlp_utils.MLPEnv): this process's role, index and port, and the hosts and ports of every role's
// replicas, with Open MPI workers (one process per GPU) mapped onto their machines.
package mlpenv

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

// DefaultPort is what Port returns for a role whose port variable is unset (the reference's 2222).
const DefaultPort = 2222

// Env is the MLP environment of this process. Role names are upper case; methods taking a role
// accept any case, and "" means this process's role.
type Env struct {
	// Vars are the variables the reference kept: those named MLP_* or MPI_*, unstripped.
	Vars map[string]string

	Framework, SSHPort, LogPath, DebugPort, EntrypointDir, TaskCmd *string
	// Role is MLP_ROLE in upper case ("" when unset).
	Role string
	// AllRoles maps each role with an MLP_<ROLE>_NUM (or MPI_<ROLE>_NUM) variable to its replica
	// count; under MPI, WORKER is the MPI world size.
	AllRoles map[string]int
	// Index is this process's replica index: its MPI rank under MPI, else MLP_ROLE_INDEX.
	Index int
	// Port is this process's port: MLP_PORT, plus the MPI rank under MPI.
	Port int
	// Available: some MLP_/MPI_ variable and some role count are set (the reference's "avaiable").
	Available     bool
	CPU, GPU, Mem int
	GPUType       string
	// Host is this machine's address (trainenv.LocalHost).
	Host string

	enableMPI bool
	mpiSize   int
	localSize int
}

// New reads env. A count, index, port or resource variable that is not an integer is an error of
// kind Value naming it, as the reference's int() raised; so is a bad Open MPI variable under MPI.
func New(ctx context.Context, env trainenv.Env, resolve trainenv.Resolver) (*Env, error) {
	e := &Env{Vars: map[string]string{}, AllRoles: map[string]int{}}
	for k, v := range env {
		if strings.HasPrefix(k, "MLP_") || strings.HasPrefix(k, "MPI_") {
			e.Vars[k] = v
		}
	}
	e.Framework = e.opt("MLP_FRAMEWORK")
	e.SSHPort = e.opt("MLP_SSH_PORT")
	e.LogPath = e.opt("MLP_LOG_PATH")
	e.DebugPort = e.opt("MLP_DEBUG_PORT")
	e.EntrypointDir = e.opt("MLP_ENTRYPOINT_DIR")
	e.TaskCmd = e.opt("MLP_TASK_CMD")
	e.Role = strings.ToUpper(e.get("MLP_ROLE", ""))
	// Sorted, so that MLP_X_NUM and MPI_X_NUM, both naming role X, resolve the same way on every
	// run (MPI_ wins); the reference took the environment's order.
	keys := make([]string, 0, len(e.Vars))
	for k := range e.Vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts := strings.Split(k, "_")
		if !strings.HasSuffix(k, "_NUM") || len(parts) != 3 {
			continue
		}
		n, err := e.getInt(k, 0)
		if err != nil {
			return nil, err
		}
		e.AllRoles[parts[1]] = n
	}
	_, rankSet := env.Lookup(trainenv.OMPIRank)
	e.enableMPI = rankSet && e.Role == "WORKER"
	var err error
	if e.enableMPI {
		if err := e.readMPI(env); err != nil {
			return nil, err
		}
		port, err := e.getInt("MLP_PORT", 0)
		if err != nil {
			return nil, err
		}
		e.Port = port + e.Index
		slog.Debug("MLP environment under MPI", "size", e.mpiSize, "rank", e.Index, "port", e.Port)
	} else {
		if e.Index, err = e.getInt("MLP_ROLE_INDEX", 0); err != nil {
			return nil, err
		}
		if e.Port, err = e.getInt("MLP_PORT", 0); err != nil {
			return nil, err
		}
	}
	e.Available = len(e.Vars) > 0 && len(e.AllRoles) > 0
	if e.CPU, err = e.getInt("MLP_CPU", 0); err != nil {
		return nil, err
	}
	if e.GPU, err = e.getInt("MLP_GPU", 0); err != nil {
		return nil, err
	}
	e.GPUType = e.get("MLP_GPU_TYPE", "")
	if e.Mem, err = e.getInt("MLP_MEM", 0); err != nil {
		return nil, err
	}
	if e.Host, err = trainenv.LocalHost(ctx, env, resolve); err != nil {
		return nil, err
	}
	return e, nil
}

// readMPI reads the MPI rank (this process's index), the world size (the WORKER count) and the
// processes per machine. The reference read the last one only when a host was looked up; here a bad
// value is an error at once.
func (e *Env) readMPI(env trainenv.Env) error {
	var err error
	if e.Index, err = trainenv.MPIRank(env); err != nil {
		return err
	}
	if e.mpiSize, err = trainenv.MPISize(env); err != nil {
		return err
	}
	if e.localSize, err = trainenv.MPILocalSize(env); err != nil {
		return err
	}
	if e.localSize < 1 {
		return errkind.New(errkind.Value, "%s is %d: the local size must be at least 1", trainenv.OMPILocalSize, e.localSize)
	}
	e.AllRoles["WORKER"] = e.mpiSize
	return nil
}

// lookup is the reference's _get: a set, non-empty variable with blanks, then double quotes, then
// single quotes stripped from both ends.
func (e *Env) lookup(name string) (string, bool) {
	v := e.Vars[name]
	if v == "" {
		return "", false
	}
	return strings.Trim(strings.Trim(strings.TrimSpace(v), `"`), "'"), true
}

func (e *Env) get(name, def string) string {
	if v, ok := e.lookup(name); ok {
		return v
	}
	return def
}

func (e *Env) opt(name string) *string {
	if v, ok := e.lookup(name); ok {
		return &v
	}
	return nil
}

func (e *Env) getInt(name string, def int) (int, error) {
	v, ok := e.lookup(name)
	if !ok {
		return def, nil
	}
	return trainenv.ParseInt(name, v)
}

// EnableMPI: Open MPI launched this process (OMPI_COMM_WORLD_RANK is set) and its role is WORKER.
func (e *Env) EnableMPI() bool { return e.enableMPI }

func (e *Env) role(role string) string {
	if role == "" {
		return e.Role
	}
	return strings.ToUpper(role)
}

// NumReplicas is the number of role's replicas: the MPI world size for WORKER under MPI, else
// MLP_<ROLE>_NUM (0 when unset).
func (e *Env) NumReplicas(role string) (int, error) {
	role = e.role(role)
	if e.enableMPI && role == "WORKER" {
		return e.mpiSize, nil
	}
	return e.getInt("MLP_"+role+"_NUM", 0)
}

// AllHosts is MLP_<ROLE>_ALL_PRIMARY_HOSTS (primary) or MLP_<ROLE>_ALL_HOSTS, unsplit; ok is false
// when unset.
func (e *Env) AllHosts(role string, primary bool) (string, bool) {
	role = e.role(role)
	if primary {
		return e.lookup("MLP_" + role + "_ALL_PRIMARY_HOSTS")
	}
	return e.lookup("MLP_" + role + "_ALL_HOSTS")
}

// AllAddrs is MLP_<ROLE>_ALL_PRIMARY_ADDRS (primary) or MLP_<ROLE>_ALL_ADDRS split at commas; empty
// when unset.
func (e *Env) AllAddrs(role string, primary bool) []string {
	role = e.role(role)
	key := "MLP_" + role + "_ALL_ADDRS"
	if primary {
		key = "MLP_" + role + "_ALL_PRIMARY_ADDRS"
	}
	v, ok := e.lookup(key)
	if !ok {
		return []string{}
	}
	return strings.Split(v, ",")
}

// NoIndex stands for the reference's index=None: this process's index for its own role, 0 for
// another. It is not -1: a negative index is a key of its own (MLP_PS_-1_PRIMARY_HOST, unset), as
// in the reference.
const NoIndex = math.MinInt

// ReplicaHost is the address of role's replica index: MLP_<ROLE>_<I>_PRIMARY_HOST (primary) or
// MLP_<ROLE>_<I>_HOST. Under MPI a WORKER index is a process, and I is the machine that runs it
// (index / processes per machine). ok is false when the variable is unset.
func (e *Env) ReplicaHost(role string, index int, primary bool) (string, bool) {
	role = e.role(role)
	switch {
	case e.enableMPI && role == "WORKER":
		if index == NoIndex {
			index = e.Index
		}
		index = pyint.FloorDiv(index, e.localSize)
	case index == NoIndex && role == e.Role:
		index = e.Index
	case index == NoIndex:
		index = 0
	}
	suffix := "_HOST"
	if primary {
		suffix = "_PRIMARY_HOST"
	}
	return e.lookup("MLP_" + role + "_" + strconv.Itoa(index) + suffix)
}

// ReplicaAddr is "host:port" of role's replica index (ReplicaHost, and MLP_<ROLE>_<I>_PORT; under MPI a WORKER's
// port is MLP_WORKER_0_PORT plus its index). ok is false when the host or the port is unset.
func (e *Env) ReplicaAddr(role string, index int, primary bool) (string, bool, error) {
	role = e.role(role)
	if index == NoIndex {
		index = 0
		if role == e.Role {
			index = e.Index
		}
	}
	host, hostOK := e.ReplicaHost(role, index, primary)
	var port string
	var portOK bool
	if e.enableMPI && role == "WORKER" {
		if v, ok := e.lookup("MLP_WORKER_0_PORT"); ok {
			p, err := trainenv.ParseInt("MLP_WORKER_0_PORT", v)
			if err != nil {
				return "", false, err
			}
			port, portOK = strconv.Itoa(p+index), true
		}
	} else {
		port, portOK = e.lookup("MLP_" + role + "_" + strconv.Itoa(index) + "_PORT")
	}
	if !hostOK || !portOK || host == "" || port == "" {
		return "", false, nil
	}
	return host + ":" + port, true, nil
}

// ReplicaPort is the port of role's replica index: MLP_<ROLE>_<I>_PORT (index NoIndex is 0 here, even for
// this process's own role, as in the reference), or under MPI MLP_WORKER_0_PORT plus the worker's
// index; DefaultPort when unset. The reference returned the variable's text, and raised a TypeError
// under MPI (it added the index to that text); this returns the number.
func (e *Env) ReplicaPort(role string, index int) (int, error) {
	role = e.role(role)
	if e.enableMPI && role == "WORKER" {
		if index == NoIndex {
			index = e.Index
		}
		p, err := e.getInt("MLP_WORKER_0_PORT", DefaultPort)
		if err != nil {
			return 0, err
		}
		return p + index, nil
	}
	if index == NoIndex {
		index = 0
	}
	return e.getInt("MLP_"+role+"_"+strconv.Itoa(index)+"_PORT", DefaultPort)
}

// DispatcherAddr is the address of the tf.data service dispatcher: role's (default "dispatcher")
// first replica.
func (e *Env) DispatcherAddr(role string) (string, bool, error) {
	if role == "" {
		role = "dispatcher"
	}
	return e.ReplicaAddr(role, NoIndex, true)
}

// DispatcherTarget is "grpc://" + DispatcherAddr, or grpc://localhost:5050 when it has none.
func (e *Env) DispatcherTarget(role string) (string, error) {
	addr, ok, err := e.DispatcherAddr(role)
	if err != nil {
		return "", err
	}
	if !ok {
		return "grpc://localhost:5050", nil
	}
	return "grpc://" + addr, nil
}

// QueueDevice is the TensorFlow device of the job's input queue: the first PS when there are PS, else
// the first worker, else the local CPU.
func (e *Env) QueueDevice() string {
	switch {
	case hasRole(e.AllRoles, "PS"):
		return "/job:ps/task:0/device:CPU:0"
	case hasRole(e.AllRoles, "WORKER"):
		return "/job:worker/task:0/device:CPU:0"
	}
	return "/device:CPU:0"
}

func hasRole(roles map[string]int, r string) bool {
	_, ok := roles[r]
	return ok
}

// waitPoll is the pause between two connection attempts of Wait (the reference's 5 s).
var waitPoll = 5 * time.Second

// Wait blocks until role's replica index accepts connections on its SSH port (useSSH) or its own
// port, or until timeout (when positive) or ctx ends. It returns at once when the replica has no
// host. The result says whether the port answered.
func (e *Env) Wait(ctx context.Context, role string, index int, timeout time.Duration, useSSH bool) (bool, error) {
	host, ok := e.ReplicaHost(role, index, true)
	if !ok {
		slog.Info("MLP wait: no host", "role", e.role(role), "index", index)
		return false, nil
	}
	var port int
	var err error
	if useSSH {
		if e.SSHPort == nil {
			return false, errkind.New(errkind.NotFound, "MLP wait: MLP_SSH_PORT is not set")
		}
		port, err = trainenv.ParseInt("MLP_SSH_PORT", *e.SSHPort)
	} else {
		port, err = e.ReplicaPort(role, index)
	}
	if err != nil {
		return false, err
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		if CheckPort(ctx, host, port, time.Second) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			if timeout > 0 && ctx.Err() == context.DeadlineExceeded {
				slog.Info("MLP wait timed out", "addr", fmt.Sprintf("%s:%d", host, port))
				return false, nil
			}
			return false, ctx.Err()
		case <-time.After(waitPoll):
		}
	}
}
