package resource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// tree writes files (relative path -> content) under a new temp root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

const meminfo = `MemTotal:       16000000 kB
MemFree:         2000000 kB
MemAvailable:    9000000 kB
Buffers:          100000 kB
Cached:          5000000 kB
SReclaimable:     300000 kB
`

const (
	kB  = 1024
	GiB = int64(1) << 30
)

// v1 is a cgroup v1 pod: memory and cpu,cpuacct hierarchies under the pod's path.
func v1Files() map[string]string {
	return map[string]string{
		"proc/1/cgroup": "12:cpu,cpuacct:/kubepods/pod1/c1\n11:memory:/kubepods/pod1/c1\n0::/kubepods/pod1/c1\n",
		"proc/meminfo":  meminfo,
		"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes":   "8589934592\n",
		"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.usage_in_bytes":   "3221225472\n",
		"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us":   "400000\n",
		"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us":  "100000\n",
		"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpuacct.usage":      "5000000000\n",
		"sys/devices/system/cpu/online":                                 "0-7\n",
		"proc/stat":                                                     "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\n",
		"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/unrelated/whatever": "",
	}
}

func with(base map[string]string, changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range changes {
		if v == "-" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

func v2Files() map[string]string {
	return map[string]string{
		"proc/1/cgroup":                              "0::/kubepods/pod2\n",
		"proc/meminfo":                               meminfo,
		"sys/fs/cgroup/cgroup.controllers":           "cpuset cpu io memory pids\n",
		"sys/fs/cgroup/kubepods/pod2/memory.max":     "4294967296\n",
		"sys/fs/cgroup/kubepods/pod2/memory.current": "1073741824\n",
		"sys/fs/cgroup/kubepods/pod2/cpu.max":        "250000 100000\n",
		"sys/fs/cgroup/kubepods/pod2/cpu.stat":       "usage_usec 7000000\nuser_usec 5000000\nsystem_usec 2000000\n",
		"sys/devices/system/cpu/online":              "0-3,6\n",
		"proc/stat":                                  "cpu  100 0 100 800 0 0 0 0 0 0\n",
	}
}

func noCgroupFiles() map[string]string {
	return map[string]string{
		"proc/meminfo":                  meminfo,
		"sys/devices/system/cpu/online": "0-1\n",
		"proc/stat":                     "cpu  100 0 100 800 0 0 0 0 0 0\n",
	}
}

func TestMemoryProbes(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		env       map[string]string
		total     int64
		available int64
		podAvail  int64
		cgPath    string
		noCgPath  bool
	}{
		{name: "v1 limit", files: v1Files(), total: 8 * GiB, available: 5 * GiB, podAvail: 5 * GiB, cgPath: "kubepods/pod1/c1"},
		{
			name: "v1 namespaced: files at the mount root",
			files: with(v1Files(), map[string]string{
				"proc/1/cgroup": "11:memory:/\n12:cpu,cpuacct:/\n",
				"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "-",
				"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.usage_in_bytes": "-",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "2147483648",
				"sys/fs/cgroup/memory/memory.usage_in_bytes":                  "1073741824",
			}),
			total: 2 * GiB, available: 1 * GiB, podAvail: 1 * GiB,
		},
		{
			name: "v1 path not mounted under its name: mount root",
			files: with(v1Files(), map[string]string{
				"proc/1/cgroup": "11:memory:/kubepods/podX/cY\n",
				"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "-",
				"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.usage_in_bytes": "-",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "3221225472",
				"sys/fs/cgroup/memory/memory.usage_in_bytes":                  "0",
			}),
			total: 3 * GiB, available: 3 * GiB, podAvail: 3 * GiB, cgPath: "kubepods/podX/cY",
		},
		{
			name:  "v1 unlimited falls back to meminfo",
			files: with(v1Files(), map[string]string{"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "9223372036854771712"}),
			total: 16000000 * kB, available: 9000000 * kB, podAvail: 9000000 * kB, cgPath: "kubepods/pod1/c1",
		},
		{
			name:  "v1 zero limit uses MY_MEM_LIMIT as the reference",
			files: with(v1Files(), map[string]string{"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "0"}),
			env:   map[string]string{"MY_MEM_LIMIT": "1234567"},
			total: 1234567, available: 9000000 * kB, podAvail: 9000000 * kB, cgPath: "kubepods/pod1/c1",
		},
		{name: "v2 limit", files: v2Files(), total: 4 * GiB, available: 3 * GiB, podAvail: 3 * GiB, cgPath: "kubepods/pod2"},
		{
			name:  "v2 max: MY_MEM_LIMIT",
			files: with(v2Files(), map[string]string{"sys/fs/cgroup/kubepods/pod2/memory.max": "max\n"}),
			env:   map[string]string{"MY_MEM_LIMIT": "777"},
			total: 777, available: 9000000 * kB, podAvail: 9000000 * kB, cgPath: "kubepods/pod2",
		},
		{
			name:  "v2 limit above host availability: pod figure is the host's",
			files: with(v2Files(), map[string]string{"sys/fs/cgroup/kubepods/pod2/memory.max": "68719476736\n"}),
			total: 64 * GiB, available: 64*GiB - 1*GiB, podAvail: 9000000 * kB, cgPath: "kubepods/pod2",
		},
		{
			name:  "v2 without the memory controller",
			files: with(v2Files(), map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu io\n"}),
			total: 16000000 * kB, available: 9000000 * kB, podAvail: 9000000 * kB, cgPath: "kubepods/pod2",
		},
		{name: "no cgroup", files: noCgroupFiles(), total: 16000000 * kB, available: 9000000 * kB, podAvail: 9000000 * kB, noCgPath: true},
		{
			name: "old kernel without MemAvailable",
			files: with(noCgroupFiles(), map[string]string{"proc/meminfo": strings.Replace(meminfo,
				"MemAvailable:    9000000 kB\n", "", 1)}),
			total: 16000000 * kB, available: (2000000 + 5000000 + 300000) * kB, podAvail: (2000000 + 5000000 + 300000) * kB, noCgPath: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Host{Root: tree(t, tc.files), Env: envOf(tc.env)}
			total, err := h.TotalMemory()
			if err != nil || total != tc.total {
				t.Errorf("TotalMemory = %d, %v; want %d", total, err, tc.total)
			}
			avail, err := h.AvailableMemory()
			if err != nil || avail != tc.available {
				t.Errorf("AvailableMemory = %d, %v; want %d", avail, err, tc.available)
			}
			pod, err := h.PodAvailableMemory()
			if err != nil || pod != tc.podAvail {
				t.Errorf("PodAvailableMemory = %d, %v; want %d", pod, err, tc.podAvail)
			}
			v2total, err := h.TotalMemoryV2()
			if err != nil || v2total != 16000000*kB {
				t.Errorf("TotalMemoryV2 = %d, %v", v2total, err)
			}
			p, ok := h.PodCgroupPath()
			if ok == tc.noCgPath || p != tc.cgPath {
				t.Errorf("PodCgroupPath = %q, %v; want %q, %v", p, ok, tc.cgPath, !tc.noCgPath)
			}
		})
	}
}

func TestMemoryErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		env   map[string]string
		kind  errkind.Kind
		call  func(h *Host) (int64, error)
	}{
		{name: "no meminfo", files: map[string]string{}, kind: errkind.NotFound, call: (*Host).AvailableMemoryV2},
		{name: "meminfo without MemTotal", files: map[string]string{"proc/meminfo": "MemFree: 1 kB\n"}, kind: errkind.Value, call: (*Host).TotalMemoryV2},
		{
			name:  "v1 limit not a number",
			files: with(v1Files(), map[string]string{"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "lots\n"}),
			kind:  errkind.Value, call: (*Host).TotalMemory,
		},
		{
			name:  "v1 usage missing",
			files: with(v1Files(), map[string]string{"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.usage_in_bytes": "-"}),
			kind:  errkind.NotFound, call: (*Host).AvailableMemory,
		},
		{
			name:  "MY_MEM_LIMIT not a number",
			files: with(v2Files(), map[string]string{"sys/fs/cgroup/kubepods/pod2/memory.max": "max\n"}),
			env:   map[string]string{"MY_MEM_LIMIT": "8G"},
			kind:  errkind.Value, call: (*Host).TotalMemory,
		},
		{
			name:  "v2 memory.max garbage",
			files: with(v2Files(), map[string]string{"sys/fs/cgroup/kubepods/pod2/memory.max": "12x\n"}),
			kind:  errkind.Value, call: (*Host).PodAvailableMemory,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Host{Root: tree(t, tc.files), Env: envOf(tc.env)}
			n, err := tc.call(h)
			if err == nil {
				t.Fatalf("got %d, want an error of kind %s", n, tc.kind)
			}
			if errkind.Of(err) != tc.kind {
				t.Errorf("error %q has kind %s, want %s", err, errkind.Of(err), tc.kind)
			}
		})
	}
}

func TestNumCPU(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		env   map[string]string
		want  int
		kind  errkind.Kind
	}{
		{name: "v1 quota", files: v1Files(), want: 4},
		{name: "v1 fraction truncates", files: with(v1Files(), map[string]string{"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "250000"}), want: 2},
		{name: "v1 below one CPU", files: with(v1Files(), map[string]string{"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "50000"}), want: 1},
		{name: "v1 no quota: MY_CPU_LIMIT", files: with(v1Files(), map[string]string{"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "-1"}), env: map[string]string{"MY_CPU_LIMIT": "6"}, want: 6},
		{name: "v1 no quota: online CPUs", files: with(v1Files(), map[string]string{"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "-1"}), want: 8},
		{name: "v1 zero period: MY_CPU_LIMIT", files: with(v1Files(), map[string]string{"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us": "0"}), env: map[string]string{"MY_CPU_LIMIT": "3"}, want: 3},
		{name: "v2 quota", files: v2Files(), want: 2},
		{name: "v2 max: online CPUs", files: with(v2Files(), map[string]string{"sys/fs/cgroup/kubepods/pod2/cpu.max": "max 100000\n"}), want: 5},
		{name: "no cgroup", files: noCgroupFiles(), want: 2},
		{name: "bad cpu.max", files: with(v2Files(), map[string]string{"sys/fs/cgroup/kubepods/pod2/cpu.max": "250000\n"}), kind: errkind.Value},
		{name: "bad online list", files: with(noCgroupFiles(), map[string]string{"sys/devices/system/cpu/online": "3-1"}), kind: errkind.Value},
		{name: "bad MY_CPU_LIMIT", files: noCgroupFiles(), env: map[string]string{"MY_CPU_LIMIT": "four"}, kind: errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Host{Root: tree(t, tc.files), Env: envOf(tc.env)}
			n, err := h.NumCPU()
			if tc.kind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tc.kind {
					t.Fatalf("NumCPU = %d, %v; want an error of kind %s", n, err, tc.kind)
				}
				return
			}
			if err != nil || n != tc.want {
				t.Errorf("NumCPU = %d, %v; want %d", n, err, tc.want)
			}
		})
	}
}

// fakeClock is a wall clock the test moves; sleep advances it and runs a hook, the way CPU time
// accrues while the real reference sleeps.
type fakeClock struct {
	now   time.Time
	slept []time.Duration
	hook  func()
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d)
	if c.hook != nil {
		c.hook()
	}
	return nil
}

func TestCPUUsage(t *testing.T) {
	tests := []struct {
		name string
		// file is the counter the probe should read, relative to root; write turns the busy
		// nanoseconds so far into that file's content.
		files map[string]string
		file  string
		write func(ns int64) string
	}{
		{
			name: "v1 cpuacct.usage", files: v1Files(),
			file:  "sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpuacct.usage",
			write: func(ns int64) string { return itoa(ns) + "\n" },
		},
		{
			name: "v1 separate cpuacct mount at its root",
			files: with(v1Files(), map[string]string{
				"proc/1/cgroup": "4:cpuacct:/\n1:cpu:/\n11:memory:/\n",
				"sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpuacct.usage": "-",
				"sys/fs/cgroup/cpuacct/cpuacct.usage":                      "0",
			}),
			file:  "sys/fs/cgroup/cpuacct/cpuacct.usage",
			write: func(ns int64) string { return itoa(ns) },
		},
		{
			name: "v2 cpu.stat", files: v2Files(),
			file:  "sys/fs/cgroup/kubepods/pod2/cpu.stat",
			write: func(ns int64) string { return "usage_usec " + itoa(ns/1000) + "\nuser_usec 1\n" },
		},
		{
			name: "no cgroup: /proc/stat", files: noCgroupFiles(),
			file: "proc/stat",
			// 1 tick = 10 ms; idle time is not busy.
			write: func(ns int64) string { return "cpu  " + itoa(ns/1e7) + " 0 0 99999 7 0 0 0 0 0\n" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.files)
			write := func(ns int64) {
				if err := os.WriteFile(filepath.Join(root, tc.file), []byte(tc.write(ns)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(0)
			clock := &fakeClock{now: time.Unix(1000, 0)}
			// Each second the pod burns 1.5 CPU seconds, then 0.5, 1.0, 2.0, 0.25.
			burn := []int64{1500, 500, 1000, 2000, 250}
			var used int64
			i := 0
			clock.hook = func() {
				used += burn[i] * 1e6
				i++
				write(used)
			}
			h := &Host{Root: root, Now: clock.Now, Sleep: clock.Sleep}
			got, err := h.CPUUsage(context.Background(), DefaultCPUSamples, DefaultCPUInterval)
			if err != nil {
				t.Fatal(err)
			}
			if want := (150.0 + 50 + 100 + 200 + 25) / 5; got != want {
				t.Errorf("CPUUsage = %v, want %v", got, want)
			}
			if len(clock.slept) != 5 || clock.slept[0] != time.Second {
				t.Errorf("slept %v, want 5 x 1s", clock.slept)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestCPUUsageErrors(t *testing.T) {
	root := tree(t, v1Files())
	h := &Host{Root: root}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.CPUUsage(ctx, 5, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled CPUUsage: %v, want context.Canceled", err)
	}
	if _, err := h.CPUUsage(context.Background(), 0, time.Second); errkind.Of(err) != errkind.Value {
		t.Errorf("zero samples: %v, want a Value error", err)
	}
	clock := &fakeClock{now: time.Unix(5, 0)}
	c, err := (&Host{Now: clock.Now}).NewCPUFromFile(filepath.Join(root, "sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/c1/cpuacct.usage"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Usage(); errkind.Of(err) != errkind.Value {
		t.Errorf("Usage with no wall time elapsed: %v, want a Value error (the reference divides by zero)", err)
	}
	clock.now = clock.now.Add(2 * time.Second)
	if u, err := c.Usage(); err != nil || u != 0 {
		t.Errorf("Usage with no CPU time used = %v, %v; want 0", u, err)
	}
	if _, err := (&Host{}).NewCPUFromFile(filepath.Join(root, "missing")); errkind.Of(err) != errkind.NotFound {
		t.Errorf("NewCPUFromFile(missing): %v, want NotFound", err)
	}
}

func TestBusyPercent(t *testing.T) {
	tests := []struct {
		name      string
		prev, cur CPUTimes
		want      float64
	}{
		{name: "no time elapsed", want: 0},
		{name: "half busy", prev: CPUTimes{User: 10, Idle: 10}, cur: CPUTimes{User: 20, Idle: 20}, want: 50},
		{name: "iowait is idle", prev: CPUTimes{}, cur: CPUTimes{System: 1, IOWait: 2}, want: 33.3},
		{name: "guest is inside user", prev: CPUTimes{}, cur: CPUTimes{User: 3, Idle: 1, Guest: 3}, want: 75},
		{name: "counter going back counts as 0", prev: CPUTimes{User: 50, Idle: 10}, cur: CPUTimes{User: 40, Idle: 20}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BusyPercent(tc.prev, tc.cur); got != tc.want {
				t.Errorf("BusyPercent = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRound(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		n    int
		want float64
	}{{0.125, 2, 0.12}, {0.375, 2, 0.38}, {2.675, 2, 2.67}, {33.33333, 1, 33.3}, {-1.005, 2, -1.0}, {150, 2, 150}} {
		if got := Round(tc.x, tc.n); got != tc.want {
			t.Errorf("Round(%v, %d) = %v, want %v (Python's round)", tc.x, tc.n, got, tc.want)
		}
	}
}

// The reference's resource_utils_test, on this machine.
func TestCalAvailableMemoryV2(t *testing.T) {
	var h Host
	total, err := h.TotalMemoryV2()
	if err != nil {
		t.Fatal(err)
	}
	avail, err := h.AvailableMemoryV2()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the total memory is %d, and %d is available", total, avail)
	if !(0 < avail && avail < total) {
		t.Errorf("want 0 < available (%d) < total (%d)", avail, total)
	}
	pod, err := h.PodAvailableMemory()
	if err != nil || pod <= 0 || pod > avail {
		t.Errorf("PodAvailableMemory = %d, %v; want 0 < it <= %d", pod, err, avail)
	}
}

func TestCalCPUUsageV2(t *testing.T) {
	var h Host
	p, err := h.NewCPUPercent()
	if err != nil {
		t.Fatal(err)
	}
	// Burn a little CPU so the figure covers some elapsed time.
	deadline := time.Now().Add(30 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	usage, err := p.Percent()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the cpu usage is %v", usage)
	if !(0 <= usage && usage <= 100) {
		t.Errorf("usage %v not in [0, 100]", usage)
	}
	if n, err := h.NumCPU(); err != nil || n < 1 {
		t.Errorf("NumCPU on this machine = %d, %v", n, err)
	}
}
