package zkmirror

import (
	"context"
	"strconv"
	"testing"

	"github.com/monolith-go/monolith/pkg/datadef"
)

// mirrorWith is a fake-backed mirror holding models x publishes and models x tasks x replicas
// service nodes.
func mirrorWith(b *testing.B, models, publishes, tasks, replicas int) *Mirror {
	b.Helper()
	m, _ := fakeMirror(b)
	ctx := context.Background()
	var pms []datadef.PublishMeta
	var rms []datadef.ReplicaMeta
	for i := range models {
		name := "model_" + strconv.Itoa(i)
		for p := range publishes {
			pms = append(pms, publish(p, 0, name, publishes, "ps_"+strconv.Itoa(p), "entry"))
		}
		for task := range tasks {
			for r := range replicas {
				rms = append(rms, replica("10.0.0."+strconv.Itoa(r)+":1", name, "ps", task, r, datadef.StateAvailable))
			}
		}
	}
	if err := m.PublishLoading(ctx, pms...); err != nil {
		b.Fatal(err)
	}
	if err := m.UpdateService(ctx, rms); err != nil {
		b.Fatal(err)
	}
	m.Queue().Clear()
	return m
}

// BenchmarkExpectedLoading: 100 models of 10 publishes each (1000 nodes), plus 2000 service nodes.
func BenchmarkExpectedLoading(b *testing.B) {
	m := mirrorWith(b, 100, 10, 10, 2)
	b.ResetTimer()
	for b.Loop() {
		if len(m.ExpectedLoading()) != 100 {
			b.Fatal("wrong result")
		}
	}
}

// BenchmarkAllReplicas: a HeartBeat over 100 models x 10 tasks x 2 replicas (2000 nodes).
func BenchmarkAllReplicas(b *testing.B) {
	m := mirrorWith(b, 100, 1, 10, 2)
	b.ResetTimer()
	for b.Loop() {
		if len(m.AllReplicas(ServerPS)) != 1000 {
			b.Fatal("wrong result")
		}
	}
}

// BenchmarkTaskReplicas: a GetReplicas among 2000 service nodes.
func BenchmarkTaskReplicas(b *testing.B) {
	m := mirrorWith(b, 100, 1, 10, 2)
	b.ResetTimer()
	for b.Loop() {
		if len(m.TaskReplicas("model_50", ServerPS, 5)) != 2 {
			b.Fatal("wrong result")
		}
	}
}

// BenchmarkPublishEvent: one publish written and mirrored through the fake's watches, with its
// PUBLISH event queued and consumed.
func BenchmarkPublishEvent(b *testing.B) {
	m, _ := fakeMirror(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		pm := publish(i, 0, "m"+strconv.Itoa(i), 1, "entry")
		i++
		if err := m.PublishLoading(ctx, pm); err != nil {
			b.Fatal(err)
		}
		if _, ok := m.Queue().TryGet(); !ok {
			b.Fatal("no event")
		}
	}
}

// BenchmarkQueue: a Put and a Get.
func BenchmarkQueue(b *testing.B) {
	q := NewQueue()
	ctx := context.Background()
	e := ev(1)
	for b.Loop() {
		q.Put(e)
		if _, err := q.Get(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
