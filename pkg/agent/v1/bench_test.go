package agentv1

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// benchGraph is a PS / dense / entry graph of sleeping processes (no ports, sets up at once).
func benchGraph(b *testing.B, dir string) (*ProcessMgr, []*ProcessNode) {
	b.Helper()
	timing := Timing{SetPollInterval: time.Millisecond, StopGrace: 5 * time.Second}
	sets := &stubSets{ps: true, dense: true}
	m := NewProcessMgr(MgrOptions{Logger: quiet})
	var nodes []*ProcessNode
	for _, tp := range []ProcessType{PS, Dense, Entry} {
		n, err := NewProcessNode(NodeSpec{Type: tp, Dir: dir, Sets: sets, DenseAlone: true, Timing: timing, Logger: quiet,
			Cmd: "sleep 30"})
		if err != nil {
			b.Fatal(err)
		}
		m.AddSubproc(n)
		nodes = append(nodes, n)
	}
	return m, nodes
}

// BenchmarkGraphStartKillAll: start three processes (the entry after one set poll), then stop
// them all with SIGTERM and reap them.
func BenchmarkGraphStartKillAll(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		m, _ := benchGraph(b, dir)
		if err := m.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		m.KillAll()
	}
}

// BenchmarkSupervisorReaction: from the SIGKILL of one child until the supervisor has stopped and
// reaped the other two (reported as react-us).
func BenchmarkSupervisorReaction(b *testing.B) {
	dir := b.TempDir()
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		m, nodes := benchGraph(b, dir)
		if err := m.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		began := time.Now()
		syscall.Kill(nodes[0].Pid(), syscall.SIGKILL)
		<-m.Done()
		total += time.Since(began)
		b.StopTimer()
		m.KillAll()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "react-us")
}
