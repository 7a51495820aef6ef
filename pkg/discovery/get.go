package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/monolith-go/monolith/pkg/discovery/consul"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/trainenv"
	"github.com/monolith-go/monolith/pkg/trainenv/mlpenv"
)

// Options are the RunnerConfig fields get_discovery reads, and what a Go caller supplies besides.
type Options struct {
	// Type is the discovery type (the RunnerConfig's discovery_type; its default is Consul).
	Type Type
	// IsLocal: a local run, which has no discovery.
	IsLocal bool
	// TFConfig is TF_CONFIG's JSON text (Primus).
	TFConfig string
	// JobName is the ZooKeeper job directory (the RunnerConfig's deep_insight_name).
	JobName string
	// ZKServer is kazoo's hosts string of the ZooKeeper ensemble.
	ZKServer string
	// PSM names the job's Consul service; when empty it is generated from UUID.
	PSM string
	// UUID is the job's uuid.
	UUID string
	// Env is the environment (MLP_*, CONSUL_HTTP_*, ZK_AUTH ...); nil reads the process's.
	Env trainenv.Env
	// ConsulSocket overrides consul.DefaultSocket.
	ConsulSocket string
	// Resolver resolves the host name when the environment gives no host address (MLP).
	Resolver trainenv.Resolver
	// Logger (slog.Default() when nil).
	Logger *slog.Logger
}

// Task is where TF_CONFIG puts this process: the reference wrote it into the RunnerConfig's
// server_type and index.
type Task struct {
	ServerType string
	Index      int
}

// Get is runner_utils.get_discovery: nil for a local run; else the discovery of o.Type. For Primus
// it also returns the task TF_CONFIG describes (nil otherwise). A Primus run without TF_CONFIG is
// an error of kind Precondition (the reference asserted).
func Get(ctx context.Context, o Options) (ServiceDiscovery, *Task, error) {
	if o.IsLocal {
		return nil, nil, nil
	}
	env := o.Env
	if env == nil {
		env = trainenv.FromOS()
	}
	switch o.Type {
	case Primus:
		if o.TFConfig == "" {
			return nil, nil, errkind.New(errkind.Precondition, "primus discovery needs tf_config")
		}
		d, err := NewTFConfig(o.TFConfig)
		if err != nil {
			return nil, nil, err
		}
		typ, err := d.ServerType()
		if err != nil {
			return nil, nil, fmt.Errorf("primus discovery: %w", err)
		}
		idx, err := d.Index()
		if err != nil {
			return nil, nil, fmt.Errorf("primus discovery: %w", err)
		}
		return d, &Task{ServerType: typ, Index: idx}, nil
	case Consul:
		psm := o.PSM
		if psm == "" {
			psm = trainenv.GeneratePSMFromUUID(o.UUID)
		}
		cfg, err := consul.ConfigFromEnv(env, o.ConsulSocket)
		if err != nil {
			return nil, nil, err
		}
		cfg.Logger = o.Logger
		client := consul.New(cfg)
		d, err := NewConsul(ConsulOptions{ConsulID: psm, Client: client, Logger: o.Logger})
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return d, nil, nil
	case MLP:
		resolve := o.Resolver
		if resolve == nil {
			resolve = defaultResolver
		}
		e, err := mlpenv.New(ctx, env, resolve)
		if err != nil {
			return nil, nil, err
		}
		return NewMLP(e), nil, nil
	case ZK:
		d, err := NewZK(ctx, ZKOptions{JobName: o.JobName, Servers: o.ZKServer, Env: env, Logger: o.Logger})
		if err != nil {
			return nil, nil, err
		}
		return d, nil, nil
	}
	return nil, nil, errkind.New(errkind.Value, "unknown discovery type %v", o.Type)
}

// WithDiscovery is runner_utils.monolith_discovery: it runs fn with the discovery Get returns (nil
// and no task for a local run; the psm generated from the uuid when not given) and closes the
// discovery when fn returns or panics. fn's error is returned, joined with a failed Close's.
func WithDiscovery(ctx context.Context, o Options, fn func(ctx context.Context, d ServiceDiscovery, t *Task) error) (err error) {
	d, task, err := Get(ctx, o)
	if err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	defer func() {
		if d != nil {
			if cerr := d.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("close discovery: %w", cerr))
			}
		}
		log.Info("exit monolith_discovery")
	}()
	log.Info("enter monolith_discovery", "type", o.Type.String(), "local", o.IsLocal)
	return fn(ctx, d, task)
}

// defaultResolver resolves with the system's resolver.
func defaultResolver(ctx context.Context, host string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, host)
}
