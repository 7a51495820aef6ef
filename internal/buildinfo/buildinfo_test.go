package buildinfo

import (
	"maps"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFromBuildInfo(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/monolith-go/monolith", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name    string
		bi      *debug.BuildInfo
		ok      bool
		want    Info
		str     string
		version string
	}{
		{"stamped go build", stamped, true,
			Info{Version: "v1.2.3", Revision: rev, Time: "2025-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.0"},
			"v1.2.3 (rev 0123456789ab-dirty, 2025-01-02T03:04:05Z, go1.26.0)", "v1.2.3"},
		{"clean tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true,
			Info{Version: "(devel)", Revision: "abc", GoVersion: "go1.26.0"}, "(devel) (rev abc, go1.26.0)", "(devel)"},
		{"not stamped (bazel, go test)", &debug.BuildInfo{GoVersion: "go1.26.0"}, true,
			Info{Version: Unknown, Revision: Unknown, GoVersion: "go1.26.0"}, "unknown (rev unknown, go1.26.0)", Unknown},
		{"no build info", nil, false,
			Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}, "unknown (rev unknown, " + runtime.Version() + ")", Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromBuildInfo(tc.bi, tc.ok)
			if got != tc.want {
				t.Errorf("FromBuildInfo = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String = %q, want %q", s, tc.str)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(Gauge(got))
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if len(mfs) != 1 || mfs[0].GetName() != MetricName || len(mfs[0].GetMetric()) != 1 {
				t.Fatalf("gathered %v", mfs)
			}
			m := mfs[0].GetMetric()[0]
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			wantLabels := map[string]string{"version": tc.version, "revision": got.ShortRevision(), "goversion": got.GoVersion}
			if !maps.Equal(labels, wantLabels) || m.GetGauge().GetValue() != 1 {
				t.Errorf("%s = %v %v, want %v 1", MetricName, labels, m.GetGauge().GetValue(), wantLabels)
			}
		})
	}
}

// TestRead: this test binary's own build info reads, and Version is its one line.
func TestRead(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Revision == "" {
		t.Errorf("Read = %+v", i)
	}
	if Version() != i.String() || !strings.HasSuffix(Version(), runtime.Version()+")") {
		t.Errorf("Version = %q", Version())
	}
}
