package memprof

import (
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func envOf(kv ...string) Env {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestSetupHeapProfileMatchesReference: the expected variables are what the reference's
// setup_heap_profile put in os.environ (run outside this repository with find_main() = /base/dir
// and MLPEnv().index = 3).
func TestSetupHeapProfileMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		p    func(*HeapProfile)
		want map[string]string
	}{
		{"defaults, LD_PRELOAD unset", envOf("MLP_ROLE_INDEX", "3"), func(*HeapProfile) {}, map[string]string{
			"LD_PRELOAD":                       ":/base/dir/../gperftools/libtcmalloc/lib/libtcmalloc.so",
			"HEAPPROFILE":                      "/base/dir/hprof_3",
			"HEAP_PROFILE_INUSE_INTERVAL":      "104857600",
			"HEAP_PROFILE_ALLOCATION_INTERVAL": "1073741824",
			"HEAP_PROFILE_SAMPLE_RATIO":        "1.0",
			"HEAP_PROFILE_TIME_INTERVAL":       "0",
			"HEAP_PROFILE_MMAP":                "false",
		}},
		{"sampled, own dir", envOf("MLP_ROLE_INDEX", "3", "LD_PRELOAD", "/x/a.so"), func(p *HeapProfile) {
			p.SampleRatio, p.MMap, p.Dir, p.TimeInterval = 1.0/64, true, "/prof/", 30
		}, map[string]string{
			"LD_PRELOAD":                       "/x/a.so:/base/dir/../gperftools/libtcmalloc/lib/libtcmalloc.so",
			"HEAPPROFILE":                      "/prof/hprof_3",
			"HEAP_PROFILE_INUSE_INTERVAL":      "6710886400",
			"HEAP_PROFILE_ALLOCATION_INTERVAL": "68719476736",
			"HEAP_PROFILE_SAMPLE_RATIO":        "0.015625",
			"HEAP_PROFILE_TIME_INTERVAL":       "30",
			"HEAP_PROFILE_MMAP":                "true",
		}},
		{"truncated intervals, empty LD_PRELOAD", envOf("MLP_ROLE_INDEX", "3", "LD_PRELOAD", ""), func(p *HeapProfile) {
			p.SampleRatio, p.InuseInterval, p.AllocationInterval = 0.3, 1000, 7
		}, map[string]string{
			"LD_PRELOAD":                       ":/base/dir/../gperftools/libtcmalloc/lib/libtcmalloc.so",
			"HEAPPROFILE":                      "/base/dir/hprof_3",
			"HEAP_PROFILE_INUSE_INTERVAL":      "3333",
			"HEAP_PROFILE_ALLOCATION_INTERVAL": "23",
			"HEAP_PROFILE_SAMPLE_RATIO":        "0.3",
			"HEAP_PROFILE_TIME_INTERVAL":       "0",
			"HEAP_PROFILE_MMAP":                "false",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultHeapProfile()
			tc.p(&p)
			vars, err := SetupHeapProfile(tc.env, "/base/dir", p)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, v := range vars {
				got[v.Name] = v.Value
				if v.String() != v.Name+"="+v.Value {
					t.Errorf("String() = %q", v.String())
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %d variables, want %d: %v", len(got), len(tc.want), got)
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("%s = %q, want %q", k, got[k], w)
				}
			}
		})
	}
}

func TestRoleIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		want int
		err  string
	}{
		{"unset", envOf(), 0, ""},
		{"role index, quoted", envOf("MLP_ROLE_INDEX", ` "7" `), 7, ""},
		{"mpi worker uses the rank", envOf("MLP_ROLE", "worker", "OMPI_COMM_WORLD_RANK", "5", "MLP_ROLE_INDEX", "1"), 5, ""},
		{"mpi rank of a non-worker is ignored", envOf("MLP_ROLE", "ps", "OMPI_COMM_WORLD_RANK", "5", "MLP_ROLE_INDEX", "1"), 1, ""},
		{"not a number", envOf("MLP_ROLE_INDEX", "x"), 0, `MLP_ROLE_INDEX="x" is not an integer`},
		{"underscores, as Python's int", envOf("MLP_ROLE_INDEX", "1_0"), 10, ""},
		{"misplaced underscore", envOf("MLP_ROLE_INDEX", "-_1"), 0, `MLP_ROLE_INDEX="-_1" is not an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RoleIndex(tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || errkind.Of(err) != errkind.Value {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := SetupHeapProfile(envOf(), "/b", HeapProfile{SampleRatio: 0}); err == nil {
		t.Fatal("sample ratio 0 accepted")
	}
}
