// Package embedded runs an in-process Kafka-protocol broker (franz-go's kfake) on loopback, for
// cmd/train's default (no --kafka_servers) and for tests: the same kgo client code that talks to
// a real cluster talks to it over TCP at Addr().
//
// Restart keeps the data: the broker persists its log, topics and committed group offsets to a
// directory (Options.DataDir, or a temporary one that Stop removes) and a restarted broker reloads
// them and listens on the same port, so connected clients reconnect to it. With
// Options.Ephemeral the log stays in memory (faster, for benchmarks) and Restart returns an
// error.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures Start.
type Options struct {
	// Topics are created at start (when the data directory holds none), each with Partitions
	// partitions (default 1).
	Topics     []string
	Partitions int32
	// Port to listen on at 127.0.0.1; 0 picks a free one.
	Port int
	// DataDir is where the broker persists its state; empty means a temporary directory that
	// Stop removes.
	DataDir string
	// Ephemeral keeps everything in memory: nothing survives Stop and Restart is an error.
	Ephemeral bool
	// GroupMinSessionTimeout is the smallest consumer-group session timeout the broker accepts
	// (default 100 ms, so that tests can use short sessions; Kafka's default is 6 s).
	GroupMinSessionTimeout time.Duration
}

// Broker is a running embedded broker.
type Broker struct {
	mu      sync.Mutex
	opts    Options
	c       *kfake.Cluster
	addr    string
	port    int
	dir     string
	ownDir  bool
	stopped bool
}

// Start starts a one-node broker on 127.0.0.1.
func Start(ctx context.Context, o Options) (*Broker, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Partitions <= 0 {
		o.Partitions = 1
	}
	if o.GroupMinSessionTimeout <= 0 {
		o.GroupMinSessionTimeout = 100 * time.Millisecond
	}
	b := &Broker{opts: o, port: o.Port, dir: o.DataDir}
	if !o.Ephemeral && b.dir == "" {
		d, err := os.MkdirTemp("", "monolith-kafka-")
		if err != nil {
			return nil, fmt.Errorf("embedded kafka: %w", err)
		}
		b.dir, b.ownDir = d, true
	}
	if err := b.start(); err != nil {
		if b.ownDir {
			os.RemoveAll(b.dir)
		}
		return nil, err
	}
	return b, nil
}

func (b *Broker) start() error {
	opts := []kfake.Opt{
		kfake.Ports(b.port),
		kfake.ClusterID("monolith-embedded"),
		kfake.DefaultNumPartitions(int(b.opts.Partitions)),
		kfake.GroupMinSessionTimeout(b.opts.GroupMinSessionTimeout),
	}
	if len(b.opts.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(b.opts.Partitions, b.opts.Topics...))
	}
	if b.dir != "" {
		opts = append(opts, kfake.DataDir(b.dir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("embedded kafka: start on 127.0.0.1:%d: %w", b.port, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return fmt.Errorf("embedded kafka: %d listeners, want 1", len(addrs))
	}
	b.c, b.addr = c, addrs[0]
	if b.port == 0 {
		var port int
		if _, err := fmt.Sscanf(addrs[0], "127.0.0.1:%d", &port); err != nil {
			c.Close()
			return fmt.Errorf("embedded kafka: listen address %q: %w", addrs[0], err)
		}
		b.port = port
	}
	return nil
}

// Addr is the broker's host:port, for the client's seed brokers (--kafka_servers).
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// Cluster is the running kfake cluster (for fault injection in tests); nil once stopped.
func (b *Broker) Cluster() *kfake.Cluster {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	return b.c
}

// Restart stops the broker and starts it again on the same port with the data it had (log,
// topics, committed offsets). Clients see connection errors in between and reconnect.
func (b *Broker) Restart(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errors.New("embedded kafka: restart after Stop")
	}
	if b.opts.Ephemeral {
		return errors.New("embedded kafka: an ephemeral broker cannot restart with its data")
	}
	b.c.Close()
	// The port was just released; binding it again can fail briefly. Retry, bounded by ctx and
	// by a few seconds.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := b.start()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			b.stopped = true
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the broker down and removes its temporary data directory (a given DataDir is
// kept). It is safe to call more than once.
func (b *Broker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	b.c.Close()
	if b.ownDir {
		os.RemoveAll(b.dir)
	}
}
