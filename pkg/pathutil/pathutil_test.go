package pathutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func mkdirs(t *testing.T, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindMainFrom(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root,
		"bazel/x.runfiles/__main__/monolith",
		"venv/lib/site-packages/monolith",
		"src/monolith",
		"nested/monolith/x/monolith",
		"nomarker/lib",
		"main-without-monolith/__main__/other",
	)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"bazel runfiles", "bazel/x.runfiles/__main__/monolith/path_utils.py", "bazel/x.runfiles/__main__"},
		{"pip install", "venv/lib/site-packages/monolith/path_utils.py", "venv/lib/site-packages"},
		{"source checkout", "src/monolith/path_utils.py", "src"},
		// rfind: the last "/monolith/" decides.
		{"nested", "nested/monolith/x/monolith/path_utils.py", "nested/monolith/x"},
		{"no marker", "nomarker/lib/path_utils.py", ""},
		// The first marker found decides even when its directory has no monolith/.
		{"marker without monolith dir", "main-without-monolith/__main__/other/monolith/f.py", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(root, tc.path)
			got, err := FindMainFrom(p)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), p) || errkind.Of(err) != errkind.Value {
					t.Fatalf("got %q, %v; want a Value error naming %s", got, err, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tc.want); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

func envOf(kv ...string) Env {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFinder(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, root, "rf/monolith_go", "rf/other_ws", "bin/tool.runfiles/monolith_go", "co/monolith/bin", "mod/a/b")
	if err := os.WriteFile(filepath.Join(root, "mod", "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := func(p string) func() (string, error) {
		return func() (string, error) { return filepath.Join(root, p), nil }
	}
	wd := func(p string) func() (string, error) {
		return func() (string, error) { return filepath.Join(root, p), nil }
	}
	noExe := func() (string, error) { return "", errors.New("no executable") }
	for _, tc := range []struct {
		name string
		f    Finder
		want string
	}{
		{"RUNFILES_DIR", Finder{Env: envOf("RUNFILES_DIR", filepath.Join(root, "rf")), Executable: exe("bin/tool"), Getwd: wd("mod")}, "rf/monolith_go"},
		{"TEST_SRCDIR and TEST_WORKSPACE", Finder{Env: envOf("TEST_SRCDIR", filepath.Join(root, "rf"), "TEST_WORKSPACE", "other_ws"), Executable: exe("bin/tool"), Getwd: wd("mod")}, "rf/other_ws"},
		{"runfiles next to the executable", Finder{Env: envOf("RUNFILES_DIR", filepath.Join(root, "missing")), Executable: exe("bin/tool"), Getwd: wd("mod")}, "bin/tool.runfiles/monolith_go"},
		{"markers in the executable path", Finder{Env: envOf(), Executable: exe("co/monolith/bin/tool"), Getwd: wd("mod")}, "co"},
		{"module root", Finder{Env: envOf(), Executable: noExe, Getwd: wd("mod/a/b")}, "mod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f.FindMain()
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, tc.want); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	t.Run("nothing found", func(t *testing.T) {
		f := Finder{Env: envOf("RUNFILES_DIR", filepath.Join(root, "none")), Executable: noExe, Getwd: wd("rf")}
		_, err := f.FindMain()
		if err == nil || errkind.Of(err) != errkind.Value {
			t.Fatalf("error %v, want a Value error", err)
		}
		for _, want := range []string{filepath.Join(root, "none", "monolith_go"), filepath.Join(root, "go.mod"), "no executable"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
	})
	t.Run("libops path", func(t *testing.T) {
		f := Finder{Env: envOf(), Executable: noExe, Getwd: wd("mod/a")}
		for name, want := range map[string]string{
			"lib/x.so":    filepath.Join(root, "mod") + "/lib/x.so",
			"../g/l.so":   filepath.Join(root, "mod") + "/../g/l.so",
			"/abs/lib.so": "/abs/lib.so",
		} {
			if got, err := f.GetLibopsPath(name); err != nil || got != want {
				t.Errorf("%s: got %q, %v; want %q", name, got, err, want)
			}
		}
	})
}

// TestFindMainHere ports utils_test's testFindMain / testGetLibopsPath for a Go test binary: under
// Bazel the base directory is the workspace's runfiles directory, under go test the module root;
// either way this test's own source is found through GetLibopsPath.
func TestFindMainHere(t *testing.T) {
	base, err := FindMain()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := os.LookupEnv("TEST_SRCDIR"); ok && filepath.Base(base) != Workspace {
		t.Errorf("under Bazel the base is %s, want a directory named %s", base, Workspace)
	}
	p, err := GetLibopsPath("pkg/pathutil/pathutil_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("libops path of this test: %v", err)
	}
}

func TestJoin(t *testing.T) {
	// Expected values are Python's os.path.join outputs.
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"a", "b"}, "a/b"}, {[]string{"a/", "b"}, "a/b"}, {[]string{"", "b"}, "b"},
		{[]string{"a", "/b"}, "/b"}, {[]string{"a", ""}, "a/"}, {[]string{"hdfs://ns/p", "x"}, "hdfs://ns/p/x"},
		{[]string{"/", "bzid", "service", "m"}, "/bzid/service/m"}, {[]string{"a", "b", "/c", "d"}, "/c/d"},
		{[]string{"a//", "b/../c"}, "a//b/../c"},
	}
	for _, tc := range tests {
		if got := Join(tc.parts...); got != tc.want {
			t.Errorf("Join(%q) = %q, want %q", tc.parts, got, tc.want)
		}
	}
}

func TestDirname(t *testing.T) {
	for in, want := range map[string]string{"agent.conf": "", "/a/b/agent.conf": "/a/b", "/agent.conf": "/",
		"a//agent.conf": "a", "//x": "//"} {
		if got := Dirname(in); got != want {
			t.Errorf("Dirname(%q) = %q, want %q", in, got, want)
		}
	}
}
