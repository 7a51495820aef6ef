package jobdiscovery

import (
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/discovery"
	"github.com/monolith-go/monolith/pkg/runconfig"
	"github.com/monolith-go/monolith/pkg/trainenv"
)

const (
	psTask = `{"cluster": {"ps": ["127.0.0.1:6000"], "worker": ["127.0.0.1:7001"]}, "task": {"type": "ps", "index": 0}}`
	// badIndex has a task index of the wrong type: Index and Addr fail.
	badIndex = `{"cluster": {"ps": ["127.0.0.1:6000"]}, "task": {"type": "ps", "index": "0"}}`
	// outside has a task index outside its list: Addr fails, the role is fine.
	outside = `{"cluster": {"ps": ["127.0.0.1:6000"]}, "task": {"type": "ps", "index": 3}}`
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   discovery.Options // compared: Type, IsLocal, TFConfig, JobName, ZKServer, UUID
		err    string
	}{
		{name: "local keeps the configured type", values: map[string]any{"is_local": true, "discovery_type": "zk"},
			want: discovery.Options{Type: discovery.ZK, IsLocal: true}},
		{name: "local, default type", values: map[string]any{"is_local": true, "uuid": "u1"},
			want: discovery.Options{Type: discovery.Consul, IsLocal: true, UUID: "u1"}},
		{name: "zk", values: map[string]any{"discovery_type": "zk", "zk_server": "127.0.0.1:2181", "deep_insight_name": "job"},
			want: discovery.Options{Type: discovery.ZK, ZKServer: "127.0.0.1:2181", JobName: "job"}},
		{name: "zk without a server", values: map[string]any{"discovery_type": "zk", "deep_insight_name": "job"},
			err: "--discovery_type zk needs --zk_server and --deep_insight_name (the job's directory /monolith/<deep_insight_name>)"},
		{name: "zk without a job", values: map[string]any{"discovery_type": "zk", "zk_server": "127.0.0.1:2181"},
			err: "--discovery_type zk needs --zk_server and --deep_insight_name (the job's directory /monolith/<deep_insight_name>)"},
		{name: "primus", values: map[string]any{"discovery_type": "primus", "tf_config": psTask},
			want: discovery.Options{Type: discovery.Primus, TFConfig: psTask}},
		{name: "primus without tf_config", values: map[string]any{"discovery_type": "primus"},
			err: "--discovery_type primus: primus discovery needs tf_config (give --tf_config)"},
		{name: "mlp", values: map[string]any{"discovery_type": "mlp"}, want: discovery.Options{Type: discovery.MLP}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := runconfig.New(runconfig.Sources{Values: tc.values})
			if err != nil {
				t.Fatal(err)
			}
			env := trainenv.Env{}
			got, err := Options(rc, env, nil)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.IsLocal != tc.want.IsLocal || got.TFConfig != tc.want.TFConfig ||
				got.JobName != tc.want.JobName || got.ZKServer != tc.want.ZKServer || got.UUID != tc.want.UUID {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Env == nil {
				t.Error("the environment is not passed on")
			}
		})
	}
}

// plain is a discovery whose platform fixes nothing.
type plain struct{ discovery.ServiceDiscovery }

func tfConfig(t *testing.T, text string) *discovery.TFConfig {
	t.Helper()
	d, err := discovery.NewTFConfig(text)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFixedRole(t *testing.T) {
	given := &discovery.Task{ServerType: "worker", Index: 2}
	for _, tc := range []struct {
		name string
		disc func(*testing.T) discovery.ServiceDiscovery
		task *discovery.Task
		want *discovery.Task
		err  string // the error's prefix
	}{
		{name: "local", disc: func(*testing.T) discovery.ServiceDiscovery { return nil }},
		{name: "a discovery that fixes none", disc: func(*testing.T) discovery.ServiceDiscovery { return plain{} }},
		{name: "the task first", disc: func(t *testing.T) discovery.ServiceDiscovery { return tfConfig(t, psTask) }, task: given, want: given},
		{name: "the discovery's role", disc: func(t *testing.T) discovery.ServiceDiscovery { return tfConfig(t, psTask) },
			want: &discovery.Task{ServerType: "ps", Index: 0}},
		{name: "the discovery fails", disc: func(t *testing.T) discovery.ServiceDiscovery { return tfConfig(t, badIndex) },
			err: "primus discovery: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FixedRole(tc.disc(t), tc.task, discovery.Primus)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || got != nil {
					t.Fatalf("got %+v, %v; want an error starting %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFixedAddr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		disc  func(*testing.T) discovery.ServiceDiscovery
		addr  string
		fixed bool
		err   string // the error's prefix
	}{
		{name: "local", disc: func(*testing.T) discovery.ServiceDiscovery { return nil }},
		{name: "a discovery that fixes none", disc: func(*testing.T) discovery.ServiceDiscovery { return plain{} }},
		{name: "fixed", disc: func(t *testing.T) discovery.ServiceDiscovery { return tfConfig(t, psTask) }, addr: "127.0.0.1:6000", fixed: true},
		{name: "the discovery fails", disc: func(t *testing.T) discovery.ServiceDiscovery { return tfConfig(t, outside) },
			err: "discovery: this process's address: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, fixed, err := FixedAddr(tc.disc(t))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || fixed {
					t.Fatalf("got %q %v %v; want an error starting %q", addr, fixed, err, tc.err)
				}
				return
			}
			if err != nil || addr != tc.addr || fixed != tc.fixed {
				t.Errorf("got %q %v %v, want %q %v", addr, fixed, err, tc.addr, tc.fixed)
			}
		})
	}
}
