package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	tfexamplepb "github.com/monolith-go/monolith/gen/pb/tensorflow/core/example"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/dataset/kafka"
	"github.com/monolith-go/monolith/pkg/dataset/kafka/embedded"
	"github.com/monolith-go/monolith/pkg/runner/checkpoint"
)

// produce writes ratings [from, from+n) of seed's stream to topic as tf.train.Examples.
func produce(t *testing.T, addr, topic string, n int, seed int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, r := range ratings(n, seed) {
		data, err := proto.Marshal(&tfexamplepb.Example{Features: &tfexamplepb.Features{Feature: r.tfRecord()}})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: data})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

var streamStop = regexp.MustCompile(`(?m)^stopped step=(\d+) examples=(\d+) by the end of the input: the training input ran out$`)

// TestTrainOnStream: cmd/train trains on a Kafka topic (a broker on 127.0.0.1, the real client
// over TCP) until the stream is quiet for --kafka_stream_timeout, evaluating on the stream's
// held-out slice; a second run with the same model dir reads on from the offsets its checkpoint
// recorded: it trains on the records produced since, and on none of the first run's.
func TestTrainOnStream(t *testing.T) {
	leakcheck.Check(t)
	ctx := context.Background()
	b, err := embedded.Start(ctx, embedded.Options{Topics: []string{"ratings"}, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	dir := t.TempDir()
	schema := writeFile(t, filepath.Join(dir, "schema.yaml"), ratingsSchema)
	args := []string{"--schema=" + schema, "--input_format=tf_example", "--kafka_servers=" + b.Addr(), "--kafka_topics=ratings",
		"--kafka_stream_timeout=1500", "--batch_size=100", "--embedding_dim=4", "--hidden=8", "--holdout_every=10",
		"--stream_linger=50ms", "--model_dir=" + filepath.Join(dir, "m")}
	// 2005 records: the last one is trained (not held out), so the first run's position is past
	// every record it read (a held-out record after the last batch would be read again).
	produce(t, b.Addr(), "ratings", 2005, 1)
	first := runOK(t, args...)
	m := streamStop.FindStringSubmatch(first.stdout)
	if m == nil {
		t.Fatalf("no stop line:\n%s", first.stdout)
	}
	// Every 10th record held out: 1805 trained.
	if m[2] != "1805" {
		t.Errorf("first run trained %s examples, want 1805:\n%s", m[2], first.stdout)
	}
	if auc, _, _ := first.final(t); auc < 0.6 {
		t.Errorf("first run: held-out auc %v, want learning", auc)
	}
	// The checkpoints' offsets are committed to the consumer group too (for monitoring).
	if got, want := committedOffsets(t, b.Addr(), kafka.DefaultGroupID, "ratings"), checkpointOffsets(t, filepath.Join(dir, "m")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the group's committed offsets %v, the newest checkpoint's %v", got, want)
	}
	produce(t, b.Addr(), "ratings", 1000, 2)
	second := runOK(t, args...)
	m2 := streamStop.FindStringSubmatch(second.stdout)
	if m2 == nil {
		t.Fatalf("no stop line:\n%s", second.stdout)
	}
	// The position counts every example trained on: the first run's 1805 and 900 more.
	if m2[2] != "2705" {
		t.Errorf("after the second run %s examples, want 2705 (none of the first run's again):\n%s", m2[2], second.stdout)
	}
	s1, _ := strconv.Atoi(m[1])
	s2, _ := strconv.Atoi(m2[1])
	if s2 <= s1 {
		t.Errorf("the second run ended at step %d, the first at %d", s2, s1)
	}
}

// committedOffsets are the offsets group has committed for topic's partitions (-1: none).
func committedOffsets(t *testing.T, addr, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0, 1}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("offset fetch of group %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("offset fetch of group %s partition %d: error code %d", group, p.Partition, p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// checkpointOffsets are the Kafka offsets the newest checkpoint of modelDir recorded (of the
// topic "ratings").
func checkpointOffsets(t *testing.T, modelDir string) map[int32]int64 {
	t.Helper()
	st, err := checkpoint.ReadState(modelDir, nil)
	if err != nil || st == nil {
		t.Fatalf("checkpoint state of %s: %v, %v", modelDir, st, err)
	}
	data, err := os.ReadFile(st.ModelCheckpointPath + ".input.json")
	if err != nil {
		t.Fatal(err)
	}
	var pos struct {
		Source kafka.Offsets `json:"source"`
	}
	if err := json.Unmarshal(data, &pos); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return pos.Source["ratings"]
}
