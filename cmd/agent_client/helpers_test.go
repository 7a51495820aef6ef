package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/agentsvc"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zkmirror"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// agentHost is where the tests reach the in-process AgentService, which listens on every
// address: a loopback address other than 127.0.0.1, which agentconf.LocalIP would not take from
// MY_HOST_IP (it skips loopback answers of the host name lookup).
const agentHost = "127.0.0.2"

func testEnv() agentconf.LookupEnv {
	return agentconf.MapEnv(map[string]string{"MY_HOST_IP": agentHost})
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fixture is testdata/fixture.json: the ZooKeeper nodes, AgentService answers and export files
// the reference was run against.
type fixture struct {
	Bzid  string `json:"bzid"`
	Nodes []struct {
		Path string `json:"path"`
		Data string `json:"data"`
	} `json:"nodes"`
	Files map[string]int `json:"files"`
}

// refCase is one command line of testdata/cases.json with what the reference did
// (testdata/reference.json).
type refCase struct {
	refcases.Case
	Args   []string `json:"args"`
	Conf   string   `json:"conf"`
	Delete []string `json:"delete"`
	Tree   bool     `json:"tree"`
}

func loadFixture(t *testing.T) fixture {
	t.Helper()
	var f fixture
	refcases.ReadJSON(t, filepath.Join("testdata", "fixture.json"), &f)
	return f
}

// loadCases joins cases.json with reference.json.
func loadCases(t *testing.T) []refCase {
	t.Helper()
	return refcases.Load[refCase](t, "testdata", "testdata/README.md")
}

// writeExport creates the fixture's files (each of its size) under a new directory.
func writeExport(t *testing.T, f fixture) string {
	t.Helper()
	dir := t.TempDir()
	for rel, size := range f.Files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeConf writes an agent.conf for bzid gip on zkServers, plus extra lines.
func writeConf(t *testing.T, zkServers string, extra ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.conf")
	text := "bzid gip\nzk_servers " + zkServers + "\ndeploy_type mixed\n" + strings.Join(extra, "")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// resetTree replaces /{bzid} by the fixture's nodes, minus deleted.
func resetTree(t *testing.T, c zk.Client, f fixture, deleted []string) {
	t.Helper()
	ctx := tctx(t)
	root := "/" + f.Bzid
	if err := c.Delete(ctx, root, zk.DeleteOptions{Recursive: true}); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	for _, n := range f.Nodes {
		if _, err := c.Create(ctx, n.Path, []byte(n.Data), zk.CreateOptions{MakePath: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range deleted {
		if err := c.Delete(ctx, p, zk.DeleteOptions{Recursive: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// startAgent serves the AgentService in-process over real gRPC, answering (agent v2) from a
// ZooKeeper mirror of /{bzid}/service on c; it returns the port.
func startAgent(t *testing.T, c zk.Client, bzid string) int {
	t.Helper()
	replica := 0
	m, err := zkmirror.New(zkmirror.Config{Client: c, BZID: bzid, ShardID: -1, ReplicaID: &replica,
		LocalHost: agentHost, Env: agentconf.MapEnv(nil), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(tctx(t), true); err != nil {
		t.Fatal(err)
	}
	srv, err := agentsvc.Listen(agentsvc.NewMirrorService(agentsvc.FromMirror(m), nil, agentsvc.WithLogger(quiet)), 0)
	if err != nil {
		m.Stop()
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Stop(time.Second)
		m.Stop()
	})
	return srv.Port()
}
