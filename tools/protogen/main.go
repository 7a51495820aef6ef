// Command protogen regenerates gen/pb (Go code and BUILD.bazel files) from proto/.
//
//	go run ./tools/protogen          regenerate gen/pb in place
//	go run ./tools/protogen -check   exit 1 with a diff when gen/pb is out of date
//
// Without -protoc-gen-go / -protoc-gen-go-grpc the plugins are built from the versions go.mod pins.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/monolith-go/monolith/tools/protogen/protogen"
)

func main() {
	var (
		root    = flag.String("root", "", "repository root (default: the nearest parent directory with a go.mod)")
		out     = flag.String("out", "", "output directory (default: <root>/"+protogen.GenDir+")")
		check   = flag.Bool("check", false, "do not write; exit 1 and print a diff when the output directory is stale")
		protoc  = flag.String("protoc", "protoc", "protoc binary")
		genGo   = flag.String("protoc-gen-go", "", "protoc-gen-go binary (default: build the pinned version)")
		genGRPC = flag.String("protoc-gen-go-grpc", "", "protoc-gen-go-grpc binary (default: build the pinned version)")
		timeout = flag.Duration("timeout", 5*time.Minute, "time limit for each external command")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*root, *out, *check, protogen.Config{
		Protoc:          *protoc,
		ProtocGenGo:     *genGo,
		ProtocGenGoGRPC: *genGRPC,
		Timeout:         *timeout,
		Logger:          log,
	}); err != nil {
		log.Error("protogen failed", "err", err)
		os.Exit(1)
	}
}

func run(root, out string, check bool, cfg protogen.Config) error {
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		if root, err = protogen.FindRoot(wd); err != nil {
			return err
		}
	}
	if out == "" {
		out = filepath.Join(root, filepath.FromSlash(protogen.GenDir))
	}
	cfg.Root = root
	ctx := context.Background()
	if !check {
		cfg.OutDir = out
		if err := protogen.Regenerate(ctx, cfg); err != nil {
			return err
		}
		cfg.Logger.Info("regenerated", "dir", out)
		return nil
	}
	tmp, err := os.MkdirTemp("", "protogen-check-")
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer os.RemoveAll(tmp)
	cfg.OutDir = tmp
	if err := protogen.Generate(ctx, cfg); err != nil {
		return err
	}
	diff, err := protogen.Compare(out, tmp, protogen.GenDir)
	if err != nil {
		return err
	}
	if diff != "" {
		fmt.Print(diff)
		return fmt.Errorf("%s is out of date; run `go run ./tools/protogen`", out)
	}
	return nil
}
