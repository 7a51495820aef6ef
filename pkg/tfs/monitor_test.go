package tfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pytext"
)

var env = map[string]string{"MY_HOST_IP": "10.1.2.3", "PORT": "8001", "PORT2": "8002", "PORT3": "8003", "PORT4": "8004",
	"PORT5": "8005", "PORT6": "8006", "PORT7": "8007", "PORT8": "8008", "PORT9": "8009", "PORT10": "8010"}

func newMonitor(t testing.TB, conf string) *Monitor {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.conf")
	if err := os.WriteFile(p, []byte("bzid bz\nbase_name m\nbase_path /b\n"+conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n := 30000
	c, err := agentconf.FromFile(p, agentconf.Options{Env: agentconf.MapEnv(env), FreePort: func() (int, error) { n++; return n, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return NewMonitor(c)
}

// The expectations are the reference's get_addr results (parity case get_addr_all_deploys),
// plus mixed with dense alone.
func TestAddr(t *testing.T) {
	tests := []struct {
		conf              string
		entry, ps, dense0 string // "" = error (kind Precondition)
	}{
		{"deploy_type entry\n", "10.1.2.3:8003", "", ""},
		{"deploy_type ps\n", "", "10.1.2.3:8003", ""},
		{"deploy_type dense\ndense_alone true\n", "", "", "10.1.2.3:8003"},
		{"stand_alone_serving true\n", "10.1.2.3:8003", "10.1.2.3:8005", "10.1.2.3:None"},
		{"stand_alone_serving true\ndense_alone true\n", "10.1.2.3:8003", "10.1.2.3:8005", "10.1.2.3:8008"},
	}
	for _, tc := range tests {
		m := newMonitor(t, tc.conf)
		for sub, want := range map[string]string{"entry": tc.entry, "ps_0": tc.ps, "dense_0": tc.dense0} {
			got, err := m.Addr(sub)
			if want == "" {
				if errkind.Of(err) != errkind.Precondition {
					t.Errorf("%q Addr(%s) = %q, %v; want a Precondition error", tc.conf, sub, got, err)
				}
				continue
			}
			if err != nil || got != want {
				t.Errorf("%q Addr(%s) = %q, %v; want %s", tc.conf, sub, got, err, want)
			}
		}
	}
}

func TestGenModelConfig(t *testing.T) {
	m := newMonitor(t, "deploy_type ps\n")
	name := "m"
	pms := []datadef.PublishMeta{{ModelName: &name, PType: datadef.PublishLoad, SubModels: []datadef.SubModel{
		{Name: "ps_1", Path: "/e/ps_1/12"}, {Name: "entry", Path: "/e/entry/12"}, {Name: "ps_0", Path: "/e/ps_0/11"}}}}
	configs, err := m.GenModelConfig(pms, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "model_config_list {\n  config {\n    name: \"m:ps_1\"\n    base_path: \"/e/ps_1\"\n    model_platform: \"tensorflow\"\n" +
		"    model_version_policy {\n      specific {\n        versions: 12\n      }\n    }\n  }\n  config {\n    name: \"m:ps_0\"\n" +
		"    base_path: \"/e/ps_0\"\n    model_platform: \"tensorflow\"\n    model_version_policy {\n      specific {\n        versions: 11\n      }\n    }\n  }\n}\n"
	if got := pytext.Format(configs["ps"]); got != want {
		t.Fatalf("ps config:\n%s\nwant:\n%s", got, want)
	}
	if got := pytext.Format(configs["entry"]); got != "" {
		t.Fatalf("entry config on a ps deploy: %q", got)
	}
	pms[0].SubModels[0].Path = "/e/ps_1/latest"
	if _, err := m.GenModelConfig(pms, false); errkind.Of(err) != errkind.Value {
		t.Fatalf("bad version dir: %v", err)
	}
}

// TestGenModelConfigPathForms: the base path is os.path.dirname of the version path and the version
// its os.path.basename, uncleaned (".." and "//" stay), so a trailing "/" leaves no version.
func TestGenModelConfigPathForms(t *testing.T) {
	m := newMonitor(t, "deploy_type ps\n")
	tests := []struct {
		path, base string
		version    int64 // 0: a Value error
	}{
		{"/e/ps_0/11", "/e/ps_0", 11},
		{"/m/../x/ps_0/1", "/m/../x/ps_0", 1},
		{"/a//ps_0/2", "/a//ps_0", 2},
		{"/x/./ps_0/6", "/x/./ps_0", 6},
		{"rel/ps_0/3", "rel/ps_0", 3},
		{"4", "", 4},
		{"//5", "//", 5},
		{"/e/ps_0/3/", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			name := "m"
			pms := []datadef.PublishMeta{{ModelName: &name, PType: datadef.PublishLoad,
				SubModels: []datadef.SubModel{{Name: "ps_0", Path: tt.path}}}}
			configs, err := m.GenModelConfig(pms, false)
			if tt.version == 0 {
				if errkind.Of(err) != errkind.Value {
					t.Fatalf("got %v, %v; want a Value error", configs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mc := configs["ps"].GetModelConfigList().GetConfig()[0]
			if mc.GetBasePath() != tt.base || mc.GetModelVersionPolicy().GetSpecific().GetVersions()[0] != tt.version {
				t.Fatalf("base %q version %v, want %q %d", mc.GetBasePath(), mc.GetModelVersionPolicy().GetSpecific().GetVersions(), tt.base, tt.version)
			}
		})
	}
}
