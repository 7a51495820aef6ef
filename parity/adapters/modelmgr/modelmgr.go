// Package modelmgr adapts pkg/modelmgr to the parity cases of monolith/agent_service/model_manager.py.
package modelmgr

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/monolith-go/monolith/parity/harness"
	"github.com/monolith-go/monolith/pkg/modelmgr"
)

// Call is the golden call name: rounds of loop_once, remove_read_lock and remove_old_file on a
// fresh source tree, with _remain_version_num=2.
const Call = "ModelManager(model_name, src, dst, use_metrics=False).loop_once (+remove_read_lock, remove_old_file; _remain_version_num=2)"

// dstPlaceholder is how the goldens write the temporary receive path.
const dstPlaceholder = "<dst>"

// Register adds the model_manager.py calls.
func Register(r *harness.Registry) {
	r.Register(Call, loopOnceRounds)
}

type input struct {
	model          string
	srcFiles       []string
	rounds         [][]string
	dstPreexisting []string
}

func readInput(in harness.Input) (input, error) {
	var v input
	var err error
	if v.model, err = in.Str("model_name"); err != nil {
		return v, err
	}
	if err := in.Decode("src_files", &v.srcFiles); err != nil {
		return v, err
	}
	if err := in.Decode("rounds_added_src_files", &v.rounds); err != nil {
		return v, err
	}
	if in.Has("dst_preexisting") {
		if err := in.Decode("dst_preexisting", &v.dstPreexisting); err != nil {
			return v, err
		}
	}
	return v, nil
}

// loopOnceRounds replays the scripted rounds: before each, the round's files are added to the
// source; then loop_once, remove_read_lock and remove_old_file run, and the trees and the manager's
// bookkeeping are recorded.
func loopOnceRounds(c *harness.Ctx, in harness.Input) (any, error) {
	v, err := readInput(in)
	if err != nil {
		return nil, err
	}
	src := filepath.Join(c.TempDir(), "src")
	dst := filepath.Join(c.TempDir(), "dst")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := createFiles(src, v.srcFiles); err != nil {
		return nil, err
	}
	if err := createFiles(dst, v.dstPreexisting); err != nil {
		return nil, err
	}
	m, err := modelmgr.New(modelmgr.Config{
		ModelName:        v.model,
		SourcePath:       src,
		ReceivePath:      dst,
		RemainVersionNum: 2,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	out := make([]map[string]any, 0, len(v.rounds))
	for _, added := range v.rounds {
		if err := createFiles(src, added); err != nil {
			return nil, err
		}
		round := map[string]any{"added_src": nonNil(added)}
		if round["src_tree"], err = tree(src); err != nil {
			return nil, err
		}
		round["loop_once"] = m.LoopOnce(ctx) == nil
		if round["src_tree_after_loop"], err = tree(src); err != nil {
			return nil, err
		}
		round["remove_read_lock"] = "ok"
		if err := m.RemoveReadLocks(); err != nil {
			round["remove_read_lock"] = harness.ErrorValue(err)
		}
		if err := m.RemoveOldFiles(); err != nil {
			return nil, err
		}
		if round["dst_tree"], err = tree(dst); err != nil {
			return nil, err
		}
		round["models"] = models(m, dst)
		latest := map[string]any{}
		for name, l := range m.LatestVersions() {
			latest[name] = l.Version
		}
		round["latest_versions"] = latest
		out = append(out, round)
	}
	return out, nil
}

// models is the manager's _models as the goldens write it: model -> [[version, [paths]]], the
// receive path written as <dst>.
func models(m *modelmgr.Manager, dst string) map[string]any {
	out := map[string]any{}
	for name, versions := range m.Models() {
		vs := make([]any, 0, len(versions))
		for _, v := range versions {
			paths := make([]string, len(v.Paths))
			for i, p := range v.Paths {
				paths[i] = dstPlaceholder + strings.TrimPrefix(p, dst)
			}
			vs = append(vs, []any{v.Version, paths})
		}
		out[name] = vs
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// createFiles creates each relative path under root (empty files; a trailing "/" makes a
// directory), with its parent directories.
func createFiles(root string, paths []string) error {
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// tree lists root's contents as sorted slash-separated relative paths, directories ending in "/".
func tree(root string) ([]string, error) {
	out := []string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	sort.Strings(out)
	return out, nil
}
