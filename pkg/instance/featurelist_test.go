package instance

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// featureListGolden is testdata/feature_list.golden.json: what the reference's FeatureList.parse
// made of testdata/feature_list.conf (its feeds, caches, features with their .name, the feature of
// each slot, get(name) for some names), and the feature names its gen_random_file gives the slots
// [1, 2, 3, 200] (no feature list) and [1, 200, 219, 7, 300, 11, 12, 99] (this feature list),
// recorded outside this repository by running the reference's own code.
type featureListGolden struct {
	BySlot                      map[string]string         `json:"by_slot"`
	Caches                      map[string]map[string]any `json:"caches"`
	ColumnName                  []string                  `json:"column_name"`
	Feeds                       map[string]map[string]any `json:"feeds"`
	Features                    []map[string]any          `json:"features"`
	Lookups                     map[string]*string        `json:"lookups"`
	ProfileNames                []string                  `json:"profile_names"`
	ProfileNamesWithFeatureList []string                  `json:"profile_names_with_feature_list"`
	ProfileDefaultExtraError    string                    `json:"profile_default_extra_error"`
}

func loadFeatureListGolden(t *testing.T) featureListGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "feature_list.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g featureListGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Features) == 0 || len(g.Lookups) == 0 {
		t.Fatalf("bad golden %+v", g)
	}
	return g
}

// jsonish turns v into what encoding/json decodes it to, for comparing with the golden.
func jsonish(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func noneIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func featureJSON(f *Feature) map[string]any {
	return map[string]any{
		"args": f.Args, "cache_keys": f.CacheKeys, "depend": f.Depend, "feature_group": f.FeatureGroup,
		"feature_id": f.FeatureID, "feature_name": noneIfEmpty(f.FeatureName), "feature_version": f.FeatureVersion,
		"input_optional": f.InputOptional, "method": noneIfEmpty(f.Method), "name": f.Name(),
		"need_raw": f.NeedRaw, "shared": f.Shared, "slot": f.Slot,
	}
}

func TestReadFeatureListMatchesReference(t *testing.T) {
	g := loadFeatureListGolden(t)
	fl, err := ReadFeatureList(filepath.Join("testdata", "feature_list.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var features []map[string]any
	for _, f := range fl.Features {
		features = append(features, featureJSON(f))
	}
	feeds := map[string]any{}
	for k, f := range fl.Feeds {
		feeds[k] = map[string]any{"feed_name": noneIfEmpty(f.FeedName), "shared": f.Shared, "feature_id": f.FeatureID}
	}
	caches := map[string]any{}
	for k, c := range fl.Caches {
		caches[k] = map[string]any{"cache_column": noneIfEmpty(c.CacheColumn), "cache_name": noneIfEmpty(c.CacheName),
			"cache_type": noneIfEmpty(c.CacheType), "cache_key_class": noneIfEmpty(c.CacheKeyClass),
			"capacity": c.Capacity, "timeout": c.Timeout}
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"features", features, g.Features},
		{"feeds", feeds, g.Feeds},
		{"caches", caches, g.Caches},
		{"column_name", fl.ColumnName, g.ColumnName},
	} {
		if got, want := jsonish(t, tc.got), jsonish(t, tc.want); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got, want)
		}
	}
	for slot, want := range g.BySlot {
		s, err := strconv.Atoi(slot)
		if err != nil {
			t.Fatal(err)
		}
		if f := fl.FeatureOfSlot(s); f == nil || f.FeatureName != want {
			t.Errorf("FeatureOfSlot(%d) = %+v, want %s", s, f, want)
		}
	}
	if f := fl.FeatureOfSlot(17); f != nil {
		t.Errorf("FeatureOfSlot(17) = %+v: fc_dup's first line (slot 17) was replaced by its second (slot 18)", f)
	}
	for name, want := range g.Lookups {
		f := fl.Feature(name)
		switch {
		case want == nil && f != nil:
			t.Errorf("Feature(%q) = %s, want none", name, f.FeatureName)
		case want != nil && (f == nil || f.FeatureName != *want):
			t.Errorf("Feature(%q) = %+v, want %s", name, f, *want)
		}
	}
}

func TestReadFeatureListErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"no space before a key", "feature_name=f_a;slot=1\n", "feature_list.conf:1: no space before the key"},
		{"slot not an integer", "# c\nfeature_name=f_a; slot=x\n", `feature_list.conf:2: slot="x" is not an integer`},
		{"feed id not an integer", "feed_name=a; feature_id=1.5\n", `feature_id="1.5" is not an integer`},
		{"cache without a name", "cache_type=lru; capacity=3\n", "no name for cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "feature_list.conf")
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFeatureList(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errkind.Of(err) != errkind.Value {
				t.Fatalf("error %v (kind %v), want kind Value containing %q", err, errkind.Of(err), tc.want)
			}
		})
	}
	if _, err := ReadFeatureList(filepath.Join(dir, "none.conf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}
