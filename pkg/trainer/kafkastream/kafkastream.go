// Package kafkastream is a Kafka consumer (pkg/dataset/kafka) as the records of a training job's
// stream (pkg/trainer/job's Records): positions are the consumer's offsets as JSON, which the
// job's checkpoints record and a restored run opens at; the consumer's lag and its group commit
// are the stream's lag metrics and the checkpoints' commit.
package kafkastream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/trainer/job"
)

// Opener is job.Stream's OpenRecords over cfg's topics: a position (a checkpoint's offsets; nil:
// the group's committed ones) opens a consumer there.
func Opener(cfg kafka.Config, log *slog.Logger) func(ctx context.Context, position []byte) (job.Records, error) {
	return func(ctx context.Context, position []byte) (job.Records, error) {
		var start kafka.Offsets
		if position != nil {
			if err := json.Unmarshal(position, &start); err != nil {
				return nil, fmt.Errorf("the checkpoint's offsets %s: %w", position, err)
			}
		}
		r, err := kafka.Open(ctx, cfg, start, log)
		if err != nil {
			return nil, err
		}
		return Records{r}, nil
	}
}

// Records are a Kafka reader's records as the job's stream reads them.
type Records struct{ R *kafka.Reader }

var (
	_ job.Records   = Records{}
	_ job.Lagger    = Records{}
	_ job.Committer = Records{}
)

// Next is the next record; a malformed message is a record with Err set (a bad record).
func (k Records) Next(ctx context.Context) (job.Record, error) {
	rec, err := k.R.Next(ctx)
	var re *kafka.RecordError
	if errors.As(err, &re) {
		return job.Record{Where: re.Error(), Err: re}, nil
	}
	if err != nil {
		return job.Record{}, err
	}
	return job.Record{Data: rec.Data, Where: fmt.Sprintf("topic %s partition %d offset %d", rec.Topic, rec.Partition, rec.Offset), EventTime: rec.EventTime}, nil
}

// Position is the reader's offsets as JSON.
func (k Records) Position() ([]byte, error) { return json.Marshal(k.R.Position()) }

// Close closes the reader.
func (k Records) Close() error { return k.R.Close() }

// Lag is the consumer's lag in records.
func (k Records) Lag() int64 { return k.R.Lag() }

// Commit commits a checkpoint's offsets to the consumer group.
func (k Records) Commit(ctx context.Context, position []byte) error {
	var offs kafka.Offsets
	if err := json.Unmarshal(position, &offs); err != nil {
		return fmt.Errorf("offsets %s: %w", position, err)
	}
	return k.R.Commit(ctx, offs)
}
