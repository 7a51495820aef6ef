// Package resource ports monolith/agent_service/resource_utils.py: memory and CPU figures of the
// process's container (cgroup v1 or v2, falling back to /proc when no limit is set) and the size of
// exported models (cal_model_info_v2), read from local files.
//
// Every probe reads through Host.Root, so tests run them on fixture trees; the zero Host reads the
// real machine.
package resource

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyint"
)

// Host reads resource figures of one machine. The zero value reads the real machine.
type Host struct {
	// Root is prepended to every absolute path read (/proc/..., /sys/...); "" means "/".
	Root string
	// Env looks up environment variables (MY_MEM_LIMIT, MY_CPU_LIMIT); nil means os.LookupEnv.
	Env func(key string) (string, bool)
	// Now is the wall clock used for CPU usage; nil means time.Now.
	Now func() time.Time
	// Sleep waits between CPU samples; nil means a timer that ends early when ctx is done.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (h *Host) path(p string) string {
	if h.Root == "" {
		return p
	}
	return filepath.Join(h.Root, p)
}

func (h *Host) env(key string) (string, bool) {
	if h.Env != nil {
		return h.Env(key)
	}
	return os.LookupEnv(key)
}

func (h *Host) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Host) sleep(ctx context.Context, d time.Duration) error {
	if h.Sleep != nil {
		return h.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (h *Host) readFile(p string) ([]byte, error) {
	data, err := os.ReadFile(h.path(p))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errkind.Wrap(errkind.NotFound, err)
		}
		return nil, errkind.Wrap(errkind.Runtime, err)
	}
	return data, nil
}

// readInt reads a file holding one integer; like the reference, the last non-empty line counts.
func (h *Host) readInt(p string) (int64, error) {
	data, err := h.readFile(p)
	if err != nil {
		return 0, err
	}
	var last string
	for _, line := range strings.Split(string(data), "\n") {
		if s := strings.TrimSpace(line); s != "" {
			last = s
		}
	}
	n, err := strconv.ParseInt(last, 10, 64)
	if err != nil {
		return 0, errkind.New(errkind.Value, "%s: not an integer: %q", p, last)
	}
	return n, nil
}

// envInt reads an integer environment variable; ok is false when it is unset.
func (h *Host) envInt(key string) (n int64, ok bool, err error) {
	v, set := h.env(key)
	if !set {
		return 0, false, nil
	}
	n, err = pyint.Parse(v)
	if err != nil {
		return 0, true, errkind.New(errkind.Value, "%s=%q is not an integer", key, v)
	}
	return n, true, nil
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupLine is one line of /proc/<pid>/cgroup: "hierarchy-id:controller,list:/path".
type cgroupLine struct {
	controllers []string
	path        string
}

// readCgroups parses /proc/1/cgroup, the pod's init process as in the reference (the agent's own
// cgroup may be a child of the pod's).
func (h *Host) readCgroups() ([]cgroupLine, error) {
	data, err := h.readFile("/proc/1/cgroup")
	if err != nil {
		return nil, err
	}
	var out []cgroupLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(strings.TrimSpace(sc.Text()), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var ctrls []string
		if parts[1] != "" {
			ctrls = strings.Split(parts[1], ",")
		}
		out = append(out, cgroupLine{controllers: ctrls, path: parts[2]})
	}
	return out, nil
}

// PodCgroupPath is the reference's _get_pod_cgroup_path: the cgroup path of the memory controller in
// /proc/1/cgroup without its slashes (cgroup v1), else the unified hierarchy's path (cgroup v2).
// ok is false when neither is listed or the file cannot be read (the reference's None).
func (h *Host) PodCgroupPath() (path string, ok bool) {
	lines, err := h.readCgroups()
	if err != nil {
		return "", false
	}
	for _, l := range lines {
		if slices.Contains(l.controllers, "memory") {
			return strings.Trim(l.path, "/"), true
		}
	}
	for _, l := range lines {
		if len(l.controllers) == 0 {
			return strings.Trim(l.path, "/"), true
		}
	}
	return "", false
}

func (h *Host) hasFile(dir, file string) bool {
	_, err := os.Stat(h.path(filepath.Join(dir, file)))
	return err == nil
}

// cgroupV1 locates the cgroup v1 directory holding file for controller (the path before Root is
// applied) among the lines of readCgroups, which a probe reads once for both hierarchies. mounts
// are the directory names the controller's hierarchy is conventionally mounted under. A container
// without a cgroup namespace sees its full path in /proc/1/cgroup but its own cgroup at the mount
// root, so the mount root is tried when the full path has no such file.
func (h *Host) cgroupV1(lines []cgroupLine, controller, file string, mounts ...string) (string, bool) {
	for _, l := range lines {
		if !slices.Contains(l.controllers, controller) {
			continue
		}
		for _, m := range mounts {
			for _, dir := range []string{filepath.Join(cgroupRoot, m, l.path), filepath.Join(cgroupRoot, m)} {
				if h.hasFile(dir, file) {
					return dir, true
				}
			}
		}
	}
	return "", false
}

// cgroupV2 locates the unified (v2) cgroup directory holding file, when controller is enabled
// there; the mount root is tried as in cgroupV1.
func (h *Host) cgroupV2(lines []cgroupLine, controller, file string) (string, bool) {
	if len(lines) == 0 {
		return "", false
	}
	ctrls, err := h.readFile(cgroupRoot + "/cgroup.controllers")
	if err != nil || !slices.Contains(strings.Fields(string(ctrls)), controller) {
		return "", false
	}
	for _, l := range lines {
		if len(l.controllers) != 0 {
			continue
		}
		for _, dir := range []string{filepath.Join(cgroupRoot, l.path), cgroupRoot} {
			if h.hasFile(dir, file) {
				return dir, true
			}
		}
	}
	return "", false
}

// meminfo reads /proc/meminfo in bytes, keyed by field name without the colon.
func (h *Host) meminfo() (map[string]int64, error) {
	data, err := h.readFile("/proc/meminfo")
	if err != nil {
		return nil, fmt.Errorf("meminfo: %w", err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) >= 3 && f[2] == "kB" {
			n *= 1024
		}
		out[strings.TrimSuffix(f[0], ":")] = n
	}
	if _, ok := out["MemTotal"]; !ok {
		return nil, errkind.New(errkind.Value, "meminfo: %s has no MemTotal", h.path("/proc/meminfo"))
	}
	return out, nil
}
