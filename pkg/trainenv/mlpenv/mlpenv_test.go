package mlpenv

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

// psWorkerEnv is a job of 2 PS and 3 workers as the MLP platform describes it, seen from role/index.
func psWorkerEnv(role string, index int, port int) trainenv.Env {
	return trainenv.Env{
		"MLP_ROLE": role, "MLP_ROLE_INDEX": strconv.Itoa(index), "MLP_PORT": strconv.Itoa(port),
		"MLP_SSH_PORT": "2200", "MLP_FRAMEWORK": "tensorflow", "MLP_CPU": "8", "MLP_GPU": "0", "MLP_MEM": "16384",
		"MLP_GPU_TYPE": "",
		"MLP_PS_NUM":   "2", "MLP_PS_0_HOST": "fdbd::1", "MLP_PS_0_PORT": "9000", "MLP_PS_0_PRIMARY_HOST": "127.0.1.1",
		"MLP_PS_1_HOST": "fdbd::2", "MLP_PS_1_PORT": "9001", "MLP_PS_1_PRIMARY_HOST": "127.0.1.2",
		"MLP_PS_ALL_HOSTS": "fdbd::1,fdbd::2", "MLP_PS_ALL_PRIMARY_HOSTS": "127.0.1.1,127.0.1.2",
		"MLP_PS_ALL_PRIMARY_ADDRS": "127.0.1.1:9000,127.0.1.2:9001",
		"MLP_WORKER_NUM":           "3", "MLP_WORKER_0_PORT": "9100", "MLP_WORKER_0_PRIMARY_HOST": "127.0.2.1",
		"MLP_WORKER_1_PORT": "9101", "MLP_WORKER_1_PRIMARY_HOST": "127.0.2.2",
		"MLP_WORKER_2_PORT": "9102", "MLP_WORKER_2_PRIMARY_HOST": "127.0.2.3",
		"YARN_INET_ADDR": "127.0.9.9", "CLOUDNATIVE_IGNORED": "x",
	}
}

// mpiEnv is worker rank 5 of 8 processes, 4 per machine.
func mpiEnv() trainenv.Env {
	return trainenv.Env{
		"CLOUDNATIVE_INET_ADDR": "127.0.3.2,fdbd::32", "MLP_PORT": "9200", "MLP_PS_0_PORT": "9400",
		"MLP_PS_0_PRIMARY_HOST": "127.0.3.9", "MLP_PS_NUM": "1", "MLP_ROLE": "worker", "MLP_ROLE_INDEX": "1",
		"MLP_WORKER_0_PORT": "9200", "MLP_WORKER_0_PRIMARY_HOST": "127.0.3.1", "MLP_WORKER_1_PORT": "9300",
		"MLP_WORKER_1_PRIMARY_HOST": "127.0.3.2", "MLP_WORKER_NUM": "2",
		"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_COMM_WORLD_RANK": "5",
		"OMPI_COMM_WORLD_SIZE": "8",
	}
}

func noResolve(context.Context, string) ([]string, error) {
	return nil, errors.New("tests give the host in the environment")
}

func mustNew(t *testing.T, env trainenv.Env) *Env {
	t.Helper()
	e, err := New(context.Background(), env, noResolve)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		env     trainenv.Env
		check   func(t *testing.T, e *Env)
		errKind errkind.Kind
	}{
		{name: "no MLP variables", env: trainenv.Env{"YARN_INET_ADDR": "127.9.9.9"}, check: func(t *testing.T, e *Env) {
			want := &Env{Vars: map[string]string{}, AllRoles: map[string]int{}, Host: "127.9.9.9"}
			if !reflect.DeepEqual(e, want) {
				t.Fatalf("got %+v, want %+v", e, want)
			}
			if e.QueueDevice() != "/device:CPU:0" || e.EnableMPI() {
				t.Fatalf("queue device %q, mpi %v", e.QueueDevice(), e.EnableMPI())
			}
		}},
		{name: "quoted and padded values", env: trainenv.Env{"MLP_CPU": `"4"`, "MLP_PORT": `"9101"`, "MLP_ROLE": ` "worker" `,
			"MLP_ROLE_INDEX": "'1'", "MLP_WORKER_NUM": " '3' ", "YARN_INET_ADDR": "127.0.0.8"}, check: func(t *testing.T, e *Env) {
			if e.Role != "WORKER" || e.Index != 1 || e.Port != 9101 || e.CPU != 4 || !reflect.DeepEqual(e.AllRoles, map[string]int{"WORKER": 3}) || !e.Available {
				t.Fatalf("got %+v", e)
			}
			if e.QueueDevice() != "/job:worker/task:0/device:CPU:0" {
				t.Fatalf("queue device %q", e.QueueDevice())
			}
			if e.Vars["MLP_ROLE"] != ` "worker" ` {
				t.Fatalf("Vars keeps the raw values, got %q", e.Vars["MLP_ROLE"])
			}
		}},
		{name: "ps replica", env: psWorkerEnv("ps", 1, 9001), check: func(t *testing.T, e *Env) {
			if e.Role != "PS" || e.Index != 1 || e.Port != 9001 || e.Host != "127.0.9.9" || e.EnableMPI() {
				t.Fatalf("got %+v", e)
			}
			if !reflect.DeepEqual(e.AllRoles, map[string]int{"PS": 2, "WORKER": 3}) {
				t.Fatalf("AllRoles = %v", e.AllRoles)
			}
			if *e.SSHPort != "2200" || *e.Framework != "tensorflow" || e.LogPath != nil || e.GPUType != "" || e.Mem != 16384 {
				t.Fatalf("got %+v", e)
			}
			if _, ok := e.Vars["CLOUDNATIVE_IGNORED"]; ok || len(e.Vars) != 26 {
				t.Fatalf("Vars has %d entries: %v", len(e.Vars), e.Vars)
			}
			if e.QueueDevice() != "/job:ps/task:0/device:CPU:0" {
				t.Fatalf("queue device %q", e.QueueDevice())
			}
		}},
		{name: "MPI worker", env: mpiEnv(), check: func(t *testing.T, e *Env) {
			if !e.EnableMPI() || e.Index != 5 || e.Port != 9205 || e.Host != "127.0.3.2" {
				t.Fatalf("got %+v", e)
			}
			if !reflect.DeepEqual(e.AllRoles, map[string]int{"PS": 1, "WORKER": 8}) {
				t.Fatalf("AllRoles = %v", e.AllRoles)
			}
		}},
		{name: "MPI variables on a PS are ignored", env: func() trainenv.Env {
			env := mpiEnv()
			env["MLP_ROLE"] = "ps"
			env["MLP_ROLE_INDEX"] = "0"
			return env
		}(), check: func(t *testing.T, e *Env) {
			if e.EnableMPI() || e.Index != 0 || e.Port != 9200 || e.AllRoles["WORKER"] != 2 {
				t.Fatalf("got %+v", e)
			}
		}},
		{name: "MPI_ role counts", env: trainenv.Env{"MPI_DSWORKER_NUM": "2", "MLP_X_Y_NUM": "7", "YARN_INET_ADDR": "h"}, check: func(t *testing.T, e *Env) {
			if !reflect.DeepEqual(e.AllRoles, map[string]int{"DSWORKER": 2}) || !e.Available || e.Framework != nil {
				t.Fatalf("got %+v", e)
			}
		}},
		{name: "bad port", env: func() trainenv.Env { env := psWorkerEnv("ps", 1, 0); env["MLP_PORT"] = "abc"; return env }(), errKind: errkind.Value},
		{name: "bad count", env: trainenv.Env{"MLP_PS_NUM": "two", "YARN_INET_ADDR": "h"}, errKind: errkind.Value},
		{name: "quoted empty count", env: trainenv.Env{"MLP_PS_NUM": `""`, "YARN_INET_ADDR": "h"}, errKind: errkind.Value},
		{name: "bad MPI rank", env: func() trainenv.Env { env := mpiEnv(); env["OMPI_COMM_WORLD_RANK"] = "r"; return env }(), errKind: errkind.Value},
		{name: "empty host asserts", env: trainenv.Env{"YARN_INET_ADDR": ""}, errKind: errkind.Precondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(context.Background(), tc.env, noResolve)
			if tc.errKind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tc.errKind {
					t.Fatalf("New = %+v, %v; want an error of kind %v", e, err, tc.errKind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, e)
		})
	}
}

func TestReplicas(t *testing.T) {
	worker := mustNew(t, psWorkerEnv("worker", 2, 9102))
	ps := mustNew(t, psWorkerEnv("ps", 1, 9001))
	mpi := mustNew(t, mpiEnv())
	type result struct {
		s  string
		ok bool
	}
	tests := []struct {
		name string
		got  func() (any, error)
		want any
	}{
		{"host of own replica", func() (any, error) { h, ok := worker.ReplicaHost("", NoIndex, true); return result{h, ok}, nil }, result{"127.0.2.3", true}},
		{"host of another role defaults to 0, non-primary", func() (any, error) { h, ok := worker.ReplicaHost("ps", NoIndex, false); return result{h, ok}, nil }, result{"fdbd::1", true}},
		{"host missing", func() (any, error) { h, ok := worker.ReplicaHost("ps", 7, true); return result{h, ok}, nil }, result{"", false}},
		// A negative index is a key of its own (MLP_PS_-1_PRIMARY_HOST), never "this replica".
		{"host of a negative index", func() (any, error) { h, ok := worker.ReplicaHost("ps", -1, true); return result{h, ok}, nil }, result{"", false}},
		{"MPI host of a negative index floors", func() (any, error) { h, ok := mpi.ReplicaHost("worker", -1, true); return result{h, ok}, nil }, result{"", false}},
		{"addr of a negative index", func() (any, error) { a, ok, err := worker.ReplicaAddr("worker", -1, true); return result{a, ok}, err }, result{"", false}},
		{"addr of own replica", func() (any, error) { a, ok, err := ps.ReplicaAddr("", NoIndex, true); return result{a, ok}, err }, result{"127.0.1.2:9001", true}},
		{"addr non-primary in any case", func() (any, error) { a, ok, err := worker.ReplicaAddr("Ps", 1, false); return result{a, ok}, err }, result{"fdbd::2:9001", true}},
		{"addr missing", func() (any, error) {
			a, ok, err := worker.ReplicaAddr("dispatcher", NoIndex, true)
			return result{a, ok}, err
		}, result{"", false}},
		{"MPI worker addr: machine 5/4, port +5", func() (any, error) { a, ok, err := mpi.ReplicaAddr("worker", 5, true); return result{a, ok}, err }, result{"127.0.3.2:9205", true}},
		{"MPI own addr", func() (any, error) { a, ok, err := mpi.ReplicaAddr("", NoIndex, true); return result{a, ok}, err }, result{"127.0.3.2:9205", true}},
		{"MPI worker 2 is on machine 0", func() (any, error) { a, ok, err := mpi.ReplicaAddr("worker", 2, true); return result{a, ok}, err }, result{"127.0.3.1:9202", true}},
		{"num replicas own", func() (any, error) { return ps.NumReplicas("") }, 2},
		{"num replicas unknown", func() (any, error) { return ps.NumReplicas("evaluator") }, 0},
		{"num replicas MPI worker", func() (any, error) { return mpi.NumReplicas("worker") }, 8},
		{"all hosts raw", func() (any, error) { h, ok := worker.AllHosts("ps", true); return result{h, ok}, nil }, result{"127.0.1.1,127.0.1.2", true}},
		{"all hosts unset", func() (any, error) { h, ok := worker.AllHosts("worker", false); return result{h, ok}, nil }, result{"", false}},
		{"all addrs", func() (any, error) { return worker.AllAddrs("ps", true), nil }, []string{"127.0.1.1:9000", "127.0.1.2:9001"}},
		{"all addrs unset", func() (any, error) { return worker.AllAddrs("ps", false), nil }, []string{}},
		// The reference returned the variable's text here, and raised a TypeError under MPI.
		{"port", func() (any, error) { return ps.ReplicaPort("ps", 1) }, 9001},
		{"port NoIndex is replica 0", func() (any, error) { return ps.ReplicaPort("", NoIndex) }, 9000},
		{"port default", func() (any, error) { return ps.ReplicaPort("dispatcher", 0) }, DefaultPort},
		{"MPI port", func() (any, error) { return mpi.ReplicaPort("", NoIndex) }, 9205},
		{"dispatcher target default", func() (any, error) { return worker.DispatcherTarget("") }, "grpc://localhost:5050"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	env := psWorkerEnv("worker", 2, 9102)
	env["MLP_DISPATCHER_0_PORT"] = "5051"
	env["MLP_DISPATCHER_0_PRIMARY_HOST"] = "127.0.5.1"
	if got, err := mustNew(t, env).DispatcherTarget(""); err != nil || got != "grpc://127.0.5.1:5051" {
		t.Fatalf("DispatcherTarget = %q, %v", got, err)
	}
}

func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// closedPort returns a port of 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int {
	ln, port := listen(t)
	ln.Close()
	return port
}

func TestCheckPort(t *testing.T) {
	leakcheck.Check(t)
	_, open := listen(t)
	if !CheckPort(context.Background(), "127.0.0.1", open, time.Second) {
		t.Fatal("a listening port was reported closed")
	}
	if !CheckPort(context.Background(), "[127.0.0.1]", open, time.Second) {
		t.Fatal("a bracketed host was not accepted")
	}
	if CheckPort(context.Background(), "127.0.0.1", closedPort(t), 200*time.Millisecond) {
		t.Fatal("a closed port was reported open")
	}
	// A server that comes up while CheckPort retries is found.
	port := closedPort(t)
	up := make(chan net.Listener, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			up <- nil
			return
		}
		up <- ln
	}()
	ok := CheckPort(context.Background(), "127.0.0.1", port, 30*time.Second)
	if ln := <-up; ln != nil {
		defer ln.Close()
		if !ok {
			t.Fatal("a port that opened during the wait was reported closed")
		}
	} else {
		t.Log("the freed port was taken by another process; the retry case was not exercised")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if CheckPort(ctx, "127.0.0.1", open, time.Second) {
		t.Fatal("a canceled context still connected")
	}
}

func TestWait(t *testing.T) {
	leakcheck.Check(t)
	_, port := listen(t)
	env := trainenv.Env{"MLP_ROLE": "worker", "MLP_WORKER_NUM": "1", "YARN_INET_ADDR": "127.0.0.1",
		"MLP_DISPATCHER_0_PRIMARY_HOST": "127.0.0.1", "MLP_DISPATCHER_0_PORT": strconv.Itoa(port),
		"MLP_SSH_PORT": strconv.Itoa(closedPort(t))}
	e := mustNew(t, env)
	ok, err := e.Wait(context.Background(), "dispatcher", 0, 5*time.Second, false)
	if err != nil || !ok {
		t.Fatalf("Wait on a listening dispatcher = %v, %v", ok, err)
	}
	old := waitPoll
	waitPoll = 20 * time.Millisecond
	defer func() { waitPoll = old }()
	ok, err = e.Wait(context.Background(), "dispatcher", 0, 300*time.Millisecond, true)
	if err != nil || ok {
		t.Fatalf("Wait on a closed ssh port = %v, %v; want a timeout", ok, err)
	}
	ok, err = e.Wait(context.Background(), "ps", 0, time.Second, false)
	if err != nil || ok {
		t.Fatalf("Wait on a role without host = %v, %v; want false at once", ok, err)
	}
}
