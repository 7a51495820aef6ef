package modelconfig

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestVersionDirs(t *testing.T) {
	tests := []struct {
		name    string
		dirs    []string // created under the base path
		files   []string
		links   map[string]string // name -> target directory name
		missing bool              // no base path at all
		want    []VersionDir
		latest  string // "" when LatestVersion is ErrNoVersion
	}{
		{name: "versions sorted by number, not name", dirs: []string{"10", "9", "0012"},
			want: []VersionDir{{9, "9"}, {10, "10"}, {12, "0012"}}, latest: "0012"},
		{name: "temp dirs, negative numbers and files are no versions", dirs: []string{"temp-1634786999", "-3", "1634786523", "x1"},
			files: []string{"99", "README"}, want: []VersionDir{{1634786523, "1634786523"}}, latest: "1634786523"},
		{name: "a link to a directory is a version", dirs: []string{"1"}, links: map[string]string{"2": "1"},
			want: []VersionDir{{1, "1"}, {2, "2"}}, latest: "2"},
		{name: "empty", want: nil},
		{name: "missing base path", missing: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "ps_0")
			if !tc.missing {
				if err := os.Mkdir(base, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(base, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for name, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := VersionDirs(base)
			if tc.missing {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("VersionDirs: %v, want a not-exist error", err)
				}
			} else if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("VersionDirs = %v, %v; want %v", got, err, tc.want)
			}
			latest, err := LatestVersion(base)
			if tc.latest == "" {
				if !errors.Is(err, ErrNoVersion) || errkind.Of(err) != errkind.NotFound {
					t.Errorf("LatestVersion = %v, %v; want ErrNoVersion (kind NotFound)", latest, err)
				}
				return
			}
			if err != nil || latest.Name != tc.latest {
				t.Errorf("LatestVersion = %v, %v; want %s", latest, err, tc.latest)
			}
		})
	}
}
