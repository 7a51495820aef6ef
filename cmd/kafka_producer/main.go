// Command kafka_producer writes a stream of events to a Kafka topic, for the trainer's Kafka
// source (cmd/train --kafka_servers) and the online demo: the records of TFRecord files sent as
// they are, or CSV/TSV rows each converted into an Example through the feature schema (by
// pkg/csvconvert, as cmd/convert converts them), at a given rate.
//
//	kafka_producer --servers=127.0.0.1:9092 --topic=events --input='data/part-*' --rate=5000 --loop --duration=10m
//	kafka_producer --servers=127.0.0.1:9092 --topic=events --format=csv --schema=schema.yaml \
//	    --example=monolith --input=ratings.csv
//
// Every message carries the header monolith-event-time: the time it was produced (handed to the
// client), as decimal Unix milliseconds; the message's Kafka timestamp is the same time. Its value
// is the record (a serialized Example, of the kind the files hold or --example names); with
// --partitions=round_robin (the default) it has no key and the messages go to the topic's
// partitions in turn; with --partitions=key its key is the record's FNV-1a 64-bit hash (16 hex
// digits) and Kafka's own partitioner (murmur2 of the key) places it, so that a record goes to the
// same partition every time --loop replays it.
//
// --rate paces the messages (0: as fast as the brokers take them); a producer held up sends at
// most a second's worth at once to catch up. --duration stops after that long, --loop replays the
// input from its first file until then (or until SIGINT or SIGTERM). Whatever stops it, the
// messages already handed to the client are flushed (within --timeout) before the summary.
//
// A progress line is logged on stderr every --progress_interval (events acknowledged, the events/s
// of the last interval, their bytes, the messages that failed); the summary goes to stdout:
//
//	topic         events (3 partitions) on 127.0.0.1:9092
//	events        1000 acknowledged (998.7 events/s over 1.00s), 1 pass over 2 files
//	bytes         61234 (message values)
//	errors        0
//
// Exit status: 0 when every message handed to the client was acknowledged; 2 for a bad command
// line or bad input (no files match --input, a missing, corrupt or unreadable file, a bad schema
// or row, a topic the brokers lack); 1 for a failure at run time (brokers that do not answer, a
// message not acknowledged within --timeout), after the summary.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	kafkaproducerspec "github.com/monolith-go/monolith/gen/spec/go/kafka_producer"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

const name = "kafka_producer"

const description = "Write the records of TFRecord files, or CSV/TSV rows converted through a feature schema, to a Kafka topic at a given rate, each stamped with its event time (header monolith-event-time)."

type cmdFlags struct {
	cli.Common
	kafkaproducerspec.ProducerFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runClock(ctx, args, stdout, stderr, realClock{})
}

// runClock is run with the clock that paces the messages and times --duration.
func runClock(ctx context.Context, args []string, stdout, stderr io.Writer, clk clock) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		return cli.OneLine(produce(ctx, c.ProducerFlags, stdout, log, clk))
	})
}

// parseServers is --servers: a comma list of host:port.
func parseServers(s string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		host, port, err := net.SplitHostPort(item)
		if err != nil {
			return nil, fmt.Errorf("--servers: %q is not host:port", item)
		}
		if n, err := strconv.ParseUint(port, 10, 16); host == "" || err != nil || n == 0 {
			return nil, fmt.Errorf("--servers: %q is not host:port", item)
		}
		out = append(out, item)
	}
	if len(out) == 0 {
		return nil, errors.New("--servers is required: the Kafka brokers, a comma list of host:port")
	}
	return out, nil
}

// checkFlags checks the values no single flag's type checks.
func checkFlags(f kafkaproducerspec.ProducerFlags) error {
	tabular := f.Format == "csv" || f.Format == "tsv"
	switch {
	case strings.TrimSpace(f.Topic) == "":
		return errors.New("--topic is required: the topic to write to")
	case f.Input == "":
		return errors.New("--input is required: the input files (file patterns)")
	case tabular && f.Schema == "":
		return fmt.Errorf("--schema is required with --format=%s: the feature schema (YAML) describing the columns", f.Format)
	case !tabular && f.Schema != "":
		return errors.New("--schema is for --format=csv or tsv; TFRecord records are sent as they are")
	case tabular && f.Compression != "":
		return fmt.Errorf("--compression is for --format=tfrecord; %s files ending .gz or starting as gzip are decompressed without it", f.Format)
	case f.Rate < 0 || f.Rate != f.Rate:
		return fmt.Errorf("--rate %v: want events per second, 0 or more", f.Rate)
	case f.Duration < 0:
		return fmt.Errorf("--duration %v is negative", f.Duration)
	case f.Timeout < time.Second:
		return fmt.Errorf("--timeout %v: want at least 1s (the client's least delivery timeout)", f.Timeout)
	case f.ProgressInterval < 0:
		return fmt.Errorf("--progress_interval %v is negative", f.ProgressInterval)
	}
	return nil
}

func produce(ctx context.Context, f kafkaproducerspec.ProducerFlags, stdout io.Writer, log *slog.Logger, clk clock) error {
	if err := checkFlags(f); err != nil {
		return cli.Usage(err)
	}
	servers, err := parseServers(f.Servers)
	if err != nil {
		return cli.Usage(err)
	}
	files, err := dataset.ExpandPatterns(f.Input)
	if err != nil {
		return cli.Usage(fmt.Errorf("--input %q: %w", f.Input, err))
	}
	var src source
	switch f.Format {
	case "csv", "tsv":
		comma := ','
		if f.Format == "tsv" {
			comma = '\t'
		}
		if src, err = newCSVSource(files, f.Schema, comma, batch.Format(f.Example)); err != nil {
			return err
		}
	default:
		compression, err := dataset.ParseCompression(f.Compression)
		if err != nil {
			return cli.Usage(fmt.Errorf("--compression: %w", err))
		}
		src = tfrecordSource{files: files, opts: dataset.Options{Compression: compression}}
	}

	cl, err := newClient(servers, f.Topic, f.Partitions == "key", f.Timeout)
	if err != nil {
		return cli.Usage(fmt.Errorf("--servers: %w", err))
	}
	closed := false
	defer func() {
		if !closed {
			cl.Close()
		}
	}()
	partitions, err := topicPartitions(ctx, cl, servers, f.Topic, f.Timeout)
	if err != nil {
		return err
	}

	// The messages are produced under a context that a signal or --duration does not end, so
	// that those handed to the client are delivered by the final flush; done ends it after.
	prodCtx, done := context.WithCancel(context.WithoutCancel(ctx))
	defer done()
	p := &producer{cl: cl, keyed: f.Partitions == "key", pace: newPacer(f.Rate, clk), now: clk.Now, ctx: prodCtx, log: log}
	if f.Duration > 0 {
		p.end = clk.Now().Add(f.Duration)
	}
	log.Info("producing", "topic", f.Topic, "partitions", partitions, "servers", servers, "input", f.Format,
		"files", len(files), "rate", f.Rate, "duration", f.Duration, "loop", f.Loop, "partitioner", f.Partitions)
	start := time.Now()
	stopProgress := progress(p, f.ProgressInterval, log)
	passes, runErr := p.run(ctx, src, f.Loop)

	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), f.Timeout)
	flushErr := cl.Flush(flushCtx)
	cancelFlush()
	cl.Close() // fails what the flush left, calling every message's promise
	closed = true
	stopProgress()
	elapsed := time.Since(start)

	c := p.counts()
	if err := summary(stdout, f, servers, partitions, len(files), passes, c, elapsed); err != nil {
		return err
	}
	switch {
	case runErr != nil:
		return runErr
	case c.Errors > 0:
		return fmt.Errorf("%d of %d messages not delivered; the first: %w", c.Errors, c.Sent, p.firstErr)
	case flushErr != nil:
		return fmt.Errorf("flush: %w", flushErr)
	}
	return nil
}

// progress logs a progress line every interval (none when 0) until the returned stop is called:
// the events acknowledged, the events/s of the last interval, their bytes, the errors.
func progress(p *producer, interval time.Duration, log *slog.Logger) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		last, lastAt := int64(0), time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				c := p.counts()
				log.Info("progress", "events", c.Acked, "events_per_s", round1(perSecond(c.Acked-last, now.Sub(lastAt))),
					"bytes", c.Bytes, "errors", c.Errors, "in_flight", c.Sent-c.Acked-c.Errors)
				last, lastAt = c.Acked, now
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// summary prints what was produced, one fact a line.
func summary(w io.Writer, f kafkaproducerspec.ProducerFlags, servers []string, partitions, files, passes int, c counts, elapsed time.Duration) error {
	plural := func(n int, word string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, word)
		}
		if strings.HasSuffix(word, "s") {
			return fmt.Sprintf("%d %ses", n, word)
		}
		return fmt.Sprintf("%d %ss", n, word)
	}
	lines := []string{
		fmt.Sprintf("topic         %s (%s) on %s", f.Topic, plural(partitions, "partition"), strings.Join(servers, ",")),
		fmt.Sprintf("events        %d acknowledged (%.1f events/s over %.3fs), %s over %s", c.Acked, perSecond(c.Acked, elapsed), elapsed.Seconds(), plural(passes, "pass"), plural(files, "file")),
		fmt.Sprintf("bytes         %d (message values)", c.Bytes),
		fmt.Sprintf("errors        %d", c.Errors),
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
