package fuzzseed

import (
	"reflect"
	"strings"
	"testing"
)

func TestPythonCases(t *testing.T) {
	all := PythonCases(t)
	utils := PythonCases(t, "utils")
	if len(utils) == 0 || len(all) <= len(utils) {
		t.Fatalf("%d cases in all, %d in utils", len(all), len(utils))
	}
	for _, c := range utils {
		if c.Call == "" || c.Case == "" || !strings.Contains(c.File, "/utils/") {
			t.Fatalf("case %+v", c)
		}
	}
	if got := Calls(utils, "conf_parser(file, args)"); len(got) == 0 || len(got) == len(utils) {
		t.Fatalf("Calls kept %d of %d", len(got), len(utils))
	}
	if len(GoInputs(t, "agent_service/utils/conf_parser")) == 0 {
		t.Fatal("no Go golden inputs")
	}
}

func TestStrings(t *testing.T) {
	v := map[string]any{"b": []any{"x", 1.0, map[string]any{"k": "x"}}, "a": "y", "c": nil}
	if got, want := Strings(v), []string{"a", "y", "b", "x", "k", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Strings = %q, want %q", got, want)
	}
	if got, want := Lines([]string{"zk_servers a\nx 1", "zk_servers b\nzk_servers a"}, "zk_servers "), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines = %q, want %q", got, want)
	}
	if got := Matching([]string{"/a", "b", "/c"}, func(s string) bool { return strings.HasPrefix(s, "/") }); !reflect.DeepEqual(got, []string{"/a", "/c"}) {
		t.Fatalf("Matching = %q", got)
	}
}
