package agentstatus

import (
	"context"

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
