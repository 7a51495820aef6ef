package modelconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// ErrNoVersion is wrapped by LatestVersion's error when a base path holds no version directory
// (yet), or does not exist (yet).
var ErrNoVersion = errors.New("no version directory")

// VersionDir is one version of a saved model: a directory named by its version number.
type VersionDir struct {
	Number int64
	// Name is the directory's name (the number as written, "0012" for 12).
	Name string
}

// VersionDirs lists the versions under basePath the way TF Serving's file system source reads
// them: entries whose name is a decimal int64, here non-negative and only directories (a version
// is a SavedModel directory; an exporter's "temp-..." directory or a stray file is none), sorted
// by number. Only local paths are read. A missing basePath is an error wrapping fs.ErrNotExist.
func VersionDirs(basePath string) ([]VersionDir, error) {
	entries, err := os.ReadDir(basePath)
	if err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	var out []VersionDir
	for _, e := range entries {
		n, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || n < 0 || !isDir(basePath, e) {
			continue
		}
		out = append(out, VersionDir{Number: n, Name: e.Name()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// LatestVersion is the newest of VersionDirs(basePath). With none, or no basePath, the error
// (kind NotFound) wraps ErrNoVersion.
func LatestVersion(basePath string) (VersionDir, error) {
	vs, err := VersionDirs(basePath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return VersionDir{}, errkind.Wrap(errkind.NotFound, fmt.Errorf("%w: %s does not exist", ErrNoVersion, basePath))
	case err != nil:
		return VersionDir{}, err
	case len(vs) == 0:
		return VersionDir{}, errkind.Wrap(errkind.NotFound, fmt.Errorf("%w in %s", ErrNoVersion, basePath))
	}
	return vs[len(vs)-1], nil
}

// isDir follows a symbolic link, as TF Serving's file system does.
func isDir(dir string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	st, err := os.Stat(filepath.Join(dir, e.Name()))
	return err == nil && st.IsDir()
}
