package modelserver

import (
	"path/filepath"
	"slices"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/modelconfig"
)

// aspired picks, from the version directories found under a model's base path (sorted by number),
// the versions its policy serves, by number, with their directories:
//   - latest N: the N newest of those that have not failed to load (failed: under the model's
//     current config), so a newer version that fails leaves the newest that loads aspired, never
//     none (N 0 is 1, as TF Serving; TF Serving's latest policy keeps aspiring the failed one);
//   - all: every one;
//   - specific: the listed ones present (missing lists those absent);
//   - no policy: TF Serving's default, latest 1.
func aspired(cfg *servingconfig.ModelConfig, found []modelconfig.VersionDir, failed map[int64]bool) (want map[int64]string, missing []int64) {
	base := cfg.GetBasePath()
	want = map[int64]string{}
	add := func(v modelconfig.VersionDir) { want[v.Number] = filepath.Join(base, v.Name) }
	p := cfg.GetModelVersionPolicy()
	switch {
	case p.GetAll() != nil:
		for _, v := range found {
			add(v)
		}
	case p.GetSpecific() != nil:
		byNumber := map[int64]modelconfig.VersionDir{}
		for _, v := range found {
			byNumber[v.Number] = v
		}
		for _, n := range p.GetSpecific().GetVersions() {
			if v, ok := byNumber[n]; ok {
				add(v)
			} else if !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
	default:
		n := 1
		if l := p.GetLatest(); l != nil && l.GetNumVersions() > 0 {
			n = int(l.GetNumVersions())
		}
		for i := len(found) - 1; i >= 0 && len(want) < n; i-- {
			if !failed[found[i].Number] {
				add(found[i])
			}
		}
	}
	return want, missing
}

// isLatest says whether the model's versions are picked by the latest policy (also TF Serving's
// default, no policy).
func isLatest(cfg *servingconfig.ModelConfig) bool {
	p := cfg.GetModelVersionPolicy()
	return p.GetAll() == nil && p.GetSpecific() == nil
}
