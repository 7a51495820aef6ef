package discovery_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/discovery/consul"
	"github.com/monolith-go/monolith/pkg/discovery/consul/consultest"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func countRequests(a *consultest.Agent, method, prefix string) int {
	n := 0
	for _, r := range a.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// TestConsulRegisterReplacesPrevious: a registration of the same server type and index found in a
// lookup is deregistered first (by its port), then the new one registered.
func TestConsulRegisterReplacesPrevious(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	a.Add(consultest.Service{ID: "psm-1500", Name: "psm", Port: 1500, Tags: []string{"index:0", "name:ps", "ip:127.0.0.1"}})
	a.Add(consultest.Service{ID: "psm-2000", Name: "psm", Port: 2000, Tags: []string{"index:0", "name:worker", "ip:127.0.0.1"}})
	d := newConsul(t, a, "psm")
	ctx := tctx(t)
	if err := d.Register(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Service("psm-1500"); ok {
		t.Fatal("the previous ps.0 is still registered")
	}
	all, err := d.QueryAll(ctx)
	if err != nil || !maps.Equal(all["ps"], map[int]string{0: "127.0.0.1:1000"}) || !maps.Equal(all["worker"], map[int]string{0: "127.0.0.1:2000"}) {
		t.Fatalf("QueryAll = %v, %v", all, err)
	}
}

// TestConsulSocketErrorsRetried: requests failing on the socket are sent again, up to 5 times.
func TestConsulSocketErrorsRetried(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	d := newConsul(t, a, "psm")
	ctx := tctx(t)
	a.DropNext("/v1/agent/service/register", 4)
	if err := d.Register(ctx, "ps", 0, "127.0.0.1:1000"); err != nil {
		t.Fatalf("Register with 4 dropped requests: %v", err)
	}
	a.DropNext("/v1/lookup/name", 4)
	if got, err := d.Query(ctx, "ps"); err != nil || !maps.Equal(got, map[int]string{0: "127.0.0.1:1000"}) {
		t.Fatalf("Query with 4 dropped requests = %v, %v", got, err)
	}
	before := countRequests(a, http.MethodGet, "/v1/lookup/name")
	a.DropNext("/v1/lookup/name", 5)
	if _, err := d.Query(ctx, "ps"); !consul.IsTransport(err) {
		t.Fatalf("Query with 5 dropped requests: %v; want a TransportError", err)
	}
	if n := countRequests(a, http.MethodGet, "/v1/lookup/name") - before; n != 5 {
		t.Fatalf("%d lookups sent, want 5", n)
	}
	// An agent's refusal is not a socket error: no retry.
	a.Refuse("/v1/agent/service/deregister/", http.StatusInternalServerError)
	before = countRequests(a, http.MethodPut, "/v1/agent/service/deregister/")
	var se *consul.StatusError
	if err := d.Deregister(ctx, "ps", 0, "127.0.0.1:1000"); !errors.As(err, &se) {
		t.Fatalf("Deregister refused: %v; want a StatusError", err)
	}
	if n := countRequests(a, http.MethodPut, "/v1/agent/service/deregister/") - before; n != 1 {
		t.Fatalf("%d deregisters sent, want 1", n)
	}
}

// TestConsulBlacklisted: a registration that never shows in lookups fails after the polls.
func TestConsulBlacklisted(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	a.Hide("psm-1000")
	d := newConsul(t, a, "psm")
	err := d.Register(tctx(t), "ps", 0, "127.0.0.1:1000")
	if !errors.Is(err, discovery.ErrBlacklisted) {
		t.Fatalf("Register hidden by the agent: %v; want ErrBlacklisted", err)
	}
	// One lookup before registering, then the first and 36 more while waiting.
	if n := countRequests(a, http.MethodGet, "/v1/lookup/name"); n != 1+1+discovery.DefaultConsulPolls {
		t.Fatalf("%d lookups, want %d", n, 2+discovery.DefaultConsulPolls)
	}
}

// TestConsulNeedsTTLPass: a registration shows only once its TTL check passed, which the client's
// loop does; a check that stops passing takes the service out of lookups.
func TestConsulNeedsTTLPass(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	d := newConsul(t, a, "psm")
	ctx := tctx(t)
	if err := d.Register(ctx, "worker", 1, "127.0.0.1:2001"); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.Service("psm-2001"); s.Passes == 0 {
		t.Fatal("registered without a TTL pass")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	a.Expire("psm-2001")
	peer := newConsul(t, a, "psm")
	if got, err := peer.Query(ctx, "worker"); err != nil || len(got) != 0 {
		t.Fatalf("Query after the check went critical = %v, %v; want nothing", got, err)
	}
}

func TestConsulBadArguments(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	d := newConsul(t, a, "psm")
	ctx := tctx(t)
	for _, addr := range []string{"127.0.0.1", "::1:1000", "127.0.0.1:http"} {
		if err := d.Register(ctx, "ps", 0, addr); errkind.Of(err) != errkind.Value {
			t.Errorf("Register(%q) = %v; want an error of kind Value", addr, err)
		}
		if err := d.Deregister(ctx, "ps", 0, addr); errkind.Of(err) != errkind.Value {
			t.Errorf("Deregister(%q) = %v; want an error of kind Value", addr, err)
		}
	}
	a.Add(consultest.Service{ID: "psm-5", Name: "psm", Port: 5, Tags: []string{"name:ps", "index:x", "ip:127.0.0.1"}})
	if _, err := d.Query(ctx, "ps"); errkind.Of(err) != errkind.Value {
		t.Errorf("Query with a bad index tag = %v; want an error of kind Value", err)
	}
	if _, err := discovery.NewConsul(discovery.ConsulOptions{Client: consul.New(consul.Config{Host: "127.0.0.1"})}); errkind.Of(err) != errkind.Value {
		t.Errorf("NewConsul without a consul id = %v; want an error of kind Value", err)
	}
}

// TestConsulIgnoresForeignServices: services under the name without the discovery's tags are
// skipped (the reference raised KeyError).
func TestConsulIgnoresForeignServices(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	a.Add(consultest.Service{ID: "psm-9", Name: "psm", Port: 9, Tags: []string{"env:prod"}})
	a.Add(consultest.Service{ID: "psm-1000", Name: "psm", Port: 1000, Tags: []string{"index:0", "name:ps", "ip:127.0.0.1"}})
	d := newConsul(t, a, "psm")
	if got, err := d.Query(tctx(t), "ps"); err != nil || !maps.Equal(got, map[int]string{0: "127.0.0.1:1000"}) {
		t.Fatalf("Query = %v, %v", got, err)
	}
}

func TestDeregisterAll(t *testing.T) {
	leakcheck.Check(t)
	a := consultest.Start(t)
	for _, s := range []consultest.Service{
		{ID: "psm-1000", Name: "psm", Port: 1000, Tags: []string{"index:0", "name:ps", "ip:127.0.0.1"}},
		{ID: "psm-2000", Name: "psm", Port: 2000, Tags: []string{"index:0", "name:worker", "ip:127.0.0.1"}},
		{ID: "other-3000", Name: "other", Port: 3000, Tags: []string{"index:0", "name:ps", "ip:127.0.0.1"}},
	} {
		a.Add(s)
	}
	host, port := a.HostPort()
	client := consul.New(consul.Config{Host: host, Port: port, Logger: quietLog})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := discovery.DeregisterAll(ctx, client, "psm"); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"psm-1000": false, "psm-2000": false, "other-3000": true} {
		if _, ok := a.Service(id); ok != want {
			t.Errorf("%s registered: %v, want %v", id, ok, want)
		}
	}
}
