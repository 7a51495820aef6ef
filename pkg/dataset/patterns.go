package dataset

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Match returns the files that patterns name, sorted (byte order) and without duplicates.
//
// Each pattern is a comma-separated list of items (spaces around an item are dropped, empty items
// ignored). An item is either a glob in path/filepath.Match syntax (`*`, `?`, `[...]`, `\`
// escapes; a plain path names itself when it exists) or `@FILE`: FILE lists patterns, one per line
// (a line is one pattern, commas included; blank lines are skipped; a line may not be another
// `@` list). A pattern that matches nothing adds nothing; matched directories are kept, as
// TensorFlow's file matching keeps them (reading one is an error naming it).
func Match(patterns ...string) ([]string, error) {
	var files []string
	for _, p := range patterns {
		got, err := matchList(p)
		if err != nil {
			return nil, err
		}
		files = append(files, got...)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// ExpandPatterns is Match for a reader about to start: it is an error (of kind NotFound) when the
// patterns match no file at all, and a warning is logged for each item that matches nothing.
func ExpandPatterns(patterns ...string) ([]string, error) {
	var files []string
	for _, p := range patterns {
		for _, item := range splitList(p) {
			got, err := matchItem(item)
			if err != nil {
				return nil, err
			}
			if len(got) == 0 {
				slog.Warn("dataset: pattern matches no file", "pattern", item)
			}
			files = append(files, got...)
		}
	}
	if len(files) == 0 {
		return nil, errkind.New(errkind.NotFound, "dataset: no file matches %q", patterns)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

func splitList(pattern string) []string {
	var items []string
	for item := range strings.SplitSeq(pattern, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

func matchList(pattern string) ([]string, error) {
	var files []string
	for _, item := range splitList(pattern) {
		got, err := matchItem(item)
		if err != nil {
			return nil, err
		}
		files = append(files, got...)
	}
	return files, nil
}

// matchItem matches one item of a list: a glob, or an @ file of globs.
func matchItem(item string) ([]string, error) {
	list, ok := strings.CutPrefix(item, "@")
	if !ok {
		return glob(item)
	}
	lines, err := readFileList(list)
	if err != nil {
		return nil, err
	}
	var files []string
	for i, line := range lines {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "@") {
			return nil, errkind.New(errkind.Value, "dataset: file list %s line %d: %q: a file list may not name another", list, i+1, line)
		}
		got, err := glob(line)
		if err != nil {
			return nil, fmt.Errorf("dataset: file list %s line %d: %w", list, i+1, err)
		}
		files = append(files, got...)
	}
	return files, nil
}

// readFileList returns the lines of a file list, trimmed; blank ones stay (as "") so that errors
// can give line numbers.
func readFileList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileListError(path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		return nil, fileListError(path, err)
	}
	return lines, nil
}

func fileListError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errkind.Wrap(errkind.NotFound, fmt.Errorf("dataset: read file list %s: %w", path, err))
	}
	return fmt.Errorf("dataset: read file list %s: %w", path, err)
}

func glob(pattern string) ([]string, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, errkind.Wrap(errkind.Value, fmt.Errorf("dataset: pattern %q: %w", pattern, err))
	}
	return files, nil
}

// PatternDates are the arguments of PBDataset.gen_patterns: the input path and the span of dates
// (and hours) whose directories to read.
type PatternDates struct {
	// InputPath is the directory holding the date directories; empty: no patterns.
	InputPath string
	// StartDate is the first date, YYYYMMDD; 0: no patterns.
	StartDate int
	// StartHour is the first hour (0-23) of the start date.
	StartHour int
	// EndDate is the end date, YYYYMMDD, excluded; 0: today (of the time given to GenPatterns).
	EndDate int
	// EndHour is the end hour, excluded, when Hourly.
	EndHour int
	// Hourly makes one pattern per hour (YYYYMMDD/HH<wildcard>) instead of one per day
	// (YYYYMMDD/<wildcard>).
	Hourly bool
	// Wildcard ends each pattern; empty: "*".
	Wildcard string
}

// GenPatterns is PBDataset.gen_patterns: one pattern per day (or hour) from the start, included,
// to the end, excluded, under InputPath. now supplies "today" when EndDate is 0. The reference's
// fallbacks to absl flags (input_path, start_date, ...) are the caller's: pass the values.
func GenPatterns(d PatternDates, now time.Time) ([]string, error) {
	if d.InputPath == "" || d.StartDate == 0 {
		return nil, nil
	}
	end := strconv.Itoa(d.EndDate)
	if d.EndDate == 0 {
		end = now.Format("20060102")
	}
	wildcard := d.Wildcard
	if wildcard == "" {
		wildcard = "*"
	}
	const layout = "20060102:15"
	start, err := time.Parse(layout, fmt.Sprintf("%d:%02d", d.StartDate, d.StartHour))
	if err != nil {
		return nil, errkind.Wrap(errkind.Value, fmt.Errorf("dataset: gen patterns: start %d hour %d: %w", d.StartDate, d.StartHour, err))
	}
	endHour := 0
	if d.Hourly {
		endHour = d.EndHour
	}
	stop, err := time.Parse(layout, fmt.Sprintf("%s:%02d", end, endHour))
	if err != nil {
		return nil, errkind.Wrap(errkind.Value, fmt.Errorf("dataset: gen patterns: end %s hour %d: %w", end, endHour, err))
	}
	step := 24 * time.Hour
	if d.Hourly {
		step = time.Hour
	}
	var patterns []string
	for cur := start; cur.Before(stop); cur = cur.Add(step) {
		var pat string
		if d.Hourly {
			pat = cur.Format("20060102/15") + wildcard
		} else {
			pat = pyJoin(cur.Format("20060102"), wildcard)
		}
		patterns = append(patterns, pyJoin(d.InputPath, pat))
	}
	return patterns, nil
}

// pyJoin is Python's os.path.join of two parts: an absolute b replaces a, and a separator is added
// only when a does not end with one (no cleaning, unlike filepath.Join).
func pyJoin(a, b string) string {
	switch {
	case strings.HasPrefix(b, "/"):
		return b
	case a == "" || strings.HasSuffix(a, "/"):
		return a + b
	}
	return a + "/" + b
}

var (
	templateField = regexp.MustCompile(`\{.*?\}`)
	templateSplit = regexp.MustCompile(`[(,)]`)
)

// ExpandTemplate is the reference's --dataset_input_patterns expansion (DatasetMetaclass): spaces
// are removed, and each {DATE(start,end)} or {INT(start,end)} field is replaced by every value of
// its inclusive range (DATE: YYYYMMDD by day or YYYYMMDDHH by hour; INT: decimal integers, not
// padded), the first field varying slowest. Only the expansions that match at least one file are
// kept (a warning is logged for the others); none is an error of kind NotFound ("no match files").
func ExpandTemplate(template string) ([]string, error) {
	template = strings.ReplaceAll(template, " ", "")
	parts := templateField.Split(template, -1)
	var ranges [][]string
	for _, field := range templateField.FindAllString(template, -1) {
		values, err := templateRange(field[1 : len(field)-1])
		if err != nil {
			return nil, err
		}
		ranges = append(ranges, values)
	}
	var out []string
	var expand func(i int, prefix string) error
	expand = func(i int, prefix string) error {
		if i == len(ranges) {
			p := prefix + parts[i]
			files, err := glob(p)
			if err != nil {
				return err
			}
			if len(files) == 0 {
				slog.Warn("dataset: pattern matches no file", "pattern", p)
				return nil
			}
			out = append(out, p)
			return nil
		}
		for _, v := range ranges[i] {
			if err := expand(i+1, prefix+parts[i]+v); err != nil {
				return err
			}
		}
		return nil
	}
	if err := expand(0, ""); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errkind.New(errkind.NotFound, "dataset: input patterns %q: no match files", template)
	}
	return out, nil
}

// templateRange returns the values of one template field, TYPE(start,end).
func templateRange(field string) ([]string, error) {
	bad := func(format string, args ...any) error {
		return errkind.New(errkind.Value, "dataset: input pattern field {%s}: "+format, append([]any{field}, args...)...)
	}
	p := templateSplit.Split(field, -1)
	// As the reference, which asserts four parts and ignores the last.
	if len(p) != 4 {
		return nil, bad("want DATE(start,end) or INT(start,end)")
	}
	kind, start, end := p[0], p[1], p[2]
	switch kind {
	case "INT":
		a, err1 := strconv.Atoi(start)
		b, err2 := strconv.Atoi(end)
		if err1 != nil || err2 != nil {
			return nil, bad("bounds are not integers")
		}
		var values []string
		for v := a; v <= b; v++ {
			values = append(values, strconv.Itoa(v))
		}
		return values, nil
	case "DATE":
		if len(start) != len(end) {
			return nil, bad("bounds %q and %q differ in length", start, end)
		}
		layout, step := "20060102", 24*time.Hour
		switch len(start) {
		case 8:
		case 10:
			layout, step = "2006010215", time.Hour
		default:
			return nil, bad("not support %s %s", start, end)
		}
		a, err1 := time.Parse(layout, start)
		b, err2 := time.Parse(layout, end)
		if err1 != nil || err2 != nil {
			return nil, bad("bounds are not dates in %s form", strings.ToUpper(strings.NewReplacer("2006", "yyyy", "01", "mm", "02", "dd", "15", "hh").Replace(layout)))
		}
		var values []string
		for t := a; !t.After(b); t = t.Add(step) {
			values = append(values, t.Format(layout))
		}
		return values, nil
	}
	return nil, bad("type %q is not DATE or INT", kind)
}
