package protogen

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Under Bazel the BUILD file passes the vendored plugins as $(rootpath ...) labels, which are
// relative to the repository root of the runfiles tree. Under `go test` they are left empty and the
// plugins are built from the pinned versions.
var (
	protocGenGo     = flag.String("protoc-gen-go", "", "protoc-gen-go binary; a relative path is taken from the repository root")
	protocGenGoGRPC = flag.String("protoc-gen-go-grpc", "", "protoc-gen-go-grpc binary; a relative path is taken from the repository root")
)

func fromRoot(root, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, filepath.FromSlash(p))
}

// TestGenPBUpToDate regenerates gen/pb into a temporary directory and fails, with a diff, when the
// checked-in tree differs.
func TestGenPBUpToDate(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := t.TempDir()
	t.Logf("root %s; plugins %q %q (empty: built from go.mod's pins)", root, *protocGenGo, *protocGenGoGRPC)
	err = Generate(ctx, Config{
		Root:            root,
		OutDir:          out,
		ProtocGenGo:     fromRoot(root, *protocGenGo),
		ProtocGenGoGRPC: fromRoot(root, *protocGenGoGRPC),
	})
	if err != nil {
		t.Fatalf("regenerate: %v", err)
	}
	diff, err := Compare(filepath.Join(root, filepath.FromSlash(GenDir)), out, GenDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Errorf("%s is stale; run `go run ./tools/protogen` and commit the result:\n%s", GenDir, diff)
	}
}

func TestImportLabel(t *testing.T) {
	const module = "github.com/monolith-go/monolith"
	for _, tc := range []struct{ in, want string }{
		{"context", ""},
		{"encoding/json", ""},
		{"google.golang.org/grpc", "//vendor/google.golang.org/grpc"},
		{"google.golang.org/protobuf/runtime/protoimpl", "//vendor/google.golang.org/protobuf/runtime/protoimpl"},
		{module + "/gen/pb/a/b", "//gen/pb/a/b"},
		{module + "x/y", "//vendor/" + module + "x/y"},
	} {
		if got := ImportLabel(tc.in, module); got != tc.want {
			t.Errorf("ImportLabel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUnifiedDiff(t *testing.T) {
	a := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n"
	b := strings.Replace(strings.Replace(a, "2\n", "two\n", 1), "14\n", "", 1) + "16"
	want := `--- a
+++ b
@@ -1,5 +1,5 @@
 1
-2
+two
 3
 4
 5
@@ -11,5 +11,5 @@
 11
 12
 13
-14
 15
+16
\ No newline at end of file
`
	if got := UnifiedDiff("a", "b", a, b); got != want {
		t.Errorf("UnifiedDiff:\n%s\nwant:\n%s", got, want)
	}
	if got := UnifiedDiff("a", "b", a, a); got != "" {
		t.Errorf("UnifiedDiff of equal texts = %q, want \"\"", got)
	}
}

func TestCompare(t *testing.T) {
	have, want := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(have, "same/x.go", "x\n")
	write(want, "same/x.go", "x\n")
	write(have, "d/stale.go", "old\n")
	write(want, "d/stale.go", "new\n")
	write(have, "d/extra.go", "e\n")
	write(want, "d/missing.go", "m\n")
	got, err := Compare(have, want, "gen/pb")
	if err != nil {
		t.Fatal(err)
	}
	wantDiff := `extra: gen/pb/d/extra.go (checked in, but no longer generated)
missing: gen/pb/d/missing.go (generated, but not checked in)
stale: gen/pb/d/stale.go
--- gen/pb/d/stale.go (checked in)
+++ gen/pb/d/stale.go (regenerated)
@@ -1 +1 @@
-old
+new
`
	if got != wantDiff {
		t.Errorf("Compare:\n%s\nwant:\n%s", got, wantDiff)
	}
	if got, err := Compare(want, want, "gen/pb"); err != nil || got != "" {
		t.Errorf("Compare of a tree with itself = %q, %v", got, err)
	}
}
