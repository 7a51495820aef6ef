package agentconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// counterPorts hands out 30001, 30002, ... so tests can tell free ports from PORT* ones.
func counterPorts() func() (int, error) {
	n := 30000
	return func() (int, error) { n++; return n, nil }
}

func TestFromFileErrors(t *testing.T) {
	base := "bzid b\nbase_name m\n"
	tests := []struct {
		name    string
		conf    string
		env     map[string]string
		kind    errkind.Kind
		wantMsg []string
	}{
		{"bad number", base + "deploy_type ps\nnum_ps ten\n", nil, errkind.Value, []string{"agent.conf:4:", "num_ps", `"ten"`, "not a number"}},
		{"bad bool", base + "deploy_type ps\npreload_jemalloc maybe\n", nil, errkind.Value, []string{"agent.conf:4:", "preload_jemalloc", `"maybe"`, "not a bool"}},
		{"bad line", base + "deploy_type ps\norphan\n", nil, errkind.Value, []string{"agent.conf:4:", `"orphan"`, "without a value"}},
		{"empty value", base + "deploy_type ps\nnum_ps # nothing\n", nil, errkind.Value, []string{"agent.conf:4:", "empty value"}},
		{"unknown deploy type", base + "deploy_type cloud\n", nil, errkind.Precondition, []string{"agent.conf:3:", "deploy_type", `"cloud"`, "not one of"}},
		{"deploy type via alias", base + "server_type cloud\n", nil, errkind.Precondition, []string{"agent.conf:3:", "server_type", `"cloud"`}},
		{"no deploy type", base, nil, errkind.Precondition, []string{"deploy_type: not set"}},
		{"shard mismatch", base + "deploy_type ps\nnum_shard 3\n", map[string]string{HostShardEnv: "2"}, errkind.Precondition, []string{"agent.conf:4:", "num_shard", `"3"`, "MONOLITH_HOST_SHARD_N=2"}},
		{"dense not alone", base + "deploy_type dense\ndense_alone false\n", nil, errkind.Precondition, []string{"agent.conf:4:", "dense_alone", "must be true"}},
		{"repeated scalar", base + "deploy_type ps\nnum_ps 2\nnum_ps 3\n", nil, errkind.Value, []string{"agent.conf:4:", "num_ps is set 2 times", "agent.conf:5"}},
		{"bad env port", base + "deploy_type ps\n", map[string]string{"PORT": "80a"}, errkind.Value, []string{"PORT", `"80a"`}},
		{"ipv4 zk on ipv6-only host", base + "deploy_type ps\nzk_servers 10.0.0.1:2181\n", map[string]string{"MY_HOST_IP": ""}, errkind.Generic, []string{"agent.conf:4:", "zk_servers", "ipv6 only"}},
		{"missing include", base + "deploy_type ps\ninclude /nonexistent/x.conf\n", nil, errkind.Value, []string{"agent.conf:4:", "included file does not exist"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "agent.conf", tc.conf)
			env := map[string]string{"MY_HOST_IP": "10.0.0.9"}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := FromFile(p, Options{Env: MapEnv(env), FreePort: counterPorts()})
			if err == nil {
				t.Fatal("FromFile succeeded, want an error")
			}
			if got := errkind.Of(err); got != tc.kind {
				t.Errorf("kind %v, want %v (%v)", got, tc.kind, err)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := FromFile(filepath.Join(t.TempDir(), "none.conf"), Options{}); errkind.Of(err) != errkind.NotFound {
		t.Errorf("missing file: %v, want NotFound", err)
	}
}

func TestPorts(t *testing.T) {
	ports := map[string]string{"PORT": "8001", "PORT2": "8002", "PORT3": "8003", "PORT4": "8004", "PORT5": "8005",
		"PORT6": "8006", "PORT7": "8007", "PORT8": "8008", "PORT9": "8009", "PORT10": "8010", "MY_HOST_IP": "10.0.0.9"}
	type want struct{ entry, ps, dense, unified [3]int } // {grpc, http, archon}; 0 = unset, -1 = a free port
	tests := []struct {
		name  string
		conf  string
		extra map[string]string
		want  want
	}{
		{"mixed", "stand_alone_serving true\n", nil, want{entry: [3]int{8003, 8004, 8001}, ps: [3]int{8005, 8006, 8007}}},
		{"mixed dense alone", "stand_alone_serving true\ndense_alone true\n", nil,
			want{entry: [3]int{8003, 8004, 8001}, ps: [3]int{8005, 8006, 8007}, dense: [3]int{8008, 8009, 8010}}},
		{"mixed dense alone, second dense service", "stand_alone_serving true\ndense_alone true\n", map[string]string{"DENSE_SERVICE_IDX": "1"},
			want{entry: [3]int{8003, 8004, 8001}, ps: [3]int{8005, 8006, 8007}, dense: [3]int{-1, -1, -1}}},
		{"entry", "deploy_type entry\n", nil, want{entry: [3]int{8003, 8004, 8001}, ps: [3]int{-1, -1, -1}}},
		{"ps with dense", "deploy_type ps\ndense_alone true\n", nil, want{entry: [3]int{-1, -1, -1}, ps: [3]int{8003, 8004, 8001}, dense: [3]int{-1, -1, -1}}},
		{"dense", "deploy_type DENSE\ndense_alone true\n", nil, want{entry: [3]int{-1, -1, -1}, ps: [3]int{-1, -1, -1}, dense: [3]int{8003, 8004, 8001}}},
		{"unified", "deploy_type unified\n", nil, want{unified: [3]int{8003, 8004, 8001}}},
	}
	check := func(t *testing.T, role string, got [3]*int, want [3]int) {
		for i, g := range got {
			switch w := want[i]; {
			case w == 0 && g != nil:
				t.Errorf("%s port %d = %d, want unset", role, i, *g)
			case w == -1 && (g == nil || *g <= 30000):
				t.Errorf("%s port %d = %v, want a free port", role, i, g)
			case w > 0 && (g == nil || *g != w):
				t.Errorf("%s port %d = %v, want %d", role, i, g, w)
			}
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range ports {
				env[k] = v
			}
			for k, v := range tc.extra {
				env[k] = v
			}
			p := writeFile(t, t.TempDir(), "agent.conf", "bzid b\nbase_name m\n"+tc.conf)
			c, err := FromFile(p, Options{Env: MapEnv(env), FreePort: counterPorts()})
			if err != nil {
				t.Fatal(err)
			}
			check(t, "entry", [3]*int{c.TFSEntryPort, c.TFSEntryHTTPPort, c.TFSEntryArchonPort}, tc.want.entry)
			check(t, "ps", [3]*int{c.TFSPSPort, c.TFSPSHTTPPort, c.TFSPSArchonPort}, tc.want.ps)
			check(t, "dense", [3]*int{c.TFSDensePort, c.TFSDenseHTTPPort, c.TFSDenseArchonPort}, tc.want.dense)
			check(t, "unified", [3]*int{c.TFSPortGRPC, c.TFSPortHTTP, c.TFSPortArchon}, tc.want.unified)
			if c.AgentPort == nil || *c.AgentPort != 8002 {
				t.Errorf("agent port %v, want 8002", c.AgentPort)
			}
		})
	}
}

func TestServerSchedule(t *testing.T) {
	p := writeFile(t, t.TempDir(), "agent.conf", "bzid b\nbase_name m\ndeploy_type ps\nnum_ps 7\nnum_shard 3\nagent_version 2\n")
	c, err := FromFile(p, Options{Env: MapEnv(map[string]string{HostShardEnv: "3", "SHARD_ID": "1", "MY_HOST_IP": "1.2.3.4"}), FreePort: counterPorts()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ServerSchedule(ServerPS)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, g := range got {
		idx = append(idx, *g)
	}
	if len(idx) != 2 || idx[0] != 1 || idx[1] != 4 {
		t.Fatalf("PS schedule %v, want [1 4]", idx)
	}
	if got, _ := c.ServerSchedule(ServerEntry); len(got) != 1 || got[0] != nil {
		t.Fatalf("entry schedule %v, want [nil]", got)
	}
}

func TestCmdAndPortFloatAndOrder(t *testing.T) {
	p := writeFile(t, t.TempDir(), "agent.conf",
		"bzid b\nbase_name m\ndeploy_type entry\nper_process_gpu_memory_fraction 1\nsaved_model_tags serve,gpu\nenable_batching yes\n")
	c, err := FromFile(p, Options{Env: MapEnv(map[string]string{"MY_HOST_IP": "1.2.3.4", "PORT3": "9000"}), FreePort: counterPorts()})
	if err != nil {
		t.Fatal(err)
	}
	cmd, port, err := c.CmdAndPort("tfs", "", "/m.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if port != 9000 {
		t.Errorf("port %d, want 9000", port)
	}
	// Python prints float(1) as 1.0; TfServingConfig flags follow the dataclass order.
	want := "--enable_batching=true --platform_config_file=" + DefaultPlatformConfigFile + " --per_process_gpu_memory_fraction=1.0 --saved_model_tags=serve,gpu"
	if !strings.HasSuffix(cmd, want) {
		t.Errorf("cmd %q\nwant suffix %q", cmd, want)
	}
	if _, _, err := c.CmdAndPort("tfs", ServerPS, "/m.cfg"); errkind.Of(err) != errkind.Precondition {
		t.Errorf("ps on an entry deploy: %v, want Precondition", err)
	}
	// Without a config file one is generated; it needs base_path.
	if _, _, err := c.CmdAndPort("tfs", "", ""); errkind.Of(err) != errkind.Type {
		t.Errorf("generated config without base_path: %v, want kind Type", err)
	}
	base := "/models"
	c.BasePath = &base
	cmd, _, err = c.CmdAndPort("tfs", "", "")
	if err != nil {
		t.Fatal(err)
	}
	file := strings.TrimPrefix(strings.Fields(cmd)[1], "--model_config_file=")
	defer os.Remove(file)
	gotText, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	wantConfig := "model_config_list {\n  config {\n    name: \"entry\"\n    base_path: \"/models/entry\"\n    model_platform: \"tensorflow\"\n" +
		"    model_version_policy {\n      latest {\n        num_versions: 1\n      }\n    }\n  }\n}\n"
	if string(gotText) != wantConfig {
		t.Errorf("generated model config:\n%s\nwant:\n%s", gotText, wantConfig)
	}
}

// ParseConf keeps every value with its position (for messages); LoadFields keeps what the reference
// keeps (TestRepeatedLayoutFilters).
func TestParseConfKeepsAllValues(t *testing.T) {
	dir := t.TempDir()
	inc := writeFile(t, dir, "inc.conf", "layout_filters c\n")
	p := writeFile(t, dir, "agent.conf", "layout_filters a\nlayout_filters b\ninclude "+inc+"\n")
	conf, err := ParseConf(p)
	if err != nil {
		t.Fatal(err)
	}
	e := conf.Entries["layout_filters"]
	if strings.Join(e.Values, ",") != "a,b,c" || e.Lines[2] != 1 || e.Files[2] != inc {
		t.Fatalf("entry %+v", e)
	}
	// The reference's dict keeps the first two only.
	if v := e.PyValue().([]string); len(v) != 2 {
		t.Fatalf("PyValue %v", v)
	}
}

func TestIncludeCycle(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.conf")
	writeFile(t, dir, "agent.conf", "a 1\ninclude "+p+"\n")
	// The reference recurses until Python raises RecursionError, a RuntimeError: kind Runtime, also
	// through FromFile.
	if _, err := ParseConf(p); err == nil || !strings.Contains(err.Error(), "include cycle") || errkind.Of(err) != errkind.Runtime {
		t.Fatalf("ParseConf = %v, want an include cycle error of kind Runtime", err)
	}
	if _, err := FromFile(p, Options{}); errkind.Of(err) != errkind.Runtime {
		t.Fatalf("FromFile = %v (kind %v), want kind Runtime", err, errkind.Of(err))
	}
}

// Environment integers are read as the reference's int(os.environ[...]) reads them.
func TestEnvInt(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		ok    bool
	}{
		{" 12\n", 12, true}, {"1_000", 1000, true}, {"-1", -1, true}, {"٣", 3, true},
		{"-_1", 0, false}, {"1__0", 0, false}, {"0x1", 0, false}, {"", 0, false}, {"\x1c1", 0, false},
	} {
		got, err := envInt(MapEnv(map[string]string{"K": tc.value}), "K", 5)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("K=%q: %d, %v; want %d (ok %v)", tc.value, got, err, tc.want, tc.ok)
		}
		if err != nil && (errkind.Of(err) != errkind.Value || !strings.Contains(err.Error(), fmt.Sprintf("K=%q", tc.value))) {
			t.Errorf("K=%q: error %v does not name the variable, or is not a ValueError", tc.value, err)
		}
	}
	if got, err := envInt(MapEnv(nil), "K", 5); got != 5 || err != nil {
		t.Errorf("unset: %d, %v; want the default 5", got, err)
	}
}
