// Package consultest is a Consul agent for tests: an HTTP server implementing exactly the endpoints
// the reference's client uses (a real Consul is not available from Debian), on 127.0.0.1 or on a
// unix socket, with the faults the client must survive.
//
//	PUT /v1/agent/service/register               register (or replace) a service; its check starts critical
//	PUT /v1/agent/service/deregister/<id>        remove a service (404 when unknown, as Consul)
//	GET /v1/agent/check/pass/service:<id>        pass the service's TTL check (404 when unknown)
//	GET /v1/lookup/name?name=<n>&addr-family=... the services named n whose check passed within its TTL
//
// A lookup lists {"Host", "Port", "Tags"} with the tags "k:v" as a map, like the agent the
// reference was written against.
package consultest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the agent answered (or dropped).
type Request struct {
	Method string
	// Path is the path with its query.
	Path string
	Body string
}

// Service is a registered service as the agent keeps it.
type Service struct {
	ID, Name string
	Port     int
	Tags     []string
	// TTL of its check (0: no TTL check, e.g. a script check, which the fake counts as passing).
	TTL time.Duration
	// Passes counts the check passes received.
	Passes   int
	lastPass time.Time
}

// Agent is the fake agent.
type Agent struct {
	srv  *http.Server
	ln   net.Listener
	addr string // "127.0.0.1:port" or the socket path
	done chan struct{}

	mu       sync.Mutex
	services map[string]*Service
	requests []Request
	drop     int             // requests still to drop
	dropPath string          // the path prefix drop applies to ("" = any)
	hidden   map[string]bool // service ids lookups leave out (a blacklisted machine)
	refuse   map[string]int  // path prefix -> status to answer instead
}

// Start serves a fake agent on a free port of 127.0.0.1; t.Cleanup stops it.
func Start(t testing.TB) *Agent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("consultest: %v", err)
	}
	return serve(t, ln, ln.Addr().String())
}

// StartUnix serves a fake agent on a unix socket in t.TempDir(); t.Cleanup stops it.
func StartUnix(t testing.TB) *Agent {
	t.Helper()
	path := filepath.Join(t.TempDir(), "consul.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("consultest: %v", err)
	}
	return serve(t, ln, path)
}

func serve(t testing.TB, ln net.Listener, addr string) *Agent {
	a := &Agent{ln: ln, addr: addr, done: make(chan struct{}), services: map[string]*Service{},
		hidden: map[string]bool{}, refuse: map[string]int{}}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.handle), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(a.done)
		a.srv.Serve(ln)
	}()
	t.Cleanup(a.Close)
	return a
}

// Close stops the agent and closes its connections.
func (a *Agent) Close() {
	a.srv.Close()
	<-a.done
}

// Addr is "127.0.0.1:port", or the socket's path.
func (a *Agent) Addr() string { return a.addr }

// HostPort splits Addr (TCP agents only).
func (a *Agent) HostPort() (string, int) {
	host, port, _ := net.SplitHostPort(a.addr)
	var p int
	fmt.Sscanf(port, "%d", &p)
	return host, p
}

// DropNext makes the agent close the connection of the next n requests whose path starts with
// prefix ("" for any) without answering: the client sees a socket error.
func (a *Agent) DropNext(prefix string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.drop, a.dropPath = n, prefix
}

// Hide makes lookups leave service id out, however healthy (a machine Consul blacklisted).
func (a *Agent) Hide(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hidden[id] = true
}

// Refuse answers status (with a short body) to every request whose path starts with prefix.
func (a *Agent) Refuse(prefix string, status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refuse[prefix] = status
}

// Requests returns the requests seen so far.
func (a *Agent) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.requests...)
}

// Service returns a copy of service id and whether it is registered.
func (a *Agent) Service(id string) (Service, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.services[id]
	if !ok {
		return Service{}, false
	}
	c := *s
	c.Tags = append([]string(nil), s.Tags...)
	return c, true
}

// Expire makes service id's check critical, as if its TTL had run out.
func (a *Agent) Expire(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.services[id]; s != nil {
		s.lastPass = time.Time{}
	}
}

// Add registers a service directly (another machine's registration), its check passing.
func (a *Agent) Add(s Service) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := s
	c.lastPass = time.Now()
	a.services[s.ID] = &c
}

func (a *Agent) handle(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	body := string(raw)
	a.mu.Lock()
	a.requests = append(a.requests, Request{Method: r.Method, Path: r.URL.RequestURI(), Body: body})
	if a.drop > 0 && strings.HasPrefix(r.URL.Path, a.dropPath) {
		a.drop--
		a.mu.Unlock()
		hijackClose(w)
		return
	}
	for prefix, status := range a.refuse {
		if strings.HasPrefix(r.URL.Path, prefix) {
			a.mu.Unlock()
			http.Error(w, "refused by the test", status)
			return
		}
	}
	defer a.mu.Unlock()
	path := r.URL.Path
	switch {
	case r.Method == http.MethodPut && path == "/v1/agent/service/register":
		a.register(w, body)
	case r.Method == http.MethodPut && strings.HasPrefix(path, "/v1/agent/service/deregister/"):
		id := strings.TrimPrefix(path, "/v1/agent/service/deregister/")
		if _, ok := a.services[id]; !ok {
			http.Error(w, fmt.Sprintf("Unknown service ID %q. Ensure that the service ID is passed, not the service name.", id), http.StatusNotFound)
			return
		}
		delete(a.services, id)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/v1/agent/check/pass/service:"):
		id := strings.TrimPrefix(path, "/v1/agent/check/pass/service:")
		s, ok := a.services[id]
		if !ok {
			http.Error(w, fmt.Sprintf("Unknown check ID \"service:%s\"", id), http.StatusNotFound)
			return
		}
		s.Passes++
		s.lastPass = time.Now()
	case r.Method == http.MethodGet && path == "/v1/lookup/name":
		a.lookup(w, r.URL.Query().Get("name"))
	default:
		http.NotFound(w, r)
	}
}

func (a *Agent) register(w http.ResponseWriter, body string) {
	var req struct {
		ID    string            `json:"id"`
		Name  string            `json:"name"`
		Port  *int              `json:"port"`
		Tags  []string          `json:"tags"`
		Check map[string]string `json:"check"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.ID == "" || req.Name == "" || req.Port == nil {
		http.Error(w, fmt.Sprintf("bad service definition: %v", err), http.StatusBadRequest)
		return
	}
	s := &Service{ID: req.ID, Name: req.Name, Port: *req.Port, Tags: req.Tags}
	if ttl, ok := req.Check["ttl"]; ok {
		d, err := time.ParseDuration(ttl)
		if err != nil {
			http.Error(w, "bad ttl: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.TTL = d
	}
	a.services[req.ID] = s
}

type lookupElement struct {
	Host string            `json:"Host"`
	Port int               `json:"Port"`
	Tags map[string]string `json:"Tags"`
}

func (a *Agent) lookup(w http.ResponseWriter, name string) {
	out := []lookupElement{}
	now := time.Now()
	for id, s := range a.services {
		if s.Name != name || a.hidden[id] {
			continue
		}
		if s.TTL > 0 && (s.lastPass.IsZero() || now.Sub(s.lastPass) > s.TTL) {
			continue // critical: Consul leaves unhealthy instances out
		}
		tags := map[string]string{}
		for _, t := range s.Tags {
			k, v, _ := strings.Cut(t, ":")
			tags[k] = v
		}
		out = append(out, lookupElement{Host: tags["ip"], Port: s.Port, Tags: tags})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// hijackClose closes the request's connection without an answer.
func hijackClose(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("consultest: the response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
}
