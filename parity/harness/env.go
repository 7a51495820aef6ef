package harness

import (
	"fmt"
	"os"
	"strings"
)

// managedEnv are the variables the reference reads; the goldens unset every one not in input.env.
var managedEnv = []string{
	"SHARD_ID", "REPLICA_ID", "MY_POD_NAME", "MY_HOST_IP", "MY_HOST_IPV6", "MY_POD_IP",
	"TCE_INTERNAL_IDC", "TCE_LOGICAL_CLUSTER", "TCE_CLUSTER", "TCE_PHYSICAL_CLUSTER", "TCE_PSM",
	"PORT", "PORT2", "PORT3", "PORT4", "PORT5", "PORT6", "PORT7", "PORT8", "PORT9", "PORT10",
	"DENSE_SERVICE_IDX", "MONOLITH_HOST_SHARD_N", "MY_CPU_LIMIT",
}

// ApplyEnv makes the process environment the case's: env set, the other managed variables unset.
// The returned func restores the whole environment as it was, including anything an adapter set.
// Run calls it for every case; an adapter calls it for a step that runs in another environment.
func ApplyEnv(env map[string]string) (restore func(), err error) {
	saved := os.Environ()
	restore = func() { restoreEnviron(saved) }
	for _, k := range managedEnv {
		if _, ok := env[k]; !ok {
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			restore()
			return nil, fmt.Errorf("set env %s: %w", k, err)
		}
	}
	return restore, nil
}

func restoreEnviron(saved []string) {
	want := make(map[string]string, len(saved))
	for _, kv := range saved {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			want[k] = v
		}
	}
	for _, kv := range os.Environ() {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" {
			if _, keep := want[k]; !keep {
				os.Unsetenv(k)
			}
		}
	}
	for k, v := range want {
		if cur, ok := os.LookupEnv(k); !ok || cur != v {
			os.Setenv(k, v)
		}
	}
}
