package agentv3

import (
	"context"
	"fmt"
	"testing"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agent/filter"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
)

// layoutOf is a layout of one model with an entry and n PS shards.
func layoutOf(n int) []backend.LayoutEntry {
	entries := []backend.LayoutEntry{entry("m", "entry", ptr("/b/entry"), ptr("latest"))}
	for i := 0; i < n; i++ {
		sub := fmt.Sprintf("ps_%d", i)
		entries = append(entries, entry("m", sub, ptr("/b/"+sub), ptr("latest")))
	}
	return entries
}

// BenchmarkBuildModelServerConfig: filtering a 1000-shard layout for shard 3 of 8 and rendering
// the config text, the CPU part of a layout callback.
func BenchmarkBuildModelServerConfig(b *testing.B) {
	fs, err := filter.ParseAll([]string{"entry; True", "ps_{i}; ${shard_id} == i % ${shard_num}"}, filter.Params{ShardID: 3, ShardNum: 8})
	if err != nil {
		b.Fatal(err)
	}
	entries := layoutOf(1000)
	b.ReportAllocs()
	for b.Loop() {
		cfg, _, err := BuildModelServerConfig(fs, entries, BuildOptions{Bzid: "gip"})
		if err != nil {
			b.Fatal(err)
		}
		if len(pytext.Format(cfg)) == 0 {
			b.Fatal("empty config")
		}
	}
}

// BenchmarkLayoutUpdate: the whole layout callback for a 996-shard layout whose accepted set
// alternates, so every call writes the config file (atomically) and hands it to the reloader.
func BenchmarkLayoutUpdate(b *testing.B) {
	a, err := New(testConfig(b, map[string]string{"SHARD_ID": "3", "MONOLITH_HOST_SHARD_N": "8"},
		func(f *utilsspec.AgentConfig) {
			f.LayoutFilters = []string{"entry; True", "ps_{i}; ${shard_id} == i % ${shard_num}"}
		}), Options{ModelConfigDir: b.TempDir(), Logger: quiet, Reloader: &countingReloader{},
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	layouts := [][]backend.LayoutEntry{layoutOf(996), layoutOf(995)} // ps_995 is shard 3's
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		a.LayoutUpdate(layouts[i%2])
		i++
	}
}

// BenchmarkAddrsMap: the AgentService's address table (built at every HeartBeat) for a layout of
// 100 sub graphs, each bound by 10 containers.
func BenchmarkAddrsMap(b *testing.B) {
	srv := zkfake.NewServer()
	agentZK, ctl := srv.Client(), srv.Client()
	defer agentZK.Close()
	defer ctl.Close()
	a, err := New(testConfig(b, nil, nil), Options{ZK: agentZK, Host: "127.0.0.1", ModelConfigDir: b.TempDir(), Logger: quiet,
		TFS: func(file string) (tfs.Process, error) { return &tfs.FakeWrapper{ModelConfigFile: file}, nil }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer a.Stop(ctx)
	const subs, containers = 100, 10
	for c := 0; c < containers; c++ {
		info := fmt.Sprintf(`{"grpc": "10.0.0.%d:1", "http": null, "archon": "10.0.0.%d:2", "agent": null, "idc": null, "debug_info": null}`, c, c)
		if _, err := ctl.Create(ctx, fmt.Sprintf("/gip/container_service/c:%d", c), []byte(info), zk.CreateOptions{MakePath: true}); err != nil {
			b.Fatal(err)
		}
	}
	for s := 0; s < subs; s++ {
		sub := fmt.Sprintf("ps_%d", s)
		if _, err := ctl.Create(ctx, "/gip/saved_models/m/"+sub, []byte(`{"model_base_path": "/b", "version_policy": "latest"}`), zk.CreateOptions{MakePath: true}); err != nil {
			b.Fatal(err)
		}
		for c := 0; c < containers; c++ {
			if _, err := ctl.Create(ctx, fmt.Sprintf("/gip/binding/m/%s:c:%d", sub, c), nil, zk.CreateOptions{MakePath: true}); err != nil {
				b.Fatal(err)
			}
		}
		if err := ctl.EnsurePath(ctx, "/gip/layout/m:"+sub); err != nil {
			b.Fatal(err)
		}
	}
	if err := a.Backend().Settle(ctx); err != nil {
		b.Fatal(err)
	}
	if got := a.AddrsMap(); len(got) != subs || len(got["m:ps_0"]) != containers+1 /* and the agent itself */ {
		b.Fatalf("addrs map has %d entries, m:ps_0 %v", len(got), got["m:ps_0"])
	}
	b.ReportAllocs()
	for b.Loop() {
		a.AddrsMap()
	}
}
