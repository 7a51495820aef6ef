// Package consul is the Consul agent client of the reference (native_training/consul.py): it
// registers a service with the local agent, keeps it alive by passing its TTL check every 30 s,
// deregisters it, and looks services up by name, over the agent's HTTP API on a unix socket or on
// host:port.
//
// The protocol is the reference's, request for request:
//
//	PUT /v1/agent/service/register           {"id": "<name>-<port>", "name", "port", "check": {"ttl": "60s"}, "tags": ["k:v", ...]}
//	GET /v1/agent/check/pass/service:<name>-<port>   (every 30 s after a register)
//	PUT /v1/agent/service/deregister/<name>-<port>
//	GET /v1/lookup/name?name=<name>&addr-family=dual-stack   -> [{"Port": p, "Tags": {"k": "v"}, ...}]
package consul

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

// Defaults of the reference.
const (
	// DefaultSocket is the agent's unix socket, used when no host is configured and it exists.
	DefaultSocket = "/opt/tmp/sock/consul.sock"
	// DefaultPort is the agent's HTTP port when CONSUL_HTTP_PORT is unset.
	DefaultPort = 2280
	// DefaultCheckInterval spaces the TTL check passes (the check's TTL is 60 s).
	DefaultCheckInterval = 30 * time.Second
	// DefaultCheckRetry is the pause before passing the check again after a failed attempt.
	DefaultCheckRetry = 2 * time.Second
	// DefaultWriteTimeout bounds a register or deregister request.
	DefaultWriteTimeout = 15 * time.Second
	// DefaultLookupTimeout bounds a lookup when the caller gives no timeout.
	DefaultLookupTimeout = 3 * time.Second
)

// Config says where the agent is and how the client paces itself.
type Config struct {
	// Host is the agent's host, or its unix socket when it starts with "/".
	Host string
	// Port is the agent's HTTP port (unused with a socket).
	Port int
	// CheckInterval and CheckRetry pace the TTL check passes (defaults above when 0).
	CheckInterval, CheckRetry time.Duration
	// WriteTimeout bounds register and deregister requests (DefaultWriteTimeout when 0).
	WriteTimeout time.Duration
	// Logger gets the client's log (slog.Default() when nil).
	Logger *slog.Logger
}

// ConfigFromEnv is the reference's choice of agent: CONSUL_HTTP_HOST, else TCE_HOST_IP, else the
// unix socket when something exists at socketPath (DefaultSocket when ""), else 127.0.0.1; the port
// is CONSUL_HTTP_PORT, else DefaultPort. The reference tested the socket with os.path.isfile, which
// is false for a socket, so it never used it; this uses it when it exists. A CONSUL_HTTP_PORT that
// is not an integer is an error of kind Value.
func ConfigFromEnv(env trainenv.Env, socketPath string) (Config, error) {
	if socketPath == "" {
		socketPath = DefaultSocket
	}
	cfg := Config{Host: env.Get("CONSUL_HTTP_HOST")}
	if cfg.Host == "" {
		cfg.Host = env.Get("TCE_HOST_IP")
	}
	if cfg.Host == "" {
		if _, err := os.Stat(socketPath); err == nil {
			cfg.Host = socketPath
		} else {
			cfg.Host = "127.0.0.1"
		}
	}
	cfg.Port = DefaultPort
	if p := env.Get("CONSUL_HTTP_PORT"); p != "" {
		port, err := trainenv.ParseInt("CONSUL_HTTP_PORT", p)
		if err != nil {
			return Config{}, err
		}
		cfg.Port = port
	}
	return cfg, nil
}

// StatusError is an answer other than 200 to a register or deregister (the reference's
// ConsulException, holding the answer's body). Its kind is Runtime.
type StatusError struct {
	Op     string
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("consul %s: HTTP %d: %s", e.Op, e.Status, e.Body)
}

// Unwrap gives the error its kind.
func (e *StatusError) Unwrap() error { return errStatus }

var errStatus = errkind.New(errkind.Runtime, "consul agent refused the request")

// TransportError is a request that failed on the way: the agent could not be reached, or the
// connection broke before the answer was read (the reference's socket.error, which callers retry).
type TransportError struct {
	Op  string
	Err error
}

func (e *TransportError) Error() string { return fmt.Sprintf("consul %s: %v", e.Op, e.Err) }

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// IsTransport reports whether err is (or wraps) a TransportError.
func IsTransport(err error) bool {
	var te *TransportError
	return errors.As(err, &te)
}

// Tag is one service tag, registered as "key:value".
type Tag struct{ Key, Value string }

// Service is one element of a lookup's answer.
type Service struct {
	Port int
	// Tags are the service's tags, key -> value (numbers as their decimal text).
	Tags map[string]string
}

// Client talks to one Consul agent. Safe for concurrent use.
type Client struct {
	cfg    Config
	http   *http.Client
	base   string // scheme://host[:port]
	log    *slog.Logger
	closed chan struct{}

	mu     sync.Mutex
	checks map[string]*healthCheck // service id -> its TTL pass loop
	wg     sync.WaitGroup
	done   bool
}

type healthCheck struct {
	stop chan struct{}
	done chan struct{}
}

// New returns a client of cfg's agent.
func New(cfg Config) *Client {
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.CheckRetry <= 0 {
		cfg.CheckRetry = DefaultCheckRetry
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Client{cfg: cfg, log: log.With("component", "consul"), closed: make(chan struct{}), checks: map[string]*healthCheck{}}
	// One connection per request, as the reference's client: no idle connections to manage, and
	// no silent resend by the transport of a request whose reused connection broke (the retries
	// on socket errors are the discovery's, counted).
	tr := &http.Transport{DisableKeepAlives: true}
	if strings.HasPrefix(cfg.Host, "/") {
		sock := cfg.Host
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		c.base = "http://localhost"
	} else {
		c.base = "http://" + net.JoinHostPort(strings.Trim(cfg.Host, "[]"), strconv.Itoa(cfg.Port))
	}
	c.http = &http.Client{Transport: tr}
	return c
}

// Agent names the agent the client talks to, for logs.
func (c *Client) Agent() string {
	if strings.HasPrefix(c.cfg.Host, "/") {
		return "unix:" + c.cfg.Host
	}
	return c.base
}

// do sends one request and reads the whole answer.
func (c *Client) do(ctx context.Context, op, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("consul %s: %w", op, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("consul %s: %w", op, ctx.Err())
		}
		return 0, nil, &TransportError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("consul %s: %w", op, ctx.Err())
		}
		return 0, nil, &TransportError{Op: op, Err: err}
	}
	return resp.StatusCode, data, nil
}

// Lookup returns the services registered under name (GET /v1/lookup/name). An answer other than
// 200 is logged and gives no service, as in the reference; an answer that is not a JSON list of
// services is an error of kind Value. timeout (DefaultLookupTimeout when 0) bounds the request.
func (c *Client) Lookup(ctx context.Context, name string, timeout time.Duration) ([]Service, error) {
	if timeout <= 0 {
		timeout = DefaultLookupTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := url.Values{"name": {name}, "addr-family": {"dual-stack"}}
	status, data, err := c.do(ctx, "lookup", http.MethodGet, "/v1/lookup/name?"+encodeQuery(q), nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		c.log.Error("consul lookup refused", "name", name, "status", status, "body", string(data))
		return []Service{}, nil
	}
	var raw []struct {
		Port int                        `json:"Port"`
		Tags map[string]json.RawMessage `json:"Tags"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errkind.New(errkind.Value, "consul lookup %s: bad answer: %w", name, err)
	}
	out := make([]Service, 0, len(raw))
	for _, r := range raw {
		s := Service{Port: r.Port, Tags: map[string]string{}}
		for k, v := range r.Tags {
			var str string
			if err := json.Unmarshal(v, &str); err != nil {
				str = string(bytes.TrimSpace(v)) // a number (or other literal) as written
			}
			s.Tags[k] = str
		}
		out = append(out, s)
	}
	return out, nil
}

// encodeQuery keeps the reference's parameter order (name first).
func encodeQuery(q url.Values) string {
	return "name=" + url.QueryEscape(q.Get("name")) + "&addr-family=" + url.QueryEscape(q.Get("addr-family"))
}

// ServiceID is the id the reference gives the service name registered on port.
func ServiceID(name string, port int) string { return fmt.Sprintf("%s-%d", name, port) }

// RegisterOptions are register's optional arguments.
type RegisterOptions struct {
	// Tags are registered as "key:value", in this order.
	Tags []Tag
	// CheckScript replaces the TTL check by a script check run every 30 s.
	CheckScript string
}

// Register registers service name on port with the agent, then passes its TTL check every
// CheckInterval until Deregister of the same service or Close (the reference's thread never
// stopped). An answer other than 200 is a *StatusError; a failed request a *TransportError.
func (c *Client) Register(ctx context.Context, name string, port int, opts RegisterOptions) error {
	if c.isClosed() {
		return fmt.Errorf("consul register: %w", errClientClosed)
	}
	id := ServiceID(name, port)
	body := map[string]any{"id": id, "name": name, "port": port, "check": map[string]string{"ttl": "60s"}}
	if opts.Tags != nil {
		tags := make([]string, len(opts.Tags))
		for i, t := range opts.Tags {
			tags[i] = t.Key + ":" + t.Value
		}
		body["tags"] = tags
	}
	if opts.CheckScript != "" {
		body["check"] = map[string]string{"interval": "30s", "script": opts.CheckScript}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("consul register: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	status, answer, err := c.do(ctx, "register", http.MethodPut, "/v1/agent/service/register", data)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &StatusError{Op: "register", Status: status, Body: string(answer)}
	}
	c.startCheck(id)
	return nil
}

var errClientClosed = errkind.New(errkind.Runtime, "consul client is closed")

// Deregister removes service name on port from the agent and stops passing its check.
func (c *Client) Deregister(ctx context.Context, name string, port int) error {
	id := ServiceID(name, port)
	c.stopCheck(id)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.WriteTimeout)
	defer cancel()
	status, answer, err := c.do(ctx, "deregister", http.MethodPut, "/v1/agent/service/deregister/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &StatusError{Op: "deregister", Status: status, Body: string(answer)}
	}
	return nil
}

// startCheck starts (or restarts) the TTL pass loop of service id.
func (c *Client) startCheck(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	if old := c.checks[id]; old != nil {
		close(old.stop)
	}
	hc := &healthCheck{stop: make(chan struct{}), done: make(chan struct{})}
	c.checks[id] = hc
	c.wg.Add(1)
	go c.passLoop(id, hc)
}

func (c *Client) stopCheck(id string) {
	c.mu.Lock()
	hc := c.checks[id]
	delete(c.checks, id)
	c.mu.Unlock()
	if hc != nil {
		close(hc.stop)
		<-hc.done
	}
}

// passLoop passes the TTL check at once, then every CheckInterval; after a failed attempt it tries
// again after CheckRetry. The answer's status is not looked at, as in the reference.
func (c *Client) passLoop(id string, hc *healthCheck) {
	defer c.wg.Done()
	defer close(hc.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-hc.stop:
		case <-c.closed:
		case <-ctx.Done():
		}
		cancel()
	}()
	for {
		wait := c.cfg.CheckInterval
		reqCtx, reqCancel := context.WithTimeout(ctx, c.cfg.CheckInterval)
		_, _, err := c.do(reqCtx, "check pass", http.MethodGet, "/v1/agent/check/pass/"+url.PathEscape("service:"+id), nil)
		reqCancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Warn("consul TTL check pass failed; retrying", "service", id, "err", err)
			wait = c.cfg.CheckRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// Close stops every TTL pass loop (the services stay registered: their checks go critical after
// the TTL) and releases the connections. Closing again does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return nil
	}
	c.done = true
	c.checks = map[string]*healthCheck{}
	close(c.closed)
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
