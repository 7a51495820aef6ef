// Package buildinfo says which build of the project a binary is: its module version, the VCS
// revision and time it was built from (and whether the tree had local changes), and the Go
// version, as runtime/debug.ReadBuildInfo records them. Binaries print it for --version, the
// agent shows it on its status page, and Gauge exports it as monolith_build_info.
//
// `go build` stamps the VCS fields; Bazel's rules_go and `go test` do not, so they read
// "unknown" there rather than something made up.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Unknown stands for a field the build did not record.
const Unknown = "unknown"

// Info is what the build recorded about itself.
type Info struct {
	// Version is the main module's version: a tag or pseudo-version, "(devel)" for a build from
	// a source tree, Unknown without build info.
	Version string `json:"version"`
	// Revision is the VCS commit (vcs.revision), Unknown when not stamped.
	Revision string `json:"revision"`
	// Time is the commit's time (vcs.time, RFC 3339), "" when not stamped.
	Time string `json:"time,omitempty"`
	// Modified says the tree had uncommitted changes (vcs.modified).
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary ("go1.26.0").
	GoVersion string `json:"go_version"`
}

var (
	readOnce sync.Once
	read     Info
)

// Read returns this binary's build info (read once).
func Read() Info {
	readOnce.Do(func() { read = FromBuildInfo(debug.ReadBuildInfo()) })
	return read
}

// FromBuildInfo extracts Info from what debug.ReadBuildInfo returned (bi may be nil when ok is
// false: a binary built without module support).
func FromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}
	if !ok || bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Revision = s.Value
			}
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// ShortRevision is the revision's first 12 characters (what `git log --oneline` shows, and
// enough to find the commit), with "-dirty" when the tree was modified.
func (i Info) ShortRevision() string {
	r := i.Revision
	if len(r) > 12 && r != Unknown {
		r = r[:12]
	}
	if i.Modified {
		r += "-dirty"
	}
	return r
}

// String is one line for --version and the status page:
// "v1.2.3 (rev 0123456789ab-dirty, 2025-01-02T03:04:05Z, go1.26.0)".
func (i Info) String() string {
	parts := []string{"rev " + i.ShortRevision()}
	if i.Time != "" {
		parts = append(parts, i.Time)
	}
	parts = append(parts, i.GoVersion)
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}

// Version is Read().String().
func Version() string { return Read().String() }

// MetricName is the build info gauge's name.
const MetricName = "monolith_build_info"

// Gauge returns the gauge monolith_build_info{version,revision,goversion} 1 for i, the
// Prometheus convention for exporting a build's identity (join on it to label other series).
// Register it on a binary's registry: reg.MustRegister(buildinfo.Gauge(buildinfo.Read())).
func Gauge(i Info) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricName,
		Help: "Build of the binary: module version, VCS revision (-dirty when modified) and Go version; always 1.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.ShortRevision(), "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
