package discovery_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/discovery/conformance"
	"github.com/monolith-go/monolith/pkg/discovery/consul"
	"github.com/monolith-go/monolith/pkg/discovery/consul/consultest"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainenv/mlpenv"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// testTimeout bounds a test's setup calls.
const testTimeout = time.Minute

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// dynamicMembers are what the suite registers on ZooKeeper and Consul: distinct ports (Consul's
// service id is <psm>-<port>).
var dynamicMembers = map[string]map[int]string{
	"ps":     {0: "127.0.0.1:1000", 1: "127.0.0.1:1001"},
	"worker": {0: "127.0.0.1:2000", 1: "127.0.0.1:2001", 2: "127.0.0.1:2002"},
}

func moved(_ string, _ int, addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return net.JoinHostPort(host, strconv.Itoa(p+500))
}

// fastZKRetry keeps retries on a lost connection short in tests.
var fastZKRetry = zk.RetryPolicy{MaxTries: 4, Delay: 50 * time.Millisecond, Backoff: 2, MaxDelay: time.Second}

func TestConformanceZKRealServer(t *testing.T) {
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	conformance.Run(t, conformance.Subject{
		New: func(t *testing.T) discovery.ServiceDiscovery {
			d, err := discovery.NewZK(tctx(t), discovery.ZKOptions{
				JobName: jobName(t), Servers: srv.Addr(),
				SessionTimeout: 4 * time.Second, Retry: fastZKRetry, Logger: quietLog,
			})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Members: dynamicMembers, DeregisterHides: true, Moved: moved, CloseWithdraws: true,
		Lag: 10 * time.Second,
	})
}

func TestConformanceZKFake(t *testing.T) {
	servers := map[string]*zkfake.Server{} // per subtest, shared by its instances
	conformance.Run(t, conformance.Subject{
		New: func(t *testing.T) discovery.ServiceDiscovery {
			srv := servers[t.Name()]
			if srv == nil {
				srv = zkfake.NewServer()
				servers[t.Name()] = srv
			}
			client := srv.Client()
			t.Cleanup(func() { client.Close() })
			d, err := discovery.NewZK(tctx(t), discovery.ZKOptions{JobName: "conformance", Client: client, Retry: fastZKRetry, Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		// The fake's watches run in the goroutine that makes the change: Query is current at once.
		Members: dynamicMembers, DeregisterHides: true, Moved: moved, CloseWithdraws: true,
	})
}

// jobName is a ZooKeeper job per test, so tests on one server do not see each other's nodes.
func jobName(t *testing.T) string { return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) }

var quietLog = slog.New(slog.DiscardHandler)

func TestConformanceConsul(t *testing.T) {
	for _, transport := range []string{"tcp", "unix"} {
		t.Run(transport, func(t *testing.T) {
			agents := map[string]*consultest.Agent{} // per subtest, shared by its instances
			conformance.Run(t, conformance.Subject{
				New: func(t *testing.T) discovery.ServiceDiscovery {
					agent := agents[t.Name()]
					if agent == nil {
						if transport == "unix" {
							agent = consultest.StartUnix(t)
						} else {
							agent = consultest.Start(t)
						}
						agents[t.Name()] = agent
					}
					return newConsul(t, agent, "conformance_psm")
				},
				Members: dynamicMembers, DeregisterHides: true, Moved: moved,
			})
		})
	}
}

// newConsul returns a Consul discovery of agent with the test's short pauses.
func newConsul(t *testing.T, agent *consultest.Agent, psm string) *discovery.ConsulDiscovery {
	t.Helper()
	cfg := consul.Config{Host: agent.Addr(), CheckInterval: 50 * time.Millisecond, CheckRetry: 10 * time.Millisecond, Logger: quietLog}
	if host, port := agent.HostPort(); port != 0 {
		cfg.Host, cfg.Port = host, port
	}
	d, err := discovery.NewConsul(discovery.ConsulOptions{ConsulID: psm, Client: consul.New(cfg),
		RetryTime: 10 * time.Millisecond, Poll: 10 * time.Millisecond, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

const tfConfigCluster = `{"cluster": {"chief": ["127.0.0.1:2000"], "worker": ["127.0.0.1:2001", "127.0.0.1:2002"],
 "ps": ["127.0.0.1:1000", "127.0.0.1:1001"]}, "task": {"type": "worker", "index": 1}}`

func TestConformanceTFConfig(t *testing.T) {
	conformance.Run(t, conformance.Subject{
		New: func(t *testing.T) discovery.ServiceDiscovery {
			d, err := discovery.NewTFConfig(tfConfigCluster)
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Members: map[string]map[int]string{
			"ps":     {0: "127.0.0.1:1000", 1: "127.0.0.1:1001"},
			"worker": {0: "127.0.0.1:2000", 1: "127.0.0.1:2001", 2: "127.0.0.1:2002"},
		},
		Static: true, UnknownNameKind: errkind.Value,
	})
}

func TestConformanceMLP(t *testing.T) {
	env, members := mlpCluster(t, 2, 3)
	conformance.Run(t, conformance.Subject{
		New: func(t *testing.T) discovery.ServiceDiscovery {
			e, err := mlpenv.New(tctx(t), env, noResolver(t))
			if err != nil {
				t.Fatal(err)
			}
			return discovery.NewMLP(e)
		},
		Members: members, Static: true, DeregisterHides: true, ForeignAddrKind: errkind.Precondition,
	})
}

// mlpCluster returns the MLP environment of a job with nps PS (each listening on a port of
// 127.0.0.1, as Query("ps") checks them) and nworkers workers, seen from worker 0, and its members.
func mlpCluster(t *testing.T, nps, nworkers int) (trainenv.Env, map[string]map[int]string) {
	t.Helper()
	env := trainenv.Env{
		"MLP_ROLE": "worker", "MLP_ROLE_INDEX": "0", "YARN_INET_ADDR": "127.0.0.1",
		"MLP_PS_NUM": strconv.Itoa(nps), "MLP_WORKER_NUM": strconv.Itoa(nworkers),
	}
	members := map[string]map[int]string{"ps": {}, "worker": {}}
	for i := 0; i < nps; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		env[fmt.Sprintf("MLP_PS_%d_PRIMARY_HOST", i)] = "127.0.0.1"
		env[fmt.Sprintf("MLP_PS_%d_PORT", i)] = port
		members["ps"][i] = "127.0.0.1:" + port
	}
	for i := 0; i < nworkers; i++ {
		port := strconv.Itoa(7100 + i)
		env[fmt.Sprintf("MLP_WORKER_%d_PRIMARY_HOST", i)] = "127.0.0.1"
		env[fmt.Sprintf("MLP_WORKER_%d_PORT", i)] = port
		members["worker"][i] = "127.0.0.1:" + port
	}
	env["MLP_PORT"] = "7100"
	return env, members
}

// noResolver fails the test if the host name is resolved: tests give the host in the environment.
func noResolver(t *testing.T) trainenv.Resolver {
	return func(context.Context, string) ([]string, error) {
		t.Errorf("the host name was resolved; the test environment should give the host")
		return nil, fmt.Errorf("no resolution in tests")
	}
}
