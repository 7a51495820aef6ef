package agentstatus

import (
	"context"
	"fmt"

	"github.com/monolith-go/monolith/pkg/zk"
)

// ephemeralRegistrar is the optional interface of clients that re-create their ephemeral nodes on
// every new session (zkreal.Client); the backend looks for it, so the instrumented client keeps it.
type ephemeralRegistrar interface {
	RegisterEphemeral(ctx context.Context, path string, data []byte) error
	Unregister(ctx context.Context, path string) error
}

// InstrumentZK returns c with its watch calls counted in zk_watch_events_total. Everything else
// is c's own: closing the result closes c. With nil Metrics it returns c itself.
func (m *Metrics) InstrumentZK(c zk.Client) zk.Client {
	if m == nil || c == nil {
		return c
	}
	ic := &instrumentedZK{Client: c, m: m}
	if r, ok := c.(ephemeralRegistrar); ok {
		return &instrumentedRegistrarZK{instrumentedZK: ic, r: r}
	}
	return ic
}

type instrumentedZK struct {
	zk.Client
	m *Metrics
}

// Unwrap is the client the instrumentation wraps (for ZKSessionID).
func (c *instrumentedZK) Unwrap() zk.Client { return c.Client }

func (c *instrumentedZK) DataWatch(path string, fn zk.DataWatchFunc) (zk.Watch, error) {
	return c.Client.DataWatch(path, func(data []byte, stat *zk.Stat, ev *zk.WatchEvent) bool {
		c.m.watchEvent("data", ev)
		return fn(data, stat, ev)
	})
}

func (c *instrumentedZK) ChildrenWatch(path string, fn zk.ChildrenWatchFunc) (zk.Watch, error) {
	return c.Client.ChildrenWatch(path, func(children []string, ev *zk.WatchEvent) bool {
		c.m.watchEvent("children", ev)
		return fn(children, ev)
	})
}

type instrumentedRegistrarZK struct {
	*instrumentedZK
	r ephemeralRegistrar
}

func (c *instrumentedRegistrarZK) RegisterEphemeral(ctx context.Context, path string, data []byte) error {
	return c.r.RegisterEphemeral(ctx, path, data)
}

func (c *instrumentedRegistrarZK) Unregister(ctx context.Context, path string) error {
	return c.r.Unregister(ctx, path)
}

// ZKSessionID is c's current session id as ZooKeeper's tools print it ("0x..."), "" when c has
// no session or does not tell its id. It knows zkreal's and zkfake's SessionID, and looks
// through wrappers that have Unwrap() zk.Client (InstrumentZK's).
func ZKSessionID(c zk.Client) string {
	for range 8 { // wrappers are shallow; a cycle must not hang the status page
		var id int64
		switch s := c.(type) {
		case nil:
			return ""
		case interface{ SessionID() (int64, []byte) }: // zkreal.Client
			id, _ = s.SessionID()
		case interface{ SessionID() int64 }: // zkfake.Fake
			id = s.SessionID()
		case interface{ Unwrap() zk.Client }:
			c = s.Unwrap()
			continue
		default:
			return ""
		}
		if id == 0 {
			return ""
		}
		return fmt.Sprintf("0x%x", id)
	}
	return ""
}
