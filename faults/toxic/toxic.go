// Package toxic runs Shopify's toxiproxy (github.com/Shopify/toxiproxy/v2) in a test's process:
// TCP proxies placed between two parts of the system, on 127.0.0.1, whose toxics (latency with
// jitter, bandwidth, a stalled connection) are added and removed while traffic flows. The
// machines the fault suite runs on have no netem, so delay goes through these proxies.
//
//	p := toxic.Start(t, "ps_1", psAddr) // the worker dials p.Addr instead of psAddr
//	p.Latency("slow", toxic.Both, 100*time.Millisecond, 50*time.Millisecond)
//	p.Stall("stall", toxic.Upstream) // data stops; removing it closes the stalled connections
//	p.Remove("stall")
//
// Streams: Upstream is client to server, Downstream server to client; Both adds a toxic to each
// (named <name>_up and <name>_down, removed together by Remove(name)).
package toxic

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Stream is the direction of a toxic.
type Stream int

const (
	// Upstream is client to server.
	Upstream Stream = 1 << iota
	// Downstream is server to client.
	Downstream
	// Both is each direction.
	Both = Upstream | Downstream
)

// Proxy is a toxiproxy proxy of this process.
type Proxy struct {
	t testing.TB
	p *toxiproxy.Proxy
	// Addr is where clients connect (127.0.0.1, a free port).
	Addr     string
	Upstream string
	names    map[string][]string // toxic name -> the toxiproxy toxics it added
}

// Start starts a proxy named name to upstream (host:port), listening on a free loopback port;
// it stops when the test ends, closing its connections.
func Start(t testing.TB, name, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy %s to %s: %v", name, upstream, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{t: t, p: p, Addr: p.Listen, Upstream: upstream, names: map[string][]string{}}
}

// Latency delays every chunk of the stream(s) by latency, plus or minus up to jitter (uniform).
func (p *Proxy) Latency(name string, s Stream, latency, jitter time.Duration) {
	p.t.Helper()
	p.add(name, s, "latency", map[string]int64{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()})
}

// Bandwidth bounds the stream(s) to kbPerSec kilobytes a second.
func (p *Proxy) Bandwidth(name string, s Stream, kbPerSec int64) {
	p.t.Helper()
	p.add(name, s, "bandwidth", map[string]int64{"rate": kbPerSec})
}

// Stall stops all data of the stream(s) on every connection, new ones included (toxiproxy's
// timeout toxic with timeout 0: the data is dropped, nothing is closed), until Remove, which
// closes the stalled connections.
func (p *Proxy) Stall(name string, s Stream) {
	p.t.Helper()
	p.add(name, s, "timeout", map[string]int64{"timeout": 0})
}

// Remove removes the toxic(s) added as name.
func (p *Proxy) Remove(name string) {
	p.t.Helper()
	for _, n := range p.names[name] {
		if err := p.p.Toxics.RemoveToxic(context.Background(), n); err != nil {
			p.t.Fatalf("toxiproxy %s: remove toxic %s: %v", p.p.Name, n, err)
		}
	}
	delete(p.names, name)
}

func (p *Proxy) add(name string, s Stream, typ string, attrs map[string]int64) {
	p.t.Helper()
	if _, ok := p.names[name]; ok {
		p.t.Fatalf("toxiproxy %s: a toxic %s is already there", p.p.Name, name)
	}
	for _, dir := range []struct {
		s            Stream
		stream, name string
	}{{Upstream, "upstream", name + "_up"}, {Downstream, "downstream", name + "_down"}} {
		if s&dir.s == 0 {
			continue
		}
		b, err := json.Marshal(map[string]any{"name": dir.name, "type": typ, "stream": dir.stream, "toxicity": 1.0, "attributes": attrs})
		if err != nil {
			p.t.Fatal(err)
		}
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(b))); err != nil {
			p.t.Fatalf("toxiproxy %s: add %s toxic %s: %v", p.p.Name, typ, dir.name, err)
		}
		p.names[name] = append(p.names[name], dir.name)
	}
}

// String says what the proxy is.
func (p *Proxy) String() string {
	return fmt.Sprintf("toxiproxy %s %s -> %s", p.p.Name, p.Addr, p.Upstream)
}
