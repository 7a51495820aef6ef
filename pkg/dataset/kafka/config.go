package kafka

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	datasetsspec "github.com/monolith-go/monolith/gen/spec/native_training/data/datasets"
)

// Config is KafkaDataset's parameters (specs/native_training/data/datasets.yaml, KafkaConfig).
type Config datasetsspec.KafkaConfig

// DefaultConfig returns the reference's defaults (has_header true, stream_timeout -1,
// message_poll_timeout 10000 ms).
func DefaultConfig() Config { return Config(datasetsspec.DefaultKafkaConfig()) }

// Reference defaults for the parameters the reference leaves None.
const (
	DefaultServers   = "localhost:9092"
	DefaultGroupID   = "test-consumer-group"
	DefaultPollBatch = 128
	// EventTimeHeader is the message header holding the event's time, decimal Unix milliseconds
	// (cmd/kafka_producer sets it).
	EventTimeHeader = "monolith-event-time"
)

// settings is what Open derives from a Config.
type settings struct {
	seeds       []string
	group       string
	topics      []string
	pollBatch   int
	pollTimeout time.Duration
	// streamTimeout < 0: never.
	streamTimeout time.Duration
	opts          []kgo.Opt
}

// Configuration keys (librdkafka's names, as the reference passes them) and what they become.
// Keys may carry the reference's "conf.topic." prefix for topic settings. Any other key is an
// error naming it.
//
//	bootstrap.servers                       kgo.SeedBrokers (overrides servers)
//	group.id                                kgo.ConsumerGroup (overrides group_id)
//	client.id                               kgo.ClientID
//	group.instance.id                       kgo.InstanceID (static membership)
//	batch.num.messages                      records per poll (overrides poll_batch_size)
//	session.timeout.ms                      kgo.SessionTimeout
//	heartbeat.interval.ms                   kgo.HeartbeatInterval
//	max.poll.interval.ms, rebalance.timeout.ms  kgo.RebalanceTimeout
//	auto.offset.reset                       kgo.ConsumeResetOffset: earliest/smallest/beginning
//	                                        (the default here) or latest/largest/end
//	partition.assignment.strategy           kgo.Balancers: cooperative-sticky (default), sticky,
//	                                        range, roundrobin (comma-separated, in preference order)
//	isolation.level                         kgo.FetchIsolationLevel: read_uncommitted, read_committed
//	fetch.wait.max.ms                       kgo.FetchMaxWait
//	fetch.min.bytes                         kgo.FetchMinBytes
//	fetch.max.bytes                         kgo.FetchMaxBytes
//	max.partition.fetch.bytes, fetch.message.max.bytes  kgo.FetchMaxPartitionBytes
//	socket.connection.setup.timeout.ms      kgo.DialTimeout
//	request.timeout.ms, socket.timeout.ms   kgo.RequestTimeoutOverhead
//	retry.backoff.ms                        kgo.RetryBackoffFn (constant)
//	metadata.max.age.ms, topic.metadata.refresh.interval.ms  kgo.MetadataMaxAge
//	enable.auto.commit                      only false: offsets are committed by Reader.Commit
//	enable.partition.eof                    accepted and ignored (the kernel always sets it)
var configKeys = []string{
	"bootstrap.servers", "group.id", "client.id", "group.instance.id", "batch.num.messages",
	"session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "rebalance.timeout.ms",
	"auto.offset.reset", "partition.assignment.strategy", "isolation.level", "fetch.wait.max.ms",
	"fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.message.max.bytes",
	"socket.connection.setup.timeout.ms", "request.timeout.ms", "socket.timeout.ms",
	"retry.backoff.ms", "metadata.max.age.ms", "topic.metadata.refresh.interval.ms",
	"enable.auto.commit", "enable.partition.eof",
}

// ConfigurationKeys lists the configuration keys Open understands (see the table above).
func ConfigurationKeys() []string { return append([]string(nil), configKeys...) }

func (c Config) settings() (*settings, error) {
	sc := datasetsspec.KafkaConfig(c)
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	var topics []string
	for _, t := range c.Topics {
		if t = strings.TrimSpace(t); t != "" {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("kafka: topics: none given")
	}
	s := &settings{
		topics:      topics,
		group:       DefaultGroupID,
		pollBatch:   DefaultPollBatch,
		pollTimeout: time.Duration(c.MessagePollTimeout) * time.Millisecond,
	}
	servers := DefaultServers
	if c.Servers != nil {
		servers = *c.Servers
	}
	if c.GroupID != nil {
		s.group = *c.GroupID
	}
	if c.PollBatchSize != nil {
		s.pollBatch = *c.PollBatchSize
	}
	switch {
	case c.StreamTimeout < 0:
		s.streamTimeout = -1
	default:
		s.streamTimeout = time.Duration(max(c.StreamTimeout, c.MessagePollTimeout)) * time.Millisecond
	}
	items := append([]string(nil), c.Configuration...)
	if c.KafkaOtherMetadata != nil && *c.KafkaOtherMetadata != "" {
		items = append(items, strings.Split(*c.KafkaOtherMetadata, ",")...)
	}
	reset := kgo.NewOffset().AtStart()
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("kafka: configuration %q: want key=value", item)
		}
		k = strings.TrimPrefix(strings.TrimSpace(k), "conf.topic.")
		v = strings.TrimSpace(v)
		bad := func(err error) error {
			return fmt.Errorf("kafka: configuration %s=%s: %w", k, v, err)
		}
		ms := func() (time.Duration, error) {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, bad(fmt.Errorf("want a non-negative number of milliseconds"))
			}
			return time.Duration(n) * time.Millisecond, nil
		}
		bytes := func() (int32, error) {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n <= 0 {
				return 0, bad(fmt.Errorf("want a positive number of bytes"))
			}
			return int32(n), nil
		}
		var err error
		var d time.Duration
		var n int32
		switch k {
		case "bootstrap.servers":
			servers = v
		case "group.id":
			s.group = v
		case "client.id":
			s.opts = append(s.opts, kgo.ClientID(v))
		case "group.instance.id":
			s.opts = append(s.opts, kgo.InstanceID(v))
		case "batch.num.messages":
			b, perr := strconv.Atoi(v)
			if perr != nil || b <= 0 {
				return nil, bad(fmt.Errorf("want a positive count"))
			}
			s.pollBatch = b
		case "session.timeout.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.SessionTimeout(d))
			}
		case "heartbeat.interval.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.HeartbeatInterval(d))
			}
		case "max.poll.interval.ms", "rebalance.timeout.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.RebalanceTimeout(d))
			}
		case "auto.offset.reset":
			switch strings.ToLower(v) {
			case "earliest", "smallest", "beginning":
				reset = kgo.NewOffset().AtStart()
			case "latest", "largest", "end":
				reset = kgo.NewOffset().AtEnd()
			default:
				err = bad(fmt.Errorf("want earliest or latest"))
			}
		case "partition.assignment.strategy":
			var bs []kgo.GroupBalancer
			for _, name := range strings.Split(v, ",") {
				switch strings.ToLower(strings.TrimSpace(name)) {
				case "cooperative-sticky":
					bs = append(bs, kgo.CooperativeStickyBalancer())
				case "sticky":
					bs = append(bs, kgo.StickyBalancer())
				case "range":
					bs = append(bs, kgo.RangeBalancer())
				case "roundrobin":
					bs = append(bs, kgo.RoundRobinBalancer())
				default:
					return nil, bad(fmt.Errorf("unknown strategy %q (cooperative-sticky, sticky, range, roundrobin)", name))
				}
			}
			s.opts = append(s.opts, kgo.Balancers(bs...))
		case "isolation.level":
			switch v {
			case "read_uncommitted":
				s.opts = append(s.opts, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
			case "read_committed":
				s.opts = append(s.opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			default:
				err = bad(fmt.Errorf("want read_uncommitted or read_committed"))
			}
		case "fetch.wait.max.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.FetchMaxWait(d))
			}
		case "fetch.min.bytes":
			if n, err = bytes(); err == nil {
				s.opts = append(s.opts, kgo.FetchMinBytes(n))
			}
		case "fetch.max.bytes":
			if n, err = bytes(); err == nil {
				s.opts = append(s.opts, kgo.FetchMaxBytes(n))
			}
		case "max.partition.fetch.bytes", "fetch.message.max.bytes":
			if n, err = bytes(); err == nil {
				s.opts = append(s.opts, kgo.FetchMaxPartitionBytes(n))
			}
		case "socket.connection.setup.timeout.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.DialTimeout(d))
			}
		case "request.timeout.ms", "socket.timeout.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.RequestTimeoutOverhead(d))
			}
		case "retry.backoff.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.RetryBackoffFn(func(int) time.Duration { return d }))
			}
		case "metadata.max.age.ms", "topic.metadata.refresh.interval.ms":
			if d, err = ms(); err == nil {
				s.opts = append(s.opts, kgo.MetadataMaxAge(d))
			}
		case "enable.auto.commit":
			if b, perr := strconv.ParseBool(v); perr != nil || b {
				err = bad(fmt.Errorf("only false: offsets are the caller's, committed by Reader.Commit"))
			}
		case "enable.partition.eof":
			if _, perr := strconv.ParseBool(v); perr != nil {
				err = bad(fmt.Errorf("want true or false"))
			}
		default:
			return nil, fmt.Errorf("kafka: configuration key %q is not supported (supported: %s)", k, strings.Join(configKeys, ", "))
		}
		if err != nil {
			return nil, err
		}
	}
	for _, h := range strings.Split(servers, ",") {
		if h = strings.TrimSpace(h); h != "" {
			s.seeds = append(s.seeds, h)
		}
	}
	if len(s.seeds) == 0 {
		return nil, fmt.Errorf("kafka: servers: none given")
	}
	if s.group == "" {
		return nil, fmt.Errorf("kafka: group_id: empty")
	}
	s.opts = append(s.opts, kgo.ConsumeResetOffset(reset))
	return s, nil
}
