package runconfig

import (
	"reflect"
	"sync"

	runnerutilsspec "github.com/monolith-go/monolith/gen/spec/native_training/runner_utils"
)

// RunnerFlags are the training command's flags (kong): one per documented RunnerConfig field, as
// gflags_utils.extract_flags defines them. Optional flags are pointers, nil unless given.
type RunnerFlags = runnerutilsspec.RunnerFlags

var flagNames = sync.OnceValue(func() []string {
	t := reflect.TypeOf(RunnerFlags{})
	out := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if name := t.Field(i).Tag.Get("name"); name != "" {
			out = append(out, name)
		}
	}
	return out
})

// FlagNames lists the flags of RunnerFlags, in field order.
func FlagNames() []string { return append([]string(nil), flagNames()...) }

// FlagValues returns the values of parsed flags by flag name, for Sources.Flags: every flag with a
// default (an unchanged one is ignored by the merge), and the optional flags that were given.
func FlagValues(f *RunnerFlags) map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(f).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name := t.Field(i).Tag.Get("name")
		if name == "" {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		out[name] = fv.Interface()
	}
	return out
}
