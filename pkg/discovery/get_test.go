package discovery_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/discovery/consul/consultest"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

func TestParseType(t *testing.T) {
	for in, want := range map[string]discovery.Type{"primus": discovery.Primus, "CONSUL": discovery.Consul, " zk ": discovery.ZK, "Mlp": discovery.MLP} {
		if got, err := discovery.ParseType(in); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := discovery.ParseType("etcd"); errkind.Of(err) != errkind.Value {
		t.Errorf("ParseType(etcd) = %v; want an error of kind Value", err)
	}
	if discovery.ZK.String() != "zk" || int(discovery.MLP) != 4 || int(discovery.Primus) != 1 {
		t.Error("the types are not the reference's enum")
	}
}

// TestGet: each type gives its discovery, working on its cluster.
func TestGet(t *testing.T) {
	leakcheck.Check(t)
	srv := startZK(t)
	agent := consultest.Start(t)
	host, port := agent.HostPort()
	mlpEnv, mlpMembers := mlpCluster(t, 1, 2)
	tests := []struct {
		name string
		opts discovery.Options
		// check runs on the discovery Get returned.
		check    func(t *testing.T, d discovery.ServiceDiscovery, task *discovery.Task)
		wantKind errkind.Kind
	}{
		{name: "local run", opts: discovery.Options{Type: discovery.ZK, IsLocal: true}, check: func(t *testing.T, d discovery.ServiceDiscovery, task *discovery.Task) {
			if d != nil || task != nil {
				t.Fatalf("a local run got %v, %v", d, task)
			}
		}},
		{name: "primus", opts: discovery.Options{Type: discovery.Primus, TFConfig: tfConfigCluster}, check: func(t *testing.T, d discovery.ServiceDiscovery, task *discovery.Task) {
			if _, ok := d.(*discovery.TFConfig); !ok || task == nil || *task != (discovery.Task{ServerType: "worker", Index: 2}) {
				t.Fatalf("got %T, %+v; want the worker 1 of TF_CONFIG as worker 2", d, task)
			}
		}},
		{name: "primus without TF_CONFIG", opts: discovery.Options{Type: discovery.Primus}, wantKind: errkind.Precondition},
		{name: "consul, psm from the uuid", opts: discovery.Options{Type: discovery.Consul, UUID: "job-uuid",
			Env: trainenv.Env{"CONSUL_HTTP_HOST": host, "CONSUL_HTTP_PORT": strconv.Itoa(port)}}, check: func(t *testing.T, d discovery.ServiceDiscovery, _ *discovery.Task) {
			agent.Add(consultest.Service{ID: "job-uuid-1000", Name: "job-uuid", Port: 1000, Tags: []string{"index:0", "name:ps", "ip:127.0.0.1"}})
			got, err := d.Query(tctx(t), "ps")
			if err != nil || !maps.Equal(got, map[int]string{0: "127.0.0.1:1000"}) {
				t.Fatalf("Query(ps) = %v, %v", got, err)
			}
		}},
		{name: "consul without psm nor uuid", opts: discovery.Options{Type: discovery.Consul, Env: trainenv.Env{}}, wantKind: errkind.Value},
		{name: "mlp", opts: discovery.Options{Type: discovery.MLP, Env: mlpEnv, Resolver: noResolver(t)}, check: func(t *testing.T, d discovery.ServiceDiscovery, _ *discovery.Task) {
			got, err := d.Query(tctx(t), "ps")
			if err != nil || !maps.Equal(got, mlpMembers["ps"]) {
				t.Fatalf("Query(ps) = %v, %v; want %v", got, err, mlpMembers["ps"])
			}
		}},
		{name: "mlp bad environment", opts: discovery.Options{Type: discovery.MLP, Env: trainenv.Env{"MLP_PORT": "x", "YARN_INET_ADDR": "h"}}, wantKind: errkind.Value},
		{name: "zk", opts: discovery.Options{Type: discovery.ZK, JobName: "get", ZKServer: srv.Addr(), Env: trainenv.Env{}, Logger: quietLog},
			check: func(t *testing.T, d discovery.ServiceDiscovery, _ *discovery.Task) {
				if err := d.Register(tctx(t), "ps", 0, "127.0.0.1:1000"); err != nil {
					t.Fatal(err)
				}
				eventually(t, testTimeout, "ps.0", queryIs(t, d, "ps", map[int]string{0: "127.0.0.1:1000"}))
			}},
		{name: "zk without servers", opts: discovery.Options{Type: discovery.ZK, JobName: "get", Env: trainenv.Env{}}, wantKind: errkind.Value},
		{name: "unknown type", opts: discovery.Options{Type: discovery.Type(9)}, wantKind: errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, task, err := discovery.Get(tctx(t), tc.opts)
			if tc.wantKind != errkind.Unknown {
				if d != nil {
					d.Close()
				}
				if errkind.Of(err) != tc.wantKind {
					t.Fatalf("Get = %v; want an error of kind %v", err, tc.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d != nil {
				defer d.Close()
			}
			tc.check(t, d, task)
		})
	}
}

// TestWithDiscovery: the scope closes the discovery when its function returns, fails or panics.
func TestWithDiscovery(t *testing.T) {
	leakcheck.Check(t)
	agent := consultest.Start(t)
	host, port := agent.HostPort()
	opts := discovery.Options{Type: discovery.Consul, UUID: "u-1", Env: trainenv.Env{"CONSUL_HTTP_HOST": host, "CONSUL_HTTP_PORT": strconv.Itoa(port)}, Logger: quietLog}
	ctx := tctx(t)
	var kept discovery.ServiceDiscovery
	boom := errors.New("boom")
	err := discovery.WithDiscovery(ctx, opts, func(ctx context.Context, d discovery.ServiceDiscovery, task *discovery.Task) error {
		kept = d
		if _, err := d.Query(ctx, "ps"); err != nil {
			t.Errorf("Query inside the scope: %v", err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WithDiscovery = %v, want the function's error", err)
	}
	if _, err := kept.Query(ctx, "ps"); !errors.Is(err, discovery.ErrClosed) {
		t.Fatalf("Query after the scope: %v, want ErrClosed", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not go through")
			}
		}()
		discovery.WithDiscovery(ctx, opts, func(_ context.Context, d discovery.ServiceDiscovery, _ *discovery.Task) error {
			kept = d
			panic("inside")
		})
	}()
	if _, err := kept.Query(ctx, "ps"); !errors.Is(err, discovery.ErrClosed) {
		t.Fatalf("Query after a panic in the scope: %v, want ErrClosed", err)
	}
	called := false
	err = discovery.WithDiscovery(ctx, discovery.Options{IsLocal: true}, func(_ context.Context, d discovery.ServiceDiscovery, task *discovery.Task) error {
		called = true
		if d != nil || task != nil {
			t.Errorf("a local run got %v, %v", d, task)
		}
		return nil
	})
	if err != nil || !called {
		t.Fatalf("local WithDiscovery = %v (called %v)", err, called)
	}
}
