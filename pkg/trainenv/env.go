// Package trainenv reads what a training process learns from its environment: the job's psm and
// ZooKeeper credentials (the reference's env_utils), the collective-communication topology that
// Horovod, Open MPI and BytePS publish in environment variables (hvd_lib and distribution_utils'
// get_mpi_*), and the host's own address (yarn_runtime.get_local_host).
//
// Every function takes an Env, a snapshot of the variables, instead of reading the process
// environment, so callers and tests decide what is visible; FromOS takes the process's.
package trainenv

import (
	"os"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Env is a set of environment variables, name to value.
type Env map[string]string

// FromOS returns a snapshot of the process environment.
func FromOS() Env {
	env := Env{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

// Lookup returns the variable's value and whether it is set (possibly to "").
func (e Env) Lookup(name string) (string, bool) {
	v, ok := e[name]
	return v, ok
}

// Get returns the variable's value, "" when unset.
func (e Env) Get(name string) string { return e[name] }

// Int reads name as Python's int() would, def when it is unset (os.environ.get(name, def)). A
// value int() rejects is an error of kind Value with Python's message, naming the variable.
func (e Env) Int(name string, def int) (int, error) {
	v, ok := e[name]
	if !ok {
		return def, nil
	}
	return ParseInt(name, v)
}

// ParseInt is int(value) for the variable name: Python's syntax (blanks around, one sign,
// underscores between digits); an error of kind Value naming the variable otherwise.
func ParseInt(name, value string) (int, error) {
	n, err := pyint.Atoi(value)
	if err != nil {
		return 0, errkind.New(errkind.Value, "%w (environment variable %s)", err, name)
	}
	return n, nil
}
