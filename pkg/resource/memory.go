package resource

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// unlimitedV1 is where cgroup v1 memory limits mean "no limit": the kernel writes PAGE_COUNTER_MAX
// pages (0x7FFFFFFFFFFFF000 with 4 KiB pages); anything this large is not a real limit.
const unlimitedV1 = int64(1) << 62

// memCgroup returns the pod's memory limit and usage in bytes; limited is false when no cgroup
// limits memory (no cgroup, v2 "max", v1 "unlimited" or 0).
func (h *Host) memCgroup() (limit, usage int64, limited bool, err error) {
	lines, _ := h.readCgroups() // unreadable: no cgroup
	if dir, ok := h.cgroupV1(lines, "memory", "memory.limit_in_bytes", "memory"); ok {
		if limit, err = h.readInt(filepath.Join(dir, "memory.limit_in_bytes")); err != nil {
			return 0, 0, false, fmt.Errorf("memory limit: %w", err)
		}
		if limit <= 0 || limit >= unlimitedV1 {
			return 0, 0, false, nil
		}
		if usage, err = h.readInt(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
			return 0, 0, false, fmt.Errorf("memory usage: %w", err)
		}
		return limit, usage, true, nil
	}
	dir, ok := h.cgroupV2(lines, "memory", "memory.max")
	if !ok {
		return 0, 0, false, nil
	}
	raw, err := h.readFile(filepath.Join(dir, "memory.max"))
	if err != nil {
		return 0, 0, false, fmt.Errorf("memory limit: %w", err)
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return 0, 0, false, nil
	}
	if limit, err = strconv.ParseInt(s, 10, 64); err != nil {
		return 0, 0, false, errkind.New(errkind.Value, "memory limit: %s: not an integer: %q", dir, s)
	}
	if limit <= 0 {
		return 0, 0, false, nil
	}
	if usage, err = h.readInt(filepath.Join(dir, "memory.current")); err != nil {
		return 0, 0, false, fmt.Errorf("memory usage: %w", err)
	}
	return limit, usage, true, nil
}

// TotalMemory is the reference's total_memory: the pod's cgroup memory limit in bytes; without a
// limit, MY_MEM_LIMIT (the reference's fallback for a 0 limit), else the host's MemTotal.
func (h *Host) TotalMemory() (int64, error) {
	limit, _, limited, err := h.memCgroup()
	if err != nil {
		return 0, fmt.Errorf("total memory: %w", err)
	}
	if limited {
		return limit, nil
	}
	if n, ok, err := h.envInt("MY_MEM_LIMIT"); ok || err != nil {
		return n, err
	}
	return h.TotalMemoryV2()
}

// TotalMemoryV2 is the reference's total_memory_v2 (psutil.virtual_memory().total): the host's
// MemTotal in bytes.
func (h *Host) TotalMemoryV2() (int64, error) {
	m, err := h.meminfo()
	if err != nil {
		return 0, fmt.Errorf("total memory: %w", err)
	}
	return m["MemTotal"], nil
}

// AvailableMemory is the reference's cal_available_memory: the pod's cgroup limit minus its usage
// in bytes (usage counts page cache, as in the reference); without a limit, AvailableMemoryV2.
func (h *Host) AvailableMemory() (int64, error) {
	limit, usage, limited, err := h.memCgroup()
	if err != nil {
		return 0, fmt.Errorf("available memory: %w", err)
	}
	if !limited {
		return h.AvailableMemoryV2()
	}
	return limit - usage, nil
}

// AvailableMemoryV2 is the reference's cal_available_memory_v2 (psutil.virtual_memory().available):
// the host's MemAvailable in bytes, clamped as psutil does. Kernels before 3.14 have no
// MemAvailable; then it is MemFree + Cached + SReclaimable, psutil's own fallback when it cannot read
// /proc/zoneinfo.
func (h *Host) AvailableMemoryV2() (int64, error) {
	m, err := h.meminfo()
	if err != nil {
		return 0, fmt.Errorf("available memory: %w", err)
	}
	avail, ok := m["MemAvailable"]
	if !ok {
		avail = m["MemFree"] + m["Cached"] + m["SReclaimable"]
	}
	if avail < 0 {
		avail = 0
	}
	if total := m["MemTotal"]; avail > total {
		avail = m["MemFree"]
	}
	return avail, nil
}

// PodAvailableMemory is what this process can still use: AvailableMemoryV2 (the host's figure the
// reference reports), bounded by the headroom under the pod's cgroup limit when one is set. Inside
// a container /proc/meminfo describes the whole host, so the host figure alone overstates it.
func (h *Host) PodAvailableMemory() (int64, error) {
	host, err := h.AvailableMemoryV2()
	if err != nil {
		return 0, err
	}
	limit, usage, limited, err := h.memCgroup()
	if err != nil {
		return 0, fmt.Errorf("available memory: %w", err)
	}
	if limited && limit-usage < host {
		return max(limit-usage, 0), nil
	}
	return host, nil
}
