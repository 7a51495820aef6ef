package traininput

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	cputrainingspec "github.com/monolith-go/monolith/gen/spec/native_training/cpu_training"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/kafkastream"
)

// FromStream is the input of a run on a Kafka stream (--kafka_topics): the stream, decoded
// through the feature schema, and its evaluation input (--eval_data's files, else the stream's
// held-out slice). Without --kafka_servers it starts an in-process broker on 127.0.0.1 (stop
// stops it).
func FromStream(ctx context.Context, f cputrainingspec.TrainFlags, rc *runconfig.RunnerConfig, c dataset.Compression, stdout io.Writer, log *slog.Logger,
	stopTraining <-chan struct{}) (_ Input, stop func(), err error) {
	stop = func() {}
	defer func() {
		// A run that does not start stops the broker it started.
		if err != nil {
			stop()
			stop = func() {}
		}
	}()
	if f.Schema == "" && strings.TrimSpace(f.DenseFeatures) == "" && strings.TrimSpace(f.SparseFeatures) == "" {
		return Input{}, stop, cli.Usage(errors.New("--kafka_topics: give the stream's features (--schema, or --dense_features/--sparse_features)"))
	}
	fs, loose, err := FeaturesOf(f)
	if err != nil {
		return Input{}, stop, cli.Usage(err)
	}
	inputs, err := recordInputs(f, fs, loose)
	if err != nil {
		return Input{}, stop, err
	}
	cfg := kafka.DefaultConfig()
	cfg.Topics = rc.KafkaTopics
	group := kafka.DefaultGroupID
	if rc.KafkaGroupID != nil && *rc.KafkaGroupID != "" {
		group = *rc.KafkaGroupID
	}
	cfg.GroupID = &group
	cfg.StreamTimeout = f.KafkaStreamTimeout
	cfg.HasHeader = f.KafkaHasHeader
	cfg.Configuration = splitComma(f.KafkaConfiguration)
	cfg.FilterEmpty = f.KafkaFilterEmpty
	// The framing headers' flags, as the reference takes them from the runner config.
	cfg.KafkaDump, cfg.KafkaDumpPrefix = rc.KafkaDump, rc.KafkaDumpPrefix
	servers := ""
	if rc.KafkaServers != nil {
		servers = *rc.KafkaServers
	}
	if servers == "" {
		b, err := embedded.Start(ctx, embedded.Options{Topics: cfg.Topics})
		if err != nil {
			return Input{}, stop, fmt.Errorf("the embedded Kafka broker: %w", err)
		}
		stop = b.Stop
		servers = b.Addr()
		fmt.Fprintf(stdout, "  kafka        in-process broker on %s, topics %s (produce with cmd/kafka_producer --servers=%s)\n", servers, strings.Join(cfg.Topics, ","), servers)
	}
	cfg.Servers = &servers
	topics := strings.Join(cfg.Topics, ",")
	s, err := job.NewStream(job.Stream{Name: "--kafka_topics " + topics, Inputs: inputs, BatchSize: f.BatchSize, Linger: f.StreamLinger,
		MaxBadRecords: f.MaxBadRecords, Stop: stopTraining,
		OpenRecords:  kafkastream.Opener(kafka.Config(cfg), log),
		HoldoutEvery: holdoutEvery(f), HoldoutSize: holdoutSize(f)})
	if err != nil {
		return Input{}, stop, cli.Usage(err)
	}
	schema, err := fs.BatchSchema()
	if err != nil {
		return Input{}, stop, cli.Usage(err)
	}
	in := Input{Train: s, Eval: s.Holdout(), Features: fs, Schema: schema}
	if f.EvalData != "" {
		paths, err := dataset.ExpandPatterns(f.EvalData)
		if err != nil {
			return Input{}, stop, cli.Usage(fmt.Errorf("--eval_data %q: %w", f.EvalData, err))
		}
		ev := job.Files{Name: "--eval_data", Paths: paths, Epochs: 1, BatchSize: f.BatchSize, Inputs: &inputs, Options: dataset.Options{Compression: c}}
		in.Eval, in.Files = ev, []job.Files{ev}
	}
	fmt.Fprintf(stdout, "Monolith train: %s on the Kafka stream %s (group %s), until %s.\n", modelWords(f.Model), topics, group, streamEnd(f))
	fmt.Fprintf(stdout, "  eval data    %s\n", in.Eval.Describe())
	fmt.Fprintf(stdout, "  features     label <- %s (%s); %s\n", fs.Label.SourceName(), fs.Label.Rule(), inputs.Describe())
	return in, stop, nil
}

// holdoutEvery and holdoutSize are the stream's held-out slice: none with --eval_data.
func holdoutEvery(f cputrainingspec.TrainFlags) int {
	if f.EvalData != "" {
		return 0
	}
	return f.HoldoutEvery
}

func holdoutSize(f cputrainingspec.TrainFlags) int {
	if holdoutEvery(f) == 0 {
		return 0
	}
	return f.HoldoutSize
}

// streamEnd words what ends a stream run.
func streamEnd(f cputrainingspec.TrainFlags) string {
	if f.KafkaStreamTimeout >= 0 {
		// The reference's rule: the stream ends after max(stream_timeout, message_poll_timeout).
		ms := max(f.KafkaStreamTimeout, kafka.DefaultConfig().MessagePollTimeout)
		return fmt.Sprintf("%d ms pass without a message, or a signal", ms)
	}
	return "a signal (SIGTERM, SIGINT)"
}

func splitComma(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
