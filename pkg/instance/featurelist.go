package instance

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// FeatureList is monolith.native_training.data.feature_list.FeatureList: the feeds, caches and
// features of a feature_list.conf, the file that names a model's features and their slots.
type FeatureList struct {
	// ColumnName holds the column_name line's entries (sorted, each once: the reference keeps a
	// set); nil when the file has none.
	ColumnName []string
	Feeds      map[string]*Feed
	Caches     map[string]*Cache
	// Features in file order, keyed by feature_name: a later line with the same name replaces the
	// earlier one in its place, as a Python dict does.
	Features []*Feature

	byName map[string]*Feature
	bySlot map[int][]*Feature
}

// Feed is feature_list.Feed, a feed_name line.
type Feed struct {
	FeedName  string
	Shared    bool
	FeatureID *int
}

// Cache is feature_list.Cache, a cache line or the cache_column line.
type Cache struct {
	CacheColumn, CacheName, CacheType, CacheKeyClass string
	Capacity, Timeout                                *int
}

// Name is Cache.name: the cache name, else the key class, else "cache_column".
func (c *Cache) Name() (string, error) {
	switch {
	case c.CacheName != "":
		return c.CacheName, nil
	case c.CacheKeyClass != "":
		return c.CacheKeyClass, nil
	case c.CacheColumn != "":
		return "cache_column", nil
	}
	return "", errkind.New(errkind.Value, "no name for cache")
}

// Feature is feature_list.Feature, a feature line. Strings absent from the line are empty, lists
// nil and optional integers nil (the reference's None).
type Feature struct {
	FeatureName    string
	Depend         []string
	Method         string
	Slot           *int
	Args           []string
	FeatureVersion *int
	Shared         bool
	CacheKeys      []string
	NeedRaw        bool
	FeatureID      *int
	InputOptional  []bool
	FeatureGroup   []string
}

// Name is Feature.name: the feature name without its fc_ / f_ prefixes, per '-'-separated term,
// lower-cased. As in the reference, a term loses its first two characters when the whole name
// starts with f_, whatever the term starts with ("f_user-xyz_id" -> "user-z_id").
func (f *Feature) Name() string {
	terms := strings.Split(f.FeatureName, "-")
	for i, t := range terms {
		if strings.HasPrefix(t, "fc_") {
			terms[i] = t[3:]
		} else if strings.HasPrefix(f.FeatureName, "f_") {
			terms[i] = t[min(2, len(t)):]
		}
	}
	return strings.ToLower(strings.Join(terms, "-"))
}

// ReadFeatureList is FeatureList.parse(fname) (with use_old_name, its default: features are keyed
// by feature_name).
func ReadFeatureList(path string) (*FeatureList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read feature list: %w", err)
	}
	defer f.Close()
	fl := &FeatureList{Feeds: map[string]*Feed{}, Caches: map[string]*Cache{}, byName: map[string]*Feature{}, bySlot: map[int][]*Feature{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if err := fl.parseLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read feature list %s: %w", path, err)
	}
	for _, feat := range fl.Features {
		if feat.Slot != nil {
			fl.bySlot[*feat.Slot] = append(fl.bySlot[*feat.Slot], feat)
		}
	}
	return fl, nil
}

func (fl *FeatureList) parseLine(line string) error {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	if strings.HasPrefix(line, "column_name") {
		// line[len('column_name:'):], whatever the character after column_name is.
		rest := ""
		if len(line) > len("column_name:") {
			rest = line[len("column_name:"):]
		}
		for _, item := range strings.Split(rest, ",") {
			if item = strings.TrimSpace(item); !slices.Contains(fl.ColumnName, item) {
				fl.ColumnName = append(fl.ColumnName, item)
			}
		}
		slices.Sort(fl.ColumnName)
		return nil
	}
	if strings.HasPrefix(line, "cache_column") {
		rest := ""
		if len(line) > len("cache_column:") {
			rest = line[len("cache_column:"):]
		}
		return fl.addCache(&Cache{CacheColumn: strings.TrimSpace(rest)})
	}
	params, err := splitParams(line)
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(line, "feed"):
		feed := &Feed{FeedName: params["feed_name"], Shared: isTrue(params, "shared")}
		if feed.FeatureID, err = optInt(params, "feature_id"); err != nil {
			return err
		}
		fl.Feeds[feed.FeedName] = feed
	case strings.HasPrefix(line, "cache"):
		c := &Cache{CacheColumn: params["cache_column"], CacheName: params["cache_name"], CacheType: params["cache_type"], CacheKeyClass: params["cache_key_class"]}
		if c.Capacity, err = optInt(params, "capacity"); err != nil {
			return err
		}
		if c.Timeout, err = optInt(params, "timeout"); err != nil {
			return err
		}
		return fl.addCache(c)
	default:
		feat, err := newFeature(params)
		if err != nil {
			return err
		}
		if prev, ok := fl.byName[feat.FeatureName]; ok {
			*prev = *feat
		} else {
			fl.byName[feat.FeatureName] = feat
			fl.Features = append(fl.Features, feat)
		}
	}
	return nil
}

func (fl *FeatureList) addCache(c *Cache) error {
	name, err := c.Name()
	if err != nil {
		return err
	}
	fl.Caches[name] = c
	return nil
}

// splitParams reads "k1=v1; k2=v2, ..." the reference's way: a key is the last space-separated
// word before an '=', its value what follows up to the last space before the next key, less
// trailing ',' and ';'. A key not preceded by a space is an error (the reference's rindex raises).
func splitParams(line string) (map[string]string, error) {
	items := strings.Split(line, "=")
	params := map[string]string{}
	for i := 0; i < len(items)-1; i++ {
		key := strings.TrimSpace(items[i])
		if i > 0 {
			start := strings.LastIndex(items[i], " ")
			if start < 0 {
				return nil, errkind.New(errkind.Value, "no space before the key in %q", items[i])
			}
			key = strings.TrimSpace(items[i][start:])
		}
		value := items[i+1]
		if i < len(items)-2 {
			end := strings.LastIndex(value, " ")
			if end < 0 {
				return nil, errkind.New(errkind.Value, "no space before the key in %q", value)
			}
			value = value[:end]
		}
		value = strings.TrimRight(strings.TrimRight(strings.TrimSpace(value), ","), ";")
		params[key] = strings.TrimRightFunc(value, isSpace)
	}
	return params, nil
}

func isSpace(r rune) bool { return strings.TrimSpace(string(r)) == "" }

// boolWords are feature_list._BOOL_FLAGS: the values that mean true.
var boolWords = map[string]bool{"true": true, "yes": true, "t": true, "y": true, "1": true}

func isTrue(params map[string]string, key string) bool {
	return boolWords[strings.ToLower(params[key])]
}

func optInt(params map[string]string, key string) (*int, error) {
	v, ok := params[key]
	if !ok {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, errkind.New(errkind.Value, "%s=%q is not an integer", key, v)
	}
	return &n, nil
}

// splitList is how Feature.__post_init__ reads a list: comma-separated, each item trimmed and
// without quotes.
func splitList(params map[string]string, key string) []string {
	v, ok := params[key]
	if !ok {
		return nil
	}
	items := strings.Split(strings.TrimSpace(v), ",")
	for i, item := range items {
		items[i] = strings.NewReplacer(`"`, "", "'", "").Replace(strings.TrimSpace(item))
	}
	return items
}

func newFeature(params map[string]string) (*Feature, error) {
	f := &Feature{
		FeatureName:  params["feature_name"],
		Depend:       splitList(params, "depend"),
		Method:       params["method"],
		Args:         splitList(params, "args"),
		Shared:       isTrue(params, "shared"),
		CacheKeys:    splitList(params, "cache_keys"),
		NeedRaw:      isTrue(params, "need_raw"),
		FeatureGroup: splitList(params, "feature_group"),
	}
	for _, item := range splitList(params, "input_optional") {
		f.InputOptional = append(f.InputOptional, item == "true")
	}
	var err error
	for key, dst := range map[string]**int{"slot": &f.Slot, "feature_version": &f.FeatureVersion, "feature_id": &f.FeatureID} {
		if *dst, err = optInt(params, key); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Feature is FeatureList.get(name): the feature of that feature_name, else of f_<name> or
// fc_<name>, else, for a name with '-', of its terms each prefixed with fc_ (or each with f_).
// nil when there is none.
func (fl *FeatureList) Feature(name string) *Feature {
	name = strings.TrimSpace(name)
	for _, n := range []string{name, "f_" + name, "fc_" + name} {
		if f, ok := fl.byName[n]; ok {
			return f
		}
	}
	if strings.Contains(name, "-") {
		terms := strings.Split(name, "-")
		for _, prefix := range []string{"fc_", "f_"} {
			prefixed := make([]string, len(terms))
			for i, t := range terms {
				prefixed[i] = prefix + t
			}
			if f, ok := fl.byName[strings.Join(prefixed, "-")]; ok {
				return f
			}
		}
	}
	return nil
}

// FeatureOfSlot is FeatureList.get(slot): the first feature (in file order) with that slot, nil
// when there is none.
func (fl *FeatureList) FeatureOfSlot(slot int) *Feature {
	if fs := fl.bySlot[slot]; len(fs) > 0 {
		return fs[0]
	}
	return nil
}
