package agentsvc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// goldenDir holds the reference's recordings of AgentService (parity/goldens/python).
const goldenDir = "../../parity/goldens/python/agent_service"

// fixedMemory stands for the available memory in wire recordings, which must not vary.
const fixedMemory = 123456789

// goldenCase is the part of an agent_service golden these tests read.
type goldenCase struct {
	Input struct {
		ConfKwargs map[string]any `json:"conf_kwargs"`
		Env        map[string]string
		Requests   [][2]json.RawMessage
		Seed       [][2]json.RawMessage
		Replicas   []struct {
			Address    string `json:"address"`
			ModelName  string `json:"model_name"`
			Replica    int    `json:"replica"`
			ServerType string `json:"server_type"`
			Stat       int    `json:"stat"`
			Task       int    `json:"task"`
		}
		Addrs map[string][]string
	}
	Output []struct {
		RPC          string          `json:"rpc"`
		Request      json.RawMessage `json:"request"`
		ResponseText *string         `json:"response_text"`
		GRPCError    *struct {
			Code    string `json:"code"`
			Details string `json:"details"`
		} `json:"grpc_error"`
	}
}

func loadGolden(t testing.TB, name string) goldenCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// wireServices builds, for each golden case, a Service over an in-package source seeded with the
// case's data (a ReplicaWatcher-like source for v1, a ZKMirror-like one for v2, the callback for
// v3), reporting fixedMemory. With versioned the v1 source reports its data version, so the service
// answers from its cache in wire form.
func wireServices(t testing.TB, versioned bool) map[string]*Service {
	t.Helper()
	out := map[string]*Service{}
	for _, name := range []string{"v1_watcher_dc0", "v1_watcher_dc1"} {
		c := loadGolden(t, name)
		dc := c.Input.ConfKwargs["dc_aware"] == true
		w := newFakeWatcher(dc)
		for _, s := range c.Input.Seed {
			var path string
			var m struct {
				Address string `json:"address"`
				Stat    int    `json:"stat"`
			}
			if json.Unmarshal(s[0], &path) != nil || json.Unmarshal(s[1], &m) != nil {
				t.Fatalf("%s: bad seed %s", name, s)
			}
			w.set(path, meta(m.Address, datadef.ModelState(m.Stat)))
		}
		idc, cluster := strings.ToLower(c.Input.Env["TCE_INTERNAL_IDC"]), strings.ToLower(c.Input.Env["TCE_LOGICAL_CLUSTER"])
		var src ReplicaSource = w
		if versioned {
			src = versionedWatcher{w}
		}
		out[name] = NewWatcherService(src, WatcherConfig{IDC: &idc, Cluster: &cluster, DCAware: dc}, WithLogger(quiet))
	}
	mem := func() (int64, error) { return fixedMemory, nil }
	c := loadGolden(t, "v2_zkmirror")
	m := newFakeMirror()
	for _, r := range c.Input.Replicas {
		m.add(r.ModelName, r.ServerType, r.Task, r.Replica, meta(r.Address, datadef.ModelState(r.Stat)))
	}
	out["v2_zkmirror"] = NewMirrorService(m, &Resource{Address: "10.1.2.3:18765", ShardID: 0, ReplicaID: 1, Memory: mem}, WithLogger(quiet))
	c = loadGolden(t, "v3_data_provider")
	addrs := c.Input.Addrs
	out["v3_data_provider"] = NewProviderService(func() map[string][]string { return addrs },
		&Resource{Address: "10.1.2.3:18765", ShardID: 2, ReplicaID: 4, Memory: mem}, WithLogger(quiet))
	return out
}

// request decodes a golden request ({"server_type": "PS", "task": 0, ...}) for rpc.
func request(t testing.TB, rpc string, raw json.RawMessage) proto.Message {
	t.Helper()
	var r struct {
		ServerType string `json:"server_type"`
		Task       int32  `json:"task"`
		ModelName  string `json:"model_name"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	st := pb.ServerType(pb.ServerType_value[r.ServerType])
	switch rpc {
	case "HeartBeat":
		return &pb.HeartBeatRequest{ServerType: st}
	case "GetReplicas":
		return &pb.GetReplicasRequest{ServerType: st, Task: r.Task, ModelName: r.ModelName}
	case "GetResource":
		return &pb.GetResourceRequest{}
	}
	t.Fatalf("unknown rpc %s", rpc)
	return nil
}

// call runs rpc through c.
func call(c *Client, rpc string, req proto.Message) (proto.Message, error) {
	switch r := req.(type) {
	case *pb.HeartBeatRequest:
		return c.HeartBeat(bg(), r.ServerType)
	case *pb.GetReplicasRequest:
		return c.GetModelReplicas(bg(), r.ModelName, r.ServerType, r.Task)
	case *pb.GetResourceRequest:
		return c.GetResource(bg())
	}
	return nil, fmt.Errorf("no rpc %s", rpc)
}

var memoryLine = regexp.MustCompile(`(?m)^memory: ` + fmt.Sprint(fixedMemory) + `$`)

// TestGoldenRPCs replays each golden's requests over gRPC and compares the Python text format of
// each answer with the recording. v1 runs over the in-package ReplicaWatcher-like source, so it
// checks the service's part (dc-aware keys, empty lists, GetResource); v2 differs on purpose.
func TestGoldenRPCs(t *testing.T) {
	leakcheck.Check(t)
	services := map[string]*Service{}
	for _, versioned := range []bool{false, true} {
		for name, svc := range wireServices(t, versioned) {
			services[fmt.Sprintf("%s/versioned=%v", name, versioned)] = svc
		}
	}
	// v2: the reference asked ZKMirror with the enum's int, so HeartBeat was always empty and
	// GetReplicas raised AttributeError; the typed server type gives the mirror's replicas.
	v2 := map[int]string{
		0: "addresses {\n  key: \"mm:ps:0\"\n  value {\n    address: \"10.1.2.3:100\"\n    address: \"10.1.2.4:100\"\n  }\n}\n",
		1: "addresses {\n  key: \"mm:entry:0\"\n  value {\n    address: \"10.1.2.3:200\"\n  }\n}\n",
		3: "address_list {\n  address: \"10.1.2.3:100\"\n  address: \"10.1.2.4:100\"\n}\n",
		4: "address_list {\n}\n",
		5: "address_list {\n  address: \"10.1.2.3:200\"\n}\n",
	}
	for key, svc := range services {
		name, _, _ := strings.Cut(key, "/")
		t.Run(key, func(t *testing.T) {
			srv, err := Listen(svc, 0)
			if err != nil {
				t.Fatal(err)
			}
			srv.Start()
			defer srv.Stop(time.Second)
			client, err := Dial(fmt.Sprintf("127.0.0.1:%d", srv.Port()), ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			g := loadGolden(t, name)
			// The v3 recording lists its requests in the output only.
			if len(g.Output) == 0 || (len(g.Input.Requests) > 0 && len(g.Output) != len(g.Input.Requests)) {
				t.Fatalf("%d outputs for %d requests", len(g.Output), len(g.Input.Requests))
			}
			for i, out := range g.Output {
				resp, err := call(client, out.RPC, request(t, out.RPC, out.Request))
				wantText, wantErr := out.ResponseText, out.GRPCError
				if want, ok := v2[i]; ok && name == "v2_zkmirror" {
					wantText, wantErr = &want, nil
				}
				if wantErr != nil {
					st, _ := status.FromError(unwrapAll(err))
					if err == nil || st.Code().String() != titleCode(wantErr.Code) || st.Message() != wantErr.Details {
						t.Errorf("#%d %s: %v, want %s %q", i, out.RPC, err, wantErr.Code, wantErr.Details)
					}
					continue
				}
				if err != nil {
					t.Errorf("#%d %s: %v", i, out.RPC, err)
					continue
				}
				got := memoryLine.ReplaceAllString(pytext.Format(resp), "memory: <memory>")
				if got != *wantText {
					t.Errorf("#%d %s %s:\n got %q\nwant %q", i, out.RPC, out.Request, got, *wantText)
				}
			}
		})
	}
}

// titleCode turns a Python status name (DEADLINE_EXCEEDED) into Go's (DeadlineExceeded).
func titleCode(s string) string {
	parts := strings.Split(strings.ToLower(s), "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// unwrapAll returns the innermost error, where the gRPC status is.
func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
