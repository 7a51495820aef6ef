package agentsvc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
)

const (
	modelName       = "test_model_ctr"
	numPSReplicas   = 2
	numEntryReplica = 2
)

// registerReplicas is agent_service_test.register: numPS PS tasks with two AVAILABLE replicas each
// and two entry replicas under prefix, addresses 192.168.1.<idx>:<port> from idx 2 on.
func registerReplicas(w *fakeWatcher, prefix string, numPS int) {
	idx := 2
	for task := 0; task < numPS; task++ {
		for r := 0; r < numPSReplicas; r++ {
			w.set(fmt.Sprintf("%s/ps:%d/%d", prefix, task, r), meta(fmt.Sprintf("192.168.1.%d:%d", idx, 7000+idx), datadef.StateAvailable))
			idx++
		}
	}
	for r := 0; r < numEntryReplica; r++ {
		w.set(fmt.Sprintf("%s/entry:0/%d", prefix, r), meta(fmt.Sprintf("192.168.1.%d:%d", idx, 7000+idx), datadef.StateAvailable))
		idx++
	}
}

// TestAgentService is agent_service_test.py over gRPC on loopback: 20 PS tasks x 2 replicas and
// the entry, dc_aware, a ReplicaWatcher-like source, and the SvrClient port.
func TestAgentService(t *testing.T) {
	leakcheck.Check(t)
	env := map[string]string{"TCE_INTERNAL_IDC": "lf", "TCE_LOGICAL_CLUSTER": "default", "MY_HOST_IP": "127.0.0.1"}
	conf := newConf(t, env, func(c *fieldsT) {
		c.Bzid, c.BaseName, c.DeployType = strp("test_model"), strp(modelName), strp("ps")
		c.BasePath = strp("/test_model/" + modelName + "/saved_models")
		c.NumPS, c.DCAware = 20, true
	})
	prefix, err := conf.PathPrefix()
	if err != nil {
		t.Fatal(err)
	}
	if prefix != "/test_model/service/"+modelName+"/lf:default" {
		t.Fatalf("path prefix %s", prefix)
	}
	w := newFakeWatcher(true)
	registerReplicas(w, prefix, conf.NumPS)
	// A replica of another location must not show.
	w.set("/test_model/service/"+modelName+"/hl:default/ps:0/0", meta("10.0.0.1:1", datadef.StateAvailable))

	srv, err := Listen(NewWatcherService(w, WatcherConfigFrom(conf), WithLogger(quiet)), 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Stop(time.Second)
	port := srv.Port()
	conf.AgentPort = &port
	client, err := NewClient(conf, ClientOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	t.Run("heart_beat", func(t *testing.T) {
		resp, err := client.HeartBeat(bg(), pb.ServerType_PS)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(resp.Addresses); n != 20 {
			t.Errorf("%d PS tasks, want 20", n)
		}
		for task := 0; task < 20; task++ {
			got := resp.Addresses["ps:"+strconv.Itoa(task)].GetAddress()
			want := []string{fmt.Sprintf("192.168.1.%d:%d", 2+2*task, 7002+2*task), fmt.Sprintf("192.168.1.%d:%d", 3+2*task, 7003+2*task)}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("ps:%d = %v, want %v", task, got, want)
			}
		}
		entry, err := client.HeartBeat(bg(), pb.ServerType_ENTRY)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(table(entry)); got != "map[entry:0:[192.168.1.42:7042 192.168.1.43:7043]]" {
			t.Errorf("entry table %s", got)
		}
	})
	t.Run("get_replicas", func(t *testing.T) {
		resp, err := client.GetReplicas(bg(), pb.ServerType_PS, numPSReplicas-1)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetAddressList().GetAddress(); len(got) != numPSReplicas || got[0] != "192.168.1.4:7004" {
			t.Errorf("ps:1 replicas %v", got)
		}
	})
	t.Run("get_resource", func(t *testing.T) {
		resp, err := client.GetResource(bg())
		if err != nil || resp.Address != "" || resp.Memory != 0 {
			t.Errorf("v1 GetResource = %v, %v; want empty", resp, err)
		}
	})
}

// blockingProvider blocks every HeartBeat until released, to hold RPCs in flight.
type blockingProvider struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingProvider) fn() map[string][]string {
	b.entered <- struct{}{}
	<-b.release
	return map[string][]string{"m:entry": {"a:1"}}
}

func TestStopWaitsForRPCsInFlightUpToGrace(t *testing.T) {
	tests := []struct {
		name      string
		grace     time.Duration
		releaseIn time.Duration // when the blocked RPC is let go (0: never, until cleanup)
		wantCode  codes.Code
	}{
		{name: "graceful: the RPC in flight completes", grace: 5 * time.Second, releaseIn: 50 * time.Millisecond, wantCode: codes.OK},
		{name: "grace runs out: hard stop cancels it", grace: 100 * time.Millisecond, wantCode: codes.Unavailable},
		{name: "no grace: hard stop at once", grace: 0, wantCode: codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leakcheck.Check(t)
			bp := &blockingProvider{entered: make(chan struct{}, 1), release: make(chan struct{})}
			srv, err := Listen(NewProviderService(bp.fn, nil, WithLogger(quiet)), 0)
			if err != nil {
				t.Fatal(err)
			}
			srv.Start()
			client, err := Dial(fmt.Sprintf("127.0.0.1:%d", srv.Port()), ClientOptions{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			var wg sync.WaitGroup
			var callErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, callErr = client.HeartBeat(bg(), pb.ServerType_ENTRY)
			}()
			<-bp.entered
			var once sync.Once
			release := func() { once.Do(func() { close(bp.release) }) }
			defer release()
			if tc.releaseIn > 0 {
				time.AfterFunc(tc.releaseIn, release)
			}
			start := time.Now()
			srv.Stop(tc.grace)
			took := time.Since(start)
			if err := srv.Wait(); err != nil {
				t.Errorf("Wait after Stop = %v", err)
			}
			if tc.wantCode != codes.OK && took > tc.grace+2*time.Second {
				t.Errorf("Stop took %v with grace %v", took, tc.grace)
			}
			release()
			wg.Wait()
			if got := status.Code(errors.Unwrap(callErr)); got != tc.wantCode && !(callErr == nil && tc.wantCode == codes.OK) {
				t.Errorf("RPC in flight ended with %v, want %s", callErr, tc.wantCode)
			}
			// A stopped server refuses new calls.
			ctx, cancel := context.WithTimeout(bg(), 200*time.Millisecond)
			defer cancel()
			if _, err := client.GetResource(ctx); err == nil {
				t.Error("GetResource succeeded after Stop")
			}
		})
	}
}

func TestServerLifecycle(t *testing.T) {
	leakcheck.Check(t)
	svc := NewProviderService(nil, nil, WithLogger(quiet))
	// Stop before Start releases the port; Wait returns; Stop twice is fine.
	srv, err := Listen(svc, 0)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Port()
	srv.Stop(time.Second)
	srv.Stop(0)
	if err := srv.Wait(); err != nil {
		t.Errorf("Wait = %v", err)
	}
	srv.Start() // after Stop: nothing happens
	again, err := Listen(svc, port)
	if err != nil {
		t.Fatalf("port %d still held after Stop: %v", port, err)
	}
	again.Start()
	again.Start()
	if _, err := Listen(svc, port); err == nil {
		t.Error("second Listen on a port in use succeeded")
	}
	again.Stop(0)
	if _, err := Listen(svc, 70000); err == nil {
		t.Error("port 70000 accepted")
	}
}

func TestClientDeadline(t *testing.T) {
	leakcheck.Check(t)
	bp := &blockingProvider{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := Listen(NewProviderService(bp.fn, nil, WithLogger(quiet)), 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Stop(0)
	defer close(bp.release)
	client, err := Dial(fmt.Sprintf("127.0.0.1:%d", srv.Port()), ClientOptions{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	start := time.Now()
	_, err = client.HeartBeat(bg(), pb.ServerType_PS)
	if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Errorf("HeartBeat on a stuck server: %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the default deadline did not bound the call: %v", took)
	}
	<-bp.entered
	// A caller's earlier deadline wins over the client's.
	ctx, cancel := context.WithTimeout(bg(), 10*time.Millisecond)
	defer cancel()
	if _, err := client.GetReplicas(ctx, pb.ServerType_PS, 0); err == nil {
		t.Error("GetReplicas succeeded on v3")
	}
}

func TestClientTarget(t *testing.T) {
	conf := newConf(t, map[string]string{"MY_HOST_IP": "10.9.8.7", "PORT2": "8002"}, func(c *fieldsT) {
		c.Bzid, c.BaseName, c.DeployType = strp("b"), strp("m"), strp("ps")
	})
	if got, err := Target(conf); err != nil || got != "10.9.8.7:8002" {
		t.Errorf("Target = %q, %v", got, err)
	}
	conf.AgentPort = nil
	if _, err := NewClient(conf, ClientOptions{}); err == nil {
		t.Error("NewClient without agent_port succeeded")
	}
}

func TestInterceptorSeesEveryCall(t *testing.T) {
	leakcheck.Check(t)
	w := newFakeWatcher(false)
	w.set("/bz/service/m/ps:0/0", meta("a:1", datadef.StateAvailable))
	var calls []string
	var mu sync.Mutex
	ic := grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		calls = append(calls, info.FullMethod)
		mu.Unlock()
		return h(ctx, req)
	})
	srv, err := Listen(NewWatcherService(versionedWatcher{w}, WatcherConfig{}, WithLogger(quiet)), 0, ic)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Stop(time.Second)
	client, err := Dial(fmt.Sprintf("127.0.0.1:%d", srv.Port()), ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := 0; i < 2; i++ { // the second answer comes from the cache, pre-encoded
		resp, err := client.HeartBeat(bg(), pb.ServerType_PS)
		if err != nil || fmt.Sprint(table(resp)) != "map[ps:0:[a:1]]" {
			t.Fatalf("HeartBeat = %v, %v", resp, err)
		}
	}
	if _, err := client.GetResource(bg()); err != nil {
		t.Fatal(err)
	}
	want := "[/monolith.serving.agent_service.AgentService/HeartBeat /monolith.serving.agent_service.AgentService/HeartBeat /monolith.serving.agent_service.AgentService/GetResource]"
	if fmt.Sprint(calls) != want {
		t.Errorf("interceptor saw %v", calls)
	}
}
