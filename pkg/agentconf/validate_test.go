package agentconf

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// loadConf writes conf as agent.conf in a fresh directory and loads it with env (MY_HOST_IP set so no
// name lookup happens) and counter ports; log receives the warnings.
func loadConf(t *testing.T, conf string, env map[string]string, log *slog.Logger) (*AgentConfig, string, error) {
	t.Helper()
	p := writeFile(t, t.TempDir(), "agent.conf", conf)
	e := map[string]string{"MY_HOST_IP": "10.0.0.9"}
	for k, v := range env {
		e[k] = v
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := FromFile(p, Options{Env: MapEnv(e), FreePort: counterPorts(), Logger: log})
	return c, p, err
}

// Issue 21 item 8: what would fail later (or never) fails at load time, naming file, line, key and value.
func TestFromFileRejectsBadValues(t *testing.T) {
	base := "bzid b\nbase_name m\ndeploy_type ps\n"
	tests := []struct {
		name    string
		conf    string
		env     map[string]string
		wantMsg []string
	}{
		{"zk servers only commas", base + "zk_servers ,,,\n", nil, []string{"agent.conf:4:", `zk_servers ",,,"`, "server 1: empty host"}},
		{"zk chroot with empty node", base + "zk_servers 127.0.0.1:2181/bad//path\n", nil, []string{"agent.conf:4:", `"127.0.0.1:2181/bad//path"`, `chroot "/bad//path"`, "empty ZooKeeper node name"}},
		{"zk chroot with dot node", base + "zk_servers 127.0.0.1:2181/a/../b\n", nil, []string{"agent.conf:4:", "chroot", `".." is not a valid`}},
		{"zk chroot only (no host)", base + "zk_servers /chroot\n", nil, []string{"agent.conf:4:", "server 1: empty host"}},
		{"zk empty host with port", base + "zk_servers 127.0.0.1:2181,:2182\n", nil, []string{"agent.conf:4:", "server 2: empty host", `":2182"`}},
		{"zk empty second host", base + "zk_servers 127.0.0.1:2181,\n", nil, []string{"agent.conf:4:", "server 2: empty host"}},
		{"zk port not a number", base + "zk_servers 127.0.0.1:abc\n", nil, []string{"agent.conf:4:", `port "abc" is not a number in 1..65535`}},
		{"zk port out of range", base + "zk_servers 127.0.0.1:70000\n", nil, []string{"agent.conf:4:", `port "70000"`}},
		{"zk port zero", base + "zk_servers 127.0.0.1:0\n", nil, []string{"agent.conf:4:", `port "0"`}},
		{"zk port empty", base + "zk_servers 127.0.0.1:\n", nil, []string{"agent.conf:4:", `port ""`}},
		{"zk bare ipv6 with port", base + "zk_servers ::1:2181\n", nil, []string{"agent.conf:4:", "need brackets"}},
		{"zk host with a space", base + "zk_servers zk host:2181\n", nil, []string{"agent.conf:4:", `host "zk host" is not a host name`}},
		{"bzid with slash", "bzid a/b\nbase_name m\ndeploy_type ps\n", nil, []string{"agent.conf:1:", `bzid "a/b"`, "contains '/'"}},
		{"bzid dot dot", "bzid ..\nbase_name m\ndeploy_type ps\n", nil, []string{"agent.conf:1:", `bzid ".."`, "not a valid ZooKeeper node name"}},
		{"bzid control character", "bzid a\x01b\nbase_name m\ndeploy_type ps\n", nil, []string{"agent.conf:1:", "U+0001"}},
		{"agent port negative", base + "agent_port -5\n", nil, []string{"agent.conf:4:", `agent_port "-5"`, "below the minimum 0"}},
		{"agent port too big", base + "agent_port 65536\n", nil, []string{"agent.conf:4:", `agent_port "65536"`, "above the maximum 65535"}},
		{"tfs port too big", base + "tfs_ps_port 1 << 20\n", nil, []string{"agent.conf:4:", "tfs_ps_port"}},
		{"unified port negative", "bzid b\ndeploy_type unified\ntfs_port_grpc 0 - 1\n", nil, []string{"agent.conf:3:", "tfs_port_grpc", "below the minimum 0"}},
		{"env agent port negative", base, map[string]string{"PORT2": "-5"}, []string{"PORT2=-5", "not a port"}},
		{"env grpc port too big", base, map[string]string{"PORT3": "65536"}, []string{"PORT3=65536", "not a port"}},
		{"unknown key typo", base + "agent_versoin 3\n", nil, []string{"agent.conf:4:", `unknown key agent_versoin "3" (did you mean agent_version?)`}},
		{"unknown key typo of an alias", "bzid b\nservr_type ps\n", nil, []string{"agent.conf:2:", "unknown key servr_type", "(did you mean server_type?)"}},
		{"unknown key typo, dropped letter", base + "layout_filter entry\n", nil, []string{"agent.conf:4:", "(did you mean layout_filters?)"}},
		{"unknown key far from any", base + "foo_bar 1\n", nil, []string{"agent.conf:4:", `unknown key foo_bar "1"`}},
		{"several unknown keys", base + "foo_bar 1\nnum_pss 2\nzzz 3\n", nil, []string{"agent.conf:4:", "unknown key foo_bar", "; 2 more unknown (num_pss at line 5, zzz at line 6)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadConf(t, tc.conf, tc.env, nil)
			if err == nil {
				t.Fatal("FromFile succeeded, want an error")
			}
			if got := errkind.Of(err); got != errkind.Value {
				t.Errorf("kind %v, want Value (%v)", got, err)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "did you mean") && tc.name == "unknown key far from any" {
				t.Errorf("error %q suggests a key for a name close to none", err)
			}
		})
	}
}

// What the reference accepts and works keeps working: every key of the parity goldens' confs,
// aliases, the legacy model_config_file, and the zk_servers forms kazoo and the Go client both read.
func TestFromFileAcceptsValidValues(t *testing.T) {
	base := "bzid b\nbase_name m\ndeploy_type ps\n"
	tests := []struct {
		name  string
		conf  string
		check func(*AgentConfig) bool
	}{
		{"zk one server", base + "zk_servers 127.0.0.1:2181\n", nil},
		{"zk several with chroot", base + "zk_servers 10.0.0.1:2181, 10.0.0.2:2182/monolith/zk\n", nil},
		{"zk host names without ports", base + "zk_servers zk-1.example,zk_2\n", nil},
		{"zk ipv6 in brackets", base + "zk_servers [::1]:2181,[fe80::1%eth0]:2181\n", nil},
		{"zk root chroot", base + "zk_servers 127.0.0.1:2181/\n", nil},
		{"zk chroot with trailing slash", base + "zk_servers 127.0.0.1:2181/a/b/\n", nil},
		{"zk none", base + "zk_servers none\n", func(c *AgentConfig) bool { return c.ZKServers == nil }},
		{"bzid with dot and dash", "bzid my.bz-1\nbase_name m\ndeploy_type ps\n", nil},
		{"agent port bounds", base + "agent_port 65535\n", func(c *AgentConfig) bool { return *c.AgentPort == 65535 }},
		{"agent port zero", base + "agent_port 0\n", func(c *AgentConfig) bool { return *c.AgentPort == 0 }},
		{"server_type alias", "bzid b\nserver_type entry\n", func(c *AgentConfig) bool { return c.Deploy == ServerEntry }},
		{"legacy model_config_file", base + "model_config_file /x/y\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := loadConf(t, tc.conf, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("unexpected config %+v", c.AgentConfig)
			}
		})
	}
	// Every key a Python golden's agent.conf uses (parity/goldens/python/utils) is read, except the
	// case that is about unknown keys.
	goldenKeys := []string{"agent_version", "allow_growth", "base_name", "base_path", "bzid", "dc_aware", "dense_alone",
		"deploy_type", "enable_batching", "enable_model_warmup", "enable_profiler", "enable_signature_method_name_check",
		"fetch_ps_long_conn_enable", "fetch_ps_timeout_ms", "file_system_poll_wait_seconds", "file_system_poll_wait_seconds_ps",
		"flush_filesystem_caches", "grpc_channel_arguments", "grpc_max_threads", "layout_filters", "layout_pattern",
		"load_retry_interval_micros", "max_num_load_retries", "max_waiting_sec", "num_load_threads", "num_ps", "num_shard",
		"num_unload_threads", "per_process_gpu_memory_fraction", "platform_config_file", "preload_jemalloc",
		"rough_sort_model_name", "saved_model_tags", "server_type", "ssl_config_file", "stand_alone_serving",
		"tensorflow_inter_op_parallelism", "tensorflow_intra_op_parallelism", "tensorflow_session_parallelism",
		"update_model_status_interval", "use_metrics", "version", "version_data", "xla_cpu_compilation_enabled", "zk_servers"}
	known := knownKeys()
	for _, k := range goldenKeys {
		if !slices.Contains(known, k) {
			t.Errorf("key %s of the Python goldens is not a known key", k)
		}
	}
}

// A huge value never makes a huge error line: values are cut to 80 bytes plus their size.
func TestHugeValuesAreClipped(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	digits := strings.Repeat("9", 1<<20)
	base := "bzid b\nbase_name m\ndeploy_type ps\n"
	tests := []struct {
		name, conf string
	}{
		{"unknown key value", base + "foo_bar " + huge + "\n"},
		{"unknown key name", base + huge + " 1\n"},
		{"deploy type", "bzid b\ndeploy_type " + huge + "\n"},
		{"bool", base + "preload_jemalloc " + huge + "\n"},
		{"number", base + "num_ps " + huge + "\n"},
		{"number too large", base + "num_ps " + digits + "\n"},
		{"expression", base + "num_ps 1 + " + huge + "\n"},
		{"zk servers host", base + "zk_servers " + huge + "!:1\n"},
		{"zk servers port", base + "zk_servers h:" + digits + "\n"},
		{"zk chroot", base + "zk_servers h:1/" + huge + "/./x\n"},
		{"bzid", "bzid a/" + huge + "\nbase_name m\ndeploy_type ps\n"},
		{"repeated scalar", base + "num_ps " + huge + "\nnum_ps " + huge + "\nnum_ps " + huge + "\nnum_ps " + huge + "\n"},
		{"line without a value", base + huge + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadConf(t, tc.conf, nil, nil)
			if err == nil {
				t.Fatal("FromFile succeeded, want an error")
			}
			msg := err.Error()
			if len(msg) > 1024 || !strings.Contains(msg, "bytes)") {
				t.Errorf("error is %d bytes (want at most 1024, with the value's size): %.300s", len(msg), msg)
			}
		})
	}
	if got := quote(strings.Repeat("é", 50)); !strings.HasPrefix(got, `"éé`) || !strings.HasSuffix(got, `"... (100 bytes)`) {
		t.Errorf("quote cuts a rune or misplaces the size: %s", got)
	}
}

// Issue 21 item 9: the reference's conf_parser keeps the first two lines of a repeated key, so a
// mixed Python/Go fleet loads the same sub-graphs only if Go does too; the dropped lines are named.
func TestRepeatedLayoutFilters(t *testing.T) {
	tests := []struct {
		name        string
		conf        string
		include     string
		want        []string
		wantIgnored []string // file:line of the ignored lines, "inc" meaning the included file
	}{
		{"one", "layout_filters entry; True\n", "", []string{"entry; True"}, nil},
		{"two", "layout_filters entry; True\nlayout_filters ps_0; True\n", "", []string{"entry; True", "ps_0; True"}, nil},
		{"three", "layout_filters entry; True\nlayout_filters ps_0; True\nlayout_filters ps_1; True\n", "",
			[]string{"entry; True", "ps_0; True"}, []string{"agent.conf:5"}},
		{"four, one via include", "layout_filters a\nlayout_filters b\ninclude <inc>\nlayout_filters d\n", "layout_filters c\n",
			[]string{"a", "b"}, []string{"inc.conf:1", "agent.conf:6"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := tc.conf
			if tc.include != "" {
				conf = strings.ReplaceAll(conf, "<inc>", writeFile(t, dir, "inc.conf", tc.include))
			}
			p := writeFile(t, dir, "agent.conf", "bzid b\ndeploy_type unified\n"+conf)
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			c, err := FromFile(p, Options{Env: MapEnv(map[string]string{"MY_HOST_IP": "10.0.0.9"}), FreePort: counterPorts(), Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.LayoutFilters, tc.want) {
				t.Errorf("layout_filters %q, want %q", c.LayoutFilters, tc.want)
			}
			var ignored []string
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var rec struct {
					Level     string   `json:"level"`
					Key       string   `json:"key"`
					IgnoredAt []string `json:"ignored_at"`
				}
				if line == "" || json.Unmarshal([]byte(line), &rec) != nil || rec.Key != "layout_filters" {
					continue
				}
				if rec.Level != "WARN" {
					t.Errorf("level %s, want WARN: %s", rec.Level, line)
				}
				for _, at := range rec.IgnoredAt {
					ignored = append(ignored, strings.TrimPrefix(at, dir+string(filepath.Separator)))
				}
			}
			if !slices.Equal(ignored, tc.wantIgnored) {
				t.Errorf("warned about ignored lines %q, want %q (log: %s)", ignored, tc.wantIgnored, logs.String())
			}
		})
	}
}

func TestSuggestKey(t *testing.T) {
	known := knownKeys()
	for key, want := range map[string]string{"agent_versoin": "agent_version", "bzd": "bzid", "zk_server": "zk_servers", "foo_bar": "", "x": ""} {
		if got := suggestKey(key, known); got != want {
			t.Errorf("suggestKey(%q) = %q, want %q", key, got, want)
		}
	}
}
