package resource

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Defaults of CPUUsage, the reference's cal_cpu_usage: 5 samples, one second apart.
const (
	DefaultCPUSamples  = 5
	DefaultCPUInterval = time.Second
)

// userHZ is the unit of /proc/stat times (USER_HZ, 100 on every Linux ABI Go supports).
const userHZ = 100

// CPU measures CPU time used per wall-clock time, like the reference's CPU class: each Usage call
// returns the CPU seconds spent per wall second since the previous call (or since creation).
type CPU struct {
	read func() (int64, error) // cumulative CPU time in ns
	now  func() time.Time

	mu       sync.Mutex
	lastWall time.Time
	lastCPU  int64
}

// NewCPUFromFile is the reference's CPU(cpuacct_file): file holds the cumulative CPU time in
// nanoseconds (cgroup v1 cpuacct.usage). The path is read as given, not under Root.
func (h *Host) NewCPUFromFile(file string) (*CPU, error) {
	read := func() (int64, error) {
		return (&Host{}).readInt(file)
	}
	return newCPU(read, h.now)
}

// NewCPU measures the pod's CPU time: cgroup v1 cpuacct.usage, cgroup v2 cpu.stat usage_usec, or,
// without a cgroup, the host's busy time from /proc/stat.
func (h *Host) NewCPU() (*CPU, error) {
	var read func() (int64, error)
	lines, _ := h.readCgroups() // unreadable: no cgroup
	if dir, ok := h.cgroupV1(lines, "cpuacct", "cpuacct.usage", "cpuacct", "cpu,cpuacct", "cpu"); ok {
		file := filepath.Join(dir, "cpuacct.usage")
		read = func() (int64, error) { return h.readInt(file) }
	} else if dir, ok := h.cgroupV2(lines, "cpu", "cpu.stat"); ok {
		file := filepath.Join(dir, "cpu.stat")
		read = func() (int64, error) {
			usec, err := h.statField(file, "usage_usec")
			return usec * 1000, err
		}
	} else {
		read = func() (int64, error) {
			t, err := h.CPUTimes()
			return int64(t.Busy() * 1e9 / userHZ), err
		}
	}
	return newCPU(read, h.now)
}

func newCPU(read func() (int64, error), now func() time.Time) (*CPU, error) {
	c := &CPU{read: read, now: now}
	cpu, err := read()
	if err != nil {
		return nil, fmt.Errorf("cpu clock: %w", err)
	}
	c.lastWall, c.lastCPU = now(), cpu
	return c, nil
}

// Usage is the reference's CPU.cpu_usage: CPU time over wall time since the last call (1.0 is one
// core fully busy). Two calls at the same instant are an error, as the reference divides by zero.
func (c *CPU) Usage() (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cpu, err := c.read()
	if err != nil {
		return 0, fmt.Errorf("cpu clock: %w", err)
	}
	wall := c.now()
	dw := wall.Sub(c.lastWall)
	if dw <= 0 {
		return 0, errkind.New(errkind.Value, "cpu usage: no wall time elapsed since the last sample")
	}
	usage := float64(cpu-c.lastCPU) / float64(dw.Nanoseconds())
	c.lastWall, c.lastCPU = wall, cpu
	return usage, nil
}

// CPUUsage is the reference's cal_cpu_usage: the mean of samples CPU usage figures in percent of one
// core (each rounded to 2 decimals), taken interval apart. It returns early with ctx's error.
func (h *Host) CPUUsage(ctx context.Context, samples int, interval time.Duration) (float64, error) {
	if samples <= 0 {
		return 0, errkind.New(errkind.Value, "cpu usage: samples must be positive, got %d", samples)
	}
	c, err := h.NewCPU()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for i := 0; i < samples; i++ {
		if err := h.sleep(ctx, interval); err != nil {
			return 0, fmt.Errorf("cpu usage: %w", err)
		}
		u, err := c.Usage()
		if err != nil {
			return 0, err
		}
		sum += Round(u*100, 2)
	}
	return sum / float64(samples), nil
}

// Round rounds x to n decimals like Python's round(x, n): correctly rounded from x's exact binary
// value, ties to even.
func Round(x float64, n int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
	if err != nil {
		return x
	}
	return r
}

// NumCPU is the reference's num_cpu: the pod's CPU quota in whole CPUs (quota / period, truncated
// as the reference does, but at least 1 when a quota is set). Without a quota: MY_CPU_LIMIT (the
// reference's fallback for a zero period), else the host's online CPUs.
func (h *Host) NumCPU() (int, error) {
	quota, period, limited, err := h.cpuQuota()
	if err != nil {
		return 0, fmt.Errorf("num cpu: %w", err)
	}
	if limited {
		return max(int(quota/period), 1), nil
	}
	if n, ok, err := h.envInt("MY_CPU_LIMIT"); ok || err != nil {
		return int(n), err
	}
	n, err := h.onlineCPUs()
	if err != nil {
		return 0, fmt.Errorf("num cpu: %w", err)
	}
	return n, nil
}

// cpuQuota returns the CFS quota and period in µs; limited is false when there is none.
func (h *Host) cpuQuota() (quota, period int64, limited bool, err error) {
	lines, _ := h.readCgroups() // unreadable: no cgroup
	if dir, ok := h.cgroupV1(lines, "cpu", "cpu.cfs_quota_us", "cpu", "cpu,cpuacct"); ok {
		if quota, err = h.readInt(filepath.Join(dir, "cpu.cfs_quota_us")); err != nil {
			return 0, 0, false, err
		}
		if period, err = h.readInt(filepath.Join(dir, "cpu.cfs_period_us")); err != nil {
			return 0, 0, false, err
		}
		return quota, period, quota > 0 && period > 0, nil
	}
	dir, ok := h.cgroupV2(lines, "cpu", "cpu.max")
	if !ok {
		return 0, 0, false, nil
	}
	raw, err := h.readFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return 0, 0, false, err
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		return 0, 0, false, errkind.New(errkind.Value, "%s/cpu.max: want \"quota period\", got %q", dir, raw)
	}
	if f[0] == "max" {
		return 0, 0, false, nil
	}
	q, err1 := strconv.ParseInt(f[0], 10, 64)
	p, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, errkind.New(errkind.Value, "%s/cpu.max: want \"quota period\", got %q", dir, raw)
	}
	return q, p, q > 0 && p > 0, nil
}

// onlineCPUs counts the CPUs listed in /sys/devices/system/cpu/online ("0-3,6,8-9").
func (h *Host) onlineCPUs() (int, error) {
	raw, err := h.readFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(raw)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || b < a {
			return 0, errkind.New(errkind.Value, "cpu online list: bad entry %q", part)
		}
		n += b - a + 1
	}
	return n, nil
}

// statField reads one "key value" line of a flat-keyed cgroup file such as cpu.stat.
func (h *Host) statField(file, key string) (int64, error) {
	data, err := h.readFile(file)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, errkind.New(errkind.Value, "%s: %s: not an integer: %q", file, key, f[1])
			}
			return n, nil
		}
	}
	return 0, errkind.New(errkind.NotFound, "%s: no %s", file, key)
}

// CPUTimes are the host's cumulative CPU times from the "cpu" line of /proc/stat, in USER_HZ ticks.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal, Guest, GuestNice float64
}

// CPUTimes reads the host's CPU times.
func (h *Host) CPUTimes() (CPUTimes, error) {
	data, err := h.readFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, fmt.Errorf("cpu times: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		var v [10]float64
		for i := 1; i < len(f) && i <= len(v); i++ {
			x, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return CPUTimes{}, errkind.New(errkind.Value, "cpu times: bad field %q", f[i])
			}
			v[i-1] = x
		}
		return CPUTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]}, nil
	}
	return CPUTimes{}, errkind.New(errkind.Value, "cpu times: %s has no cpu line", h.path("/proc/stat"))
}

// Total is psutil's _cpu_tot_time: every time except guest and guest_nice, which Linux already
// counts in user and nice.
func (t CPUTimes) Total() float64 {
	return t.User + t.Nice + t.System + t.Idle + t.IOWait + t.IRQ + t.SoftIRQ + t.Steal
}

// Busy is psutil's _cpu_busy_time: Total less idle and iowait.
func (t CPUTimes) Busy() float64 { return t.Total() - t.Idle - t.IOWait }

// BusyPercent is psutil's cpu_percent between two readings: busy over total time elapsed, in
// percent rounded to one decimal; 0.0 when no time elapsed.
func BusyPercent(prev, cur CPUTimes) float64 {
	d := CPUTimes{
		User: max(cur.User-prev.User, 0), Nice: max(cur.Nice-prev.Nice, 0),
		System: max(cur.System-prev.System, 0), Idle: max(cur.Idle-prev.Idle, 0),
		IOWait: max(cur.IOWait-prev.IOWait, 0), IRQ: max(cur.IRQ-prev.IRQ, 0),
		SoftIRQ: max(cur.SoftIRQ-prev.SoftIRQ, 0), Steal: max(cur.Steal-prev.Steal, 0),
	}
	all := d.Total()
	if all == 0 {
		return 0
	}
	return Round(d.Busy()/all*100, 1)
}

// CPUPercent is the reference's cal_cpu_usage_v2 (psutil.cpu_percent()): the host's busy CPU
// percentage since the previous Percent call, or since NewCPUPercent for the first one (psutil
// counts from its import).
type CPUPercent struct {
	h    *Host
	mu   sync.Mutex
	last CPUTimes
}

// NewCPUPercent takes the first reading.
func (h *Host) NewCPUPercent() (*CPUPercent, error) {
	t, err := h.CPUTimes()
	if err != nil {
		return nil, err
	}
	return &CPUPercent{h: h, last: t}, nil
}

// Percent returns the busy percentage (0..100) since the previous reading.
func (p *CPUPercent) Percent() (float64, error) {
	t, err := p.h.CPUTimes()
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pct := BusyPercent(p.last, t)
	p.last = t
	return pct, nil
}
