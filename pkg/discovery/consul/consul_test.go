package consul_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery/consul"
	"github.com/monolith-go/monolith/pkg/discovery/consul/consultest"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

var quietLog = slog.New(slog.DiscardHandler)

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func clientOf(t *testing.T, a *consultest.Agent, interval time.Duration) *consul.Client {
	t.Helper()
	cfg := consul.Config{Host: a.Addr(), CheckInterval: interval, CheckRetry: 10 * time.Millisecond, Logger: quietLog}
	if host, port := a.HostPort(); port != 0 {
		cfg.Host, cfg.Port = host, port
	}
	c := consul.New(cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "consul.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none.sock")
	tests := []struct {
		name    string
		env     trainenv.Env
		socket  string
		want    consul.Config
		wantErr bool
	}{
		{"CONSUL_HTTP_HOST first", trainenv.Env{"CONSUL_HTTP_HOST": "127.0.0.5", "TCE_HOST_IP": "127.0.0.6", "CONSUL_HTTP_PORT": "8500"}, sock,
			consul.Config{Host: "127.0.0.5", Port: 8500}, false},
		{"TCE_HOST_IP", trainenv.Env{"TCE_HOST_IP": "127.0.0.6"}, sock, consul.Config{Host: "127.0.0.6", Port: consul.DefaultPort}, false},
		{"socket when it exists", trainenv.Env{}, sock, consul.Config{Host: sock, Port: consul.DefaultPort}, false},
		{"loopback otherwise", trainenv.Env{}, missing, consul.Config{Host: "127.0.0.1", Port: consul.DefaultPort}, false},
		{"bad port", trainenv.Env{"CONSUL_HTTP_PORT": "http"}, missing, consul.Config{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := consul.ConfigFromEnv(tc.env, tc.socket)
			if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ConfigFromEnv = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
			if err != nil && errkind.Of(err) != errkind.Value {
				t.Fatalf("error kind %v, want Value", errkind.Of(err))
			}
		})
	}
}

// TestProtocol checks each request against the reference's, on TCP and on a unix socket.
func TestProtocol(t *testing.T) {
	for _, transport := range []string{"tcp", "unix"} {
		t.Run(transport, func(t *testing.T) {
			leakcheck.Check(t)
			var a *consultest.Agent
			if transport == "unix" {
				a = consultest.StartUnix(t)
			} else {
				a = consultest.Start(t)
			}
			c := clientOf(t, a, time.Hour)
			ctx := tctx(t)
			tags := []consul.Tag{{Key: "index", Value: "0"}, {Key: "name", Value: "ps"}, {Key: "ip", Value: "127.0.0.1"}}
			if err := c.Register(ctx, "psm", 1000, consul.RegisterOptions{Tags: tags}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the first TTL pass", func() bool { s, _ := a.Service("psm-1000"); return s.Passes == 1 })
			got, err := c.Lookup(ctx, "psm", 0)
			want := []consul.Service{{Port: 1000, Tags: map[string]string{"index": "0", "name": "ps", "ip": "127.0.0.1"}}}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("Lookup = %+v, %v; want %+v", got, err, want)
			}
			if err := c.Deregister(ctx, "psm", 1000); err != nil {
				t.Fatal(err)
			}
			reqs := a.Requests()
			if len(reqs) != 4 {
				t.Fatalf("requests: %+v", reqs)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(reqs[0].Body), &body); err != nil {
				t.Fatal(err)
			}
			wantBody := map[string]any{"id": "psm-1000", "name": "psm", "port": 1000.0, "check": map[string]any{"ttl": "60s"},
				"tags": []any{"index:0", "name:ps", "ip:127.0.0.1"}}
			if reqs[0].Method != http.MethodPut || reqs[0].Path != "/v1/agent/service/register" || !reflect.DeepEqual(body, wantBody) {
				t.Fatalf("register request %+v, body %v; want PUT /v1/agent/service/register %v", reqs[0], body, wantBody)
			}
			wantRest := []consultest.Request{
				{Method: http.MethodGet, Path: "/v1/agent/check/pass/service:psm-1000"},
				{Method: http.MethodGet, Path: "/v1/lookup/name?name=psm&addr-family=dual-stack"},
				{Method: http.MethodPut, Path: "/v1/agent/service/deregister/psm-1000"},
			}
			if !reflect.DeepEqual(reqs[1:], wantRest) {
				t.Fatalf("requests %+v, want %+v", reqs[1:], wantRest)
			}
			if _, ok := a.Service("psm-1000"); ok {
				t.Fatal("still registered after Deregister")
			}
		})
	}
}

// TestTTLPasses: the check is passed every interval until Deregister (or Close), and after a failed
// attempt again soon.
func TestTTLPasses(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	c := clientOf(t, a, 30*time.Millisecond)
	ctx := tctx(t)
	for _, port := range []int{1000, 1001} {
		if err := c.Register(ctx, "psm", port, consul.RegisterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "several passes", func() bool {
		s, _ := a.Service("psm-1000")
		return s.Passes >= 4
	})
	a.DropNext("/v1/agent/check/pass/", 2)
	before, _ := a.Service("psm-1001")
	eventually(t, "passes again after dropped requests", func() bool {
		s, _ := a.Service("psm-1001")
		return s.Passes >= before.Passes+3
	})
	if err := c.Deregister(ctx, "psm", 1000); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	reqs := a.Requests()
	dereg := -1
	for i, r := range reqs {
		switch {
		case r.Path == "/v1/agent/service/deregister/psm-1000":
			dereg = i
		case dereg >= 0 && r.Path == "/v1/agent/check/pass/service:psm-1000":
			t.Fatalf("a pass after Deregister: request %d of %+v", i, reqs)
		}
	}
	if dereg < 0 {
		t.Fatal("no deregister request")
	}
	c.Close()
	n := len(a.Requests())
	time.Sleep(100 * time.Millisecond)
	if m := len(a.Requests()); m != n {
		t.Fatalf("%d requests after Close", m-n)
	}
	if err := c.Register(ctx, "psm", 1002, consul.RegisterOptions{}); err == nil {
		t.Fatal("Register after Close succeeded")
	}
}

func TestErrors(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	c := clientOf(t, a, time.Hour)
	ctx := tctx(t)
	a.Refuse("/v1/agent/service/register", http.StatusInternalServerError)
	err := c.Register(ctx, "psm", 1000, consul.RegisterOptions{})
	var se *consul.StatusError
	if !errors.As(err, &se) || se.Status != 500 || errkind.Of(err) != errkind.Runtime || consul.IsTransport(err) {
		t.Fatalf("Register refused: %v; want a StatusError", err)
	}
	// Deregistering an unknown service: the agent answers 404.
	if err := c.Deregister(ctx, "psm", 1000); !errors.As(err, &se) || se.Status != 404 {
		t.Fatalf("Deregister unknown: %v; want a StatusError 404", err)
	}
	// A lookup refused gives no service, as the reference.
	a.Refuse("/v1/lookup/name", http.StatusServiceUnavailable)
	if got, err := c.Lookup(ctx, "psm", 0); err != nil || len(got) != 0 {
		t.Fatalf("Lookup refused = %v, %v; want no service and no error", got, err)
	}
	a.DropNext("", 1)
	if err := c.Deregister(ctx, "psm", 1000); !consul.IsTransport(err) {
		t.Fatalf("Deregister on a dropped connection: %v; want a TransportError", err)
	}
	a.Close()
	if _, err := c.Lookup(ctx, "psm", 0); !consul.IsTransport(err) {
		t.Fatalf("Lookup on a stopped agent: %v; want a TransportError", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Lookup(canceled, "psm", 0); consul.IsTransport(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Lookup with a canceled context: %v; want the context's error", err)
	}
}

func TestLookupTags(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	c := clientOf(t, a, time.Hour)
	a.Add(consultest.Service{ID: "psm-7", Name: "psm", Port: 7, Tags: []string{"index:3", "name:worker", "ip:fdbd::1"}})
	a.Add(consultest.Service{ID: "other-8", Name: "other", Port: 8})
	got, err := c.Lookup(tctx(t), "psm", time.Second)
	want := []consul.Service{{Port: 7, Tags: map[string]string{"index": "3", "name": "worker", "ip": "fdbd::1"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Lookup = %+v, %v; want %+v", got, err, want)
	}
	if id := consul.ServiceID("psm", 7); id != "psm-"+strconv.Itoa(7) {
		t.Fatalf("ServiceID = %q", id)
	}
}
