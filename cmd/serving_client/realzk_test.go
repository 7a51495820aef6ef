package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// TestRealZooKeeper runs the command as an operator would, dialling a real ZooKeeper server
// through a chroot: load, status, unload.
func TestRealZooKeeper(t *testing.T) {
	leakcheck.Check(t)
	srv := zktest.Start(t, zktest.WithTickTime(200*time.Millisecond))
	admin, err := zkreal.Connect(tctx(t), zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: 4 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	servers := srv.Addr() + "/monolith"
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"--zk_servers=" + servers, "--bzid=gip", "--model_name=m1", "--timeout=20s"}, args...),
			&out, &errOut, dialZK)
		return code, out.String(), errOut.String()
	}

	if code, out, errOut := cli("--cmd_type=load", "--model_dir=hdfs:///models/m1", "--num_shard=2"); code != 0 || out != "" {
		t.Fatalf("load: exit %d, %q, %q", code, out, errOut)
	}
	want := `{"model_name": "m1", "model_dir": "hdfs:///models/m1", "ckpt": null, "num_shard": 2, "action": "NONE", "spec_replicas": []}`
	if got := getData(t, admin, "/monolith/gip/portal/m1"); got != want {
		t.Fatalf("portal node under the chroot:\n got %s\nwant %s", got, want)
	}

	if _, err := admin.Create(tctx(t), "/monolith/gip/service/m1/ps:1/0", replica(30), zk.CreateOptions{MakePath: true, Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("--cmd_type=status"); code != 0 || out != "LoadSate(portal=True, publish=None, service={'ps:1:0': 30})\n" {
		t.Fatalf("status: exit %d, %q, %q", code, out, errOut)
	}

	if code, out, errOut := cli("--cmd_type=unload"); code != 0 || out != "" {
		t.Fatalf("unload: exit %d, %q, %q", code, out, errOut)
	}
	if st, err := admin.Exists(tctx(t), "/monolith/gip/portal/m1"); err != nil || st != nil {
		t.Fatalf("after unload: %v %v", st, err)
	}
	if code, _, errOut := cli("--cmd_type=unload"); code != 0 || !strings.Contains(errOut, "m1 not exists, nothing to do!") {
		t.Fatalf("second unload: exit %d, %q", code, errOut)
	}
}
