// Package memprof prepares the environment that turns on tcmalloc and its heap profiler for a
// child process (monolith/common/python/mem_profiling.py). The reference edits its own
// os.environ; here the changes are returned as variables, to be put in a child's environment
// (os/exec.Cmd.Env) or applied by the caller, so nothing process-wide changes behind its back.
package memprof

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// TCMallocLib is the library enable_tcmalloc preloads, relative to the base directory.
const TCMallocLib = "../gperftools/libtcmalloc/lib/libtcmalloc.so"

// Env reads environment variables (os.LookupEnv in production).
type Env func(string) (string, bool)

// Var is one environment variable to set.
type Var struct{ Name, Value string }

// String is NAME=value, the form os/exec.Cmd.Env takes.
func (v Var) String() string { return v.Name + "=" + v.Value }

// EnableTCMalloc is enable_tcmalloc: LD_PRELOAD with the tcmalloc library (under base, the
// FindMain directory) appended. As in the reference, an unset LD_PRELOAD gives a leading ":".
func EnableTCMalloc(env Env, base string) Var {
	cur, _ := env("LD_PRELOAD")
	return Var{"LD_PRELOAD", cur + ":" + base + "/" + TCMallocLib}
}

// HeapProfile are setup_heap_profile's arguments.
type HeapProfile struct {
	InuseInterval      int64   // bytes; default 104857600
	AllocationInterval int64   // bytes; default 1073741824
	TimeInterval       int64   // seconds; default 0
	SampleRatio        float64 // default 1.0; must be in (0, 1]
	MMap               bool    // default false
	// Dir is where the profiles go (heap_pro_file); empty means the base directory.
	Dir string
}

// DefaultHeapProfile has the reference's defaults.
func DefaultHeapProfile() HeapProfile {
	return HeapProfile{InuseInterval: 104857600, AllocationInterval: 1073741824, SampleRatio: 1.0}
}

// RoleIndex is MLPEnv().index: the MPI rank (OMPI_COMM_WORLD_RANK) for an MPI worker
// (MLP_ROLE WORKER), else MLP_ROLE_INDEX, else 0. Values are stripped of blanks and quotes as
// MLPEnv does.
func RoleIndex(env Env) (int, error) {
	get := func(name string) string {
		v, _ := env(name)
		return strings.Trim(strings.TrimSpace(v), `"'`)
	}
	name := "MLP_ROLE_INDEX"
	if _, mpi := env("OMPI_COMM_WORLD_RANK"); mpi && strings.ToUpper(get("MLP_ROLE")) == "WORKER" {
		name = "OMPI_COMM_WORLD_RANK"
	}
	v := get(name)
	if v == "" {
		return 0, nil
	}
	i, err := pyint.Atoi(v)
	if err != nil {
		return 0, errkind.New(errkind.Value, "environment %s=%q is not an integer", name, v)
	}
	return i, nil
}

// SetupHeapProfile is setup_heap_profile: tcmalloc preloaded and the gperftools heap profiler
// variables, byte for byte as the reference writes them (intervals divided by the sample ratio
// and truncated, the ratio as Python's str of a float, the mmap flag in lower case). base is the
// FindMain directory.
func SetupHeapProfile(env Env, base string, p HeapProfile) ([]Var, error) {
	if !(p.SampleRatio > 0 && p.SampleRatio <= 1) {
		return nil, errkind.New(errkind.Value, "heap profile: sample ratio %v is not in (0, 1]", p.SampleRatio)
	}
	idx, err := RoleIndex(env)
	if err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	dir := p.Dir
	if dir == "" {
		dir = base
	}
	return []Var{
		EnableTCMalloc(env, base),
		{"HEAPPROFILE", pathutil.Join(dir, fmt.Sprintf("hprof_%d", idx))},
		{"HEAP_PROFILE_INUSE_INTERVAL", strconv.FormatInt(int64(float64(p.InuseInterval)/p.SampleRatio), 10)},
		{"HEAP_PROFILE_ALLOCATION_INTERVAL", strconv.FormatInt(int64(float64(p.AllocationInterval)/p.SampleRatio), 10)},
		{"HEAP_PROFILE_SAMPLE_RATIO", pyfmt.Float(p.SampleRatio)},
		{"HEAP_PROFILE_TIME_INTERVAL", strconv.FormatInt(p.TimeInterval, 10)},
		{"HEAP_PROFILE_MMAP", strconv.FormatBool(p.MMap)},
	}, nil
}
