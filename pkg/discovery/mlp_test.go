package discovery_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainenv/mlpenv"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// mlpJob is worker 2 of a job with 2 PS and 3 workers whose addresses are 127.0.x.y (nothing
// listens there: the tests skip the PS port check or expect it to fail).
func mlpJob() trainenv.Env {
	return trainenv.Env{
		"MLP_ROLE": "worker", "MLP_ROLE_INDEX": "2", "MLP_PORT": "9102", "YARN_INET_ADDR": "127.0.2.3",
		"MLP_PS_NUM": "2", "MLP_PS_0_HOST": "fdbd::1", "MLP_PS_0_PORT": "9000", "MLP_PS_0_PRIMARY_HOST": "127.0.1.1",
		"MLP_PS_1_HOST": "fdbd::2", "MLP_PS_1_PORT": "9001", "MLP_PS_1_PRIMARY_HOST": "127.0.1.2",
		"MLP_WORKER_NUM": "3", "MLP_WORKER_0_PORT": "9100", "MLP_WORKER_0_PRIMARY_HOST": "127.0.2.1",
		"MLP_WORKER_1_PORT": "9101", "MLP_WORKER_1_PRIMARY_HOST": "127.0.2.2",
		"MLP_WORKER_2_PORT": "9102", "MLP_WORKER_2_PRIMARY_HOST": "127.0.2.3", "MLP_WORKER_2_HOST": "fdbd::23",
	}
}

func newMLP(t *testing.T, env trainenv.Env) *discovery.MLPDiscovery {
	t.Helper()
	e, err := mlpenv.New(tctx(t), env, noResolver(t))
	if err != nil {
		t.Fatal(err)
	}
	return discovery.NewMLP(e)
}

// TestMLPChecks: register and deregister accept only the environment's replicas, at their port,
// on their host, this machine's or a local name.
func TestMLPChecks(t *testing.T) {
	tests := []struct {
		name, server string
		index        int
		addr         string
		kind         errkind.Kind // Unknown: the check passes
	}{
		{"own address", "worker", 1, "127.0.2.2:9101", errkind.Unknown},
		{"localhost", "worker", 1, "localhost:9101", errkind.Unknown},
		{"local", "worker", 1, "local:9101", errkind.Unknown},
		{"loopback", "worker", 1, "127.0.0.1:9101", errkind.Unknown},
		{"any address", "PS", 1, "0.0.0.0:9001", errkind.Unknown},
		{"this machine", "ps", 0, "127.0.2.3:9000", errkind.Unknown},
		{"this machine's other host", "ps", 0, "fdbd::23:9000", errkind.Unknown},
		{"wrong port", "worker", 1, "127.0.2.2:9999", errkind.Precondition},
		{"index out of range", "worker", 3, "127.0.2.4:9103", errkind.Precondition},
		{"negative index", "worker", -1, "127.0.2.4:9103", errkind.Precondition},
		{"unknown role", "evaluator", 0, "127.0.2.4:9103", errkind.Precondition},
		{"another machine", "worker", 0, "127.0.7.7:9100", errkind.Precondition},
		{"no port", "worker", 0, "127.0.2.1", errkind.Value},
		{"empty address", "worker", 0, "", errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newMLP(t, mlpJob())
			for op, call := range map[string]func() error{
				"register":   func() error { return d.Register(tctx(t), tc.server, tc.index, tc.addr) },
				"deregister": func() error { return d.Deregister(tctx(t), tc.server, tc.index, tc.addr) },
			} {
				err := call()
				if tc.kind == errkind.Unknown && err != nil {
					t.Errorf("%s(%s, %d, %s): %v", op, tc.server, tc.index, tc.addr, err)
				}
				if tc.kind != errkind.Unknown && errkind.Of(err) != tc.kind {
					t.Errorf("%s(%s, %d, %s) = %v; want an error of kind %v", op, tc.server, tc.index, tc.addr, err, tc.kind)
				}
				var bad *discovery.AddrError
				if errors.As(err, &bad) != (tc.kind == errkind.Value) {
					t.Errorf("%s(%s, %d, %s) = %v; an AddrError only for an address without port", op, tc.server, tc.index, tc.addr, err)
				}
			}
		})
	}
}

// TestMLPOps replays the reference's op sequence: deregister hides, register shows again, a failed
// check changes nothing, and the filter keys ignore the server type's case.
func TestMLPOps(t *testing.T) {
	d := newMLP(t, mlpJob())
	ctx := tctx(t)
	all := map[int]string{0: "127.0.2.1:9100", 1: "127.0.2.2:9101", 2: "127.0.2.3:9102"}
	query := func(name string, want map[int]string) {
		t.Helper()
		got, err := d.QueryWith(ctx, name, true)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("Query(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	query("worker", all)
	if err := d.Deregister(ctx, "worker", 1, "127.0.2.2:9101"); err != nil {
		t.Fatal(err)
	}
	query("worker", map[int]string{0: "127.0.2.1:9100", 2: "127.0.2.3:9102"})
	query("WORKER", map[int]string{0: "127.0.2.1:9100", 2: "127.0.2.3:9102"})
	if err := d.Register(ctx, "worker", 1, "127.0.2.2:9999"); err == nil {
		t.Fatal("a register with the wrong port succeeded")
	}
	query("worker", map[int]string{0: "127.0.2.1:9100", 2: "127.0.2.3:9102"})
	if err := d.Register(ctx, "Worker", 1, "localhost:9101"); err != nil {
		t.Fatal(err)
	}
	query("worker", all)
	if err := d.Deregister(ctx, "PS", 1, "0.0.0.0:9001"); err != nil {
		t.Fatal(err)
	}
	got, err := d.QueryAll(ctx)
	want := map[string]map[int]string{"ps": {0: "127.0.1.1:9000"}, "worker": all}
	if err != nil || len(got) != 2 || !maps.Equal(got["ps"], want["ps"]) || !maps.Equal(got["worker"], want["worker"]) {
		t.Fatalf("QueryAll = %v, %v; want %v", got, err, want)
	}
	if err := d.DeregisterAll(); err != nil {
		t.Fatal(err)
	}
	query("worker", map[int]string{})
	query("ps", map[int]string{})
	if addr, err := d.Addr(); err != nil || addr != "127.0.2.3:9102" {
		t.Fatalf("Addr = %q, %v", addr, err)
	}
	if st, err := d.ServerType(); err != nil || st != "worker" {
		t.Fatalf("ServerType = %q, %v", st, err)
	}
	if idx, err := d.Index(); err != nil || idx != 2 {
		t.Fatalf("Index = %d, %v", idx, err)
	}
	if _, err := d.Query(ctx, ""); errkind.Of(err) != errkind.Precondition {
		t.Fatalf("Query(\"\") = %v; want an error of kind Precondition", err)
	}
}

// TestMLPPortCheck: Query("ps") waits for each PS to accept connections, bounded by PSPortTimeout.
func TestMLPPortCheck(t *testing.T) {
	leakcheck.Check(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	open := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	closedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := strconv.Itoa(closedLn.Addr().(*net.TCPAddr).Port)
	closedLn.Close()
	env := trainenv.Env{"MLP_ROLE": "worker", "MLP_WORKER_NUM": "1", "YARN_INET_ADDR": "127.0.0.1", "MLP_PS_NUM": "2",
		"MLP_PS_0_PRIMARY_HOST": "127.0.0.1", "MLP_PS_0_PORT": open, "MLP_PS_1_PRIMARY_HOST": "127.0.0.1", "MLP_PS_1_PORT": closed}
	d := newMLP(t, env)
	d.PSPortTimeout = 200 * time.Millisecond
	ctx := tctx(t)
	if _, err := d.Query(ctx, "ps"); err == nil || errkind.Of(err) != errkind.Runtime {
		t.Fatalf("Query(ps) with ps.1 down = %v; want an error of kind Runtime", err)
	}
	if got, err := d.QueryWith(ctx, "ps", true); err != nil || len(got) != 2 {
		t.Fatalf("Query(ps) without the port check = %v, %v", got, err)
	}
	// A deregistered PS is not checked.
	if err := d.Deregister(ctx, "ps", 1, "127.0.0.1:"+closed); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Query(ctx, "ps"); err != nil || !maps.Equal(got, map[int]string{0: "127.0.0.1:" + open}) {
		t.Fatalf("Query(ps) = %v, %v", got, err)
	}
}

func TestMLPMissingAddress(t *testing.T) {
	env := mlpJob()
	delete(env, "MLP_WORKER_1_PORT")
	d := newMLP(t, env)
	if _, err := d.QueryWith(tctx(t), "worker", true); errkind.Of(err) != errkind.Precondition {
		t.Fatalf("Query of a worker without port = %v; want an error of kind Precondition", err)
	}
	if err := d.Register(tctx(t), "worker", 1, "127.0.2.2:9101"); errkind.Of(err) != errkind.Precondition {
		t.Fatalf("Register of a worker without port = %v; want an error of kind Precondition", err)
	}
}
