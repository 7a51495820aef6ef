// Package inprocess trains cmd/train's dnn model within one process: parameter servers of this
// process (pkg/ps over loopback gRPC, as cmd/train's cluster runs them), a router over them and
// the model, over synthetic click logs. The agent's demo trains its model so, and so do the tests
// that need a trained model without a cluster.
package inprocess

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	optimizerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/optimizer"
	"github.com/monolith-go/monolith/pkg/embedding/initializer"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/trainer/dnn"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// Config is a job's shape.
type Config struct {
	// Data generates the click logs: the model has a feature, and the servers a table, per slot.
	Data synth.Config
	// Dim is every table's embedding dimension.
	Dim int
	// NumPS is how many parameter servers hold the tables.
	NumPS int
	// Hidden are the model's hidden layers.
	Hidden []int
	// Now stamps the tables' updates (nil: the clock).
	Now func() time.Time
	// Logger gets the parameter servers' logs (nil: none).
	Logger *slog.Logger
}

// Job is a model training on parameter servers of this process.
type Job struct {
	Gen   *synth.Generator
	Model *dnn.Model
	// Router routes the tables' lookups and updates to the servers.
	Router *ps.Router
	// Servers are the parameter servers, by index.
	Servers []*ps.Running
}

// embeddingLearningRate is the tables' learning rate (cmd/train's --embedding_learning_rate
// default).
const embeddingLearningRate = 0.3

// TableConfig is cmd/train's table (which cmd/train builds here too): dim floats, the reference's
// Adagrad (initial accumulator 0.1) at learningRate, new entries random uniform.
func TableConfig(name string, dim int, learningRate float32) *pspb.TableConfig {
	return ps.NewTableConfig(name, dim,
		&optimizerpb.OptimizerConfig{Type: &optimizerpb.OptimizerConfig_Adagrad{Adagrad: &optimizerpb.AdagradOptimizerConfig{
			LearningRate: proto.Float32(learningRate), InitialAccumulatorValue: proto.Float32(0.1)}}},
		&initializerpb.InitializerConfig{Type: &initializerpb.InitializerConfig_RandomUniform{RandomUniform: &initializerpb.RandomUniformInitializerConfig{}}})
}

// TickingClock is a clock for Config.Now that moves one second per reading, from start; it is
// safe for concurrent use (the model updates its tables at once).
func TickingClock(start time.Time) func() time.Time {
	var ticks atomic.Int64
	return func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Second) }
}

// Start starts cfg.NumPS parameter servers on loopback and the model over them; Close stops them.
// On an error it stops what it started.
func Start(cfg Config) (_ *Job, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, err := synth.New(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("click logs: %w", err)
	}
	var features []dnn.Feature
	var tables []*pspb.TableConfig
	for s := 1; s <= cfg.Data.NumSlots; s++ {
		name := synth.SlotFeature(s)
		features = append(features, dnn.Feature{Name: name, Slot: s, Dim: cfg.Dim})
		tables = append(tables, TableConfig(name, cfg.Dim, embeddingLearningRate))
	}
	j := &Job{Gen: g}
	defer func() {
		if err != nil {
			j.Close()
		}
	}()
	addrs := make([]string, 0, cfg.NumPS)
	for i := range cfg.NumPS {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		r, err := ps.Start(lis, ps.Config{Index: i, NumPS: cfg.NumPS, Tables: tables, Workers: 1, Logger: log,
			InitGenerator: initializer.PerTable})
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("parameter server %d: %w", i, err)
		}
		j.Servers = append(j.Servers, r)
		addrs = append(addrs, r.Addr())
	}
	if j.Router, err = ps.NewRouter(ps.RouterConfig{Addrs: addrs, CallTimeout: 10 * time.Second}); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	dcfg := dnn.Config{Features: features, DenseDim: g.Schema().DenseDim(), Hidden: cfg.Hidden, LearningRate: 0.01,
		EmbeddingLearningRates: []float32{embeddingLearningRate}, Seed: 1}
	if j.Model, err = dnn.New(dcfg, ps.RouterStore{Router: j.Router, Now: cfg.Now}); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return j, nil
}

// Close closes the router, then stops the servers (each within 5 s).
func (j *Job) Close() {
	if j.Router != nil {
		j.Router.Close()
	}
	for _, s := range j.Servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.Stop(ctx)
		cancel()
	}
}
