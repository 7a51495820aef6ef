package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// benchTasks x benchReplicas replicas: a model with 100 PS shards served three times.
const benchTasks, benchReplicas = 100, 3

func fillService(b *testing.B, c zk.Client) {
	b.Helper()
	ctx := context.Background()
	for task := range benchTasks {
		for r := range benchReplicas {
			rm := datadef.NewReplicaMeta()
			addr := fmt.Sprintf("10.0.%d.%d:9001", task, r)
			rm.Address, rm.Stat, rm.Task, rm.Replica = &addr, datadef.StateAvailable, task, r
			p := fmt.Sprintf("/gip/service/m/ps:%d/%d", task, r)
			if _, err := c.Create(ctx, p, rm.Serialize(), zk.CreateOptions{MakePath: true}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchList(b *testing.B, c zk.Client) {
	fillService(b, c)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, err := listReplicas(ctx, c, "gip", "m")
		if err != nil {
			b.Fatal(err)
		}
		if n := strings.Count(out, "\n"); n != benchTasks*benchReplicas {
			b.Fatalf("%d lines", n)
		}
	}
}

// BenchmarkListReplicas is `agent_client --cmd_type=addr` on 300 replicas (in-memory ZooKeeper:
// the listing's own cost).
func BenchmarkListReplicas(b *testing.B) {
	c := zkfake.New()
	defer c.Close()
	benchList(b, c)
}

// BenchmarkListReplicasRealZooKeeper is the same on a local ZooKeeper server (round trips: 101
// Children calls in sequence, 300 reads at most 16 at a time).
func BenchmarkListReplicasRealZooKeeper(b *testing.B) {
	srv := zktest.Start(b)
	c, err := zkreal.Connect(context.Background(), zkreal.Options{Servers: []string{srv.Addr()}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchList(b, c)
}
