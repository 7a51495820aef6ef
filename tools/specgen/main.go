// Command specgen validates specs/**.yaml and writes the generated Go code and BUILD files under
// gen/spec/. Run it from anywhere inside the repository:
//
//	go run ./tools/specgen          regenerate gen/spec
//	go run ./tools/specgen -check   exit 1 listing stale files (what the staleness test does)
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/tools/specgen/gen"
	"github.com/monolith-go/monolith/tools/specgen/spec"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("specgen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	check := fl.Bool("check", false, "only report whether gen/spec is up to date")
	rootFlag := fl.String("root", "", "repository root (default: found from the working directory)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	root := *rootFlag
	if root == "" {
		var err error
		if root, err = FindRoot(); err != nil {
			fmt.Fprintln(stderr, "specgen:", err)
			return 2
		}
	}
	specs, err := spec.LoadDir(filepath.Join(root, "specs"))
	if err != nil {
		fmt.Fprintln(stderr, "specgen:", err)
		return 1
	}
	files, err := gen.Generate(root, specs)
	if err != nil {
		fmt.Fprintln(stderr, "specgen:", err)
		return 1
	}
	if *check {
		d, err := gen.Diff(root, files)
		if err != nil {
			fmt.Fprintln(stderr, "specgen:", err)
			return 1
		}
		if d != "" {
			fmt.Fprintf(stderr, "gen/spec is stale; run go run ./tools/specgen\n%s", d)
			return 1
		}
		fmt.Fprintf(stdout, "gen/spec is up to date (%d specs, %d files)\n", len(specs), len(files))
		return 0
	}
	if err := gen.Write(root, files); err != nil {
		fmt.Fprintln(stderr, "specgen:", err)
		return 1
	}
	fmt.Fprintf(stdout, "specgen: wrote %d files from %d specs into %s\n", len(files), len(specs), gen.OutDir)
	return 0
}

// FindRoot returns BUILD_WORKSPACE_DIRECTORY (bazel run) or the nearest parent holding go.mod.
func FindRoot() (string, error) {
	if ws := os.Getenv("BUILD_WORKSPACE_DIRECTORY"); ws != "" {
		return ws, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
