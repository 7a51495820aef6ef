package protogen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// diffContext is the number of unchanged lines shown around each change.
const diffContext = 3

// maxDiffCells bounds the line-diff table; larger changes are shown as a whole-file replacement.
const maxDiffCells = 16 << 20

// Compare reports how the tree at have (the checked-in code) differs from the tree at want (freshly
// generated). It returns "" when they hold the same files with the same bytes. Otherwise it names
// every stale, missing and extra file (paths shown under label, e.g. "gen/pb") and gives a unified
// diff for each stale file.
func Compare(have, want, label string) (string, error) {
	haveFiles, err := listFiles(have)
	if err != nil {
		return "", fmt.Errorf("compare: %w", err)
	}
	wantFiles, err := listFiles(want)
	if err != nil {
		return "", fmt.Errorf("compare: %w", err)
	}
	names := map[string]bool{}
	for n := range haveFiles {
		names[n] = true
	}
	for n := range wantFiles {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)

	var b strings.Builder
	for _, n := range sorted {
		shown := label + "/" + n
		_, inHave := haveFiles[n]
		_, inWant := wantFiles[n]
		switch {
		case !inHave:
			fmt.Fprintf(&b, "missing: %s (generated, but not checked in)\n", shown)
		case !inWant:
			fmt.Fprintf(&b, "extra: %s (checked in, but no longer generated)\n", shown)
		default:
			h, err := os.ReadFile(haveFiles[n])
			if err != nil {
				return "", fmt.Errorf("compare: %w", err)
			}
			w, err := os.ReadFile(wantFiles[n])
			if err != nil {
				return "", fmt.Errorf("compare: %w", err)
			}
			if bytes.Equal(h, w) {
				continue
			}
			fmt.Fprintf(&b, "stale: %s\n", shown)
			b.WriteString(UnifiedDiff(shown+" (checked in)", shown+" (regenerated)", string(h), string(w)))
		}
	}
	return b.String(), nil
}

// listFiles maps the slash-separated path, relative to root, of every file below root to its full
// path; an absent root holds none. Symbolic links to files (as in a Bazel runfiles tree) count as files.
func listFiles(root string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll // an absent tree holds no files
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			info, err := os.Stat(p)
			if err != nil {
				return err
			}
			if info.IsDir() {
				return fmt.Errorf("%s: symbolic link to a directory is not supported", p)
			}
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// edit is one line of a line diff: kind is ' ' (kept), '-' (only in a) or '+' (only in b).
type edit struct {
	kind byte
	text string
	a, b int // 0-based line numbers in a and b before this line
}

// UnifiedDiff renders a unified diff (as `diff -u` would) turning a into b; "" when they are equal.
func UnifiedDiff(nameA, nameB, a, b string) string {
	if a == b {
		return ""
	}
	edits := lineDiff(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	for i := 0; i < len(edits); {
		if edits[i].kind == ' ' {
			i++
			continue
		}
		// A hunk spans changes separated by at most 2*diffContext kept lines.
		start := max(i-diffContext, 0)
		end := i
		for j := i; j < len(edits); j++ {
			if edits[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*diffContext {
				break
			}
		}
		stop := min(end+diffContext, len(edits))
		var countA, countB int
		for _, e := range edits[start:stop] {
			if e.kind != '+' {
				countA++
			}
			if e.kind != '-' {
				countB++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(edits[start].a, countA), hunkRange(edits[start].b, countB))
		for _, e := range edits[start:stop] {
			out.WriteByte(e.kind)
			out.WriteString(strings.TrimSuffix(e.text, "\n"))
			out.WriteByte('\n')
			if !strings.HasSuffix(e.text, "\n") {
				out.WriteString("\\ No newline at end of file\n")
			}
		}
		i = stop
	}
	return out.String()
}

func hunkRange(start, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if count == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineDiff returns a shortest edit script from a to b (longest common subsequence of lines), after
// trimming the common prefix and suffix.
func lineDiff(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]

	var edits []edit
	ia, ib := 0, 0
	emit := func(kind byte, text string) {
		edits = append(edits, edit{kind: kind, text: text, a: ia, b: ib})
		if kind != '+' {
			ia++
		}
		if kind != '-' {
			ib++
		}
	}
	for _, l := range a[:pre] {
		emit(' ', l)
	}
	if len(ma)*len(mb) > maxDiffCells {
		for _, l := range ma {
			emit('-', l)
		}
		for _, l := range mb {
			emit('+', l)
		}
	} else {
		// lcs[i][j] is the length of the longest common subsequence of ma[i:] and mb[j:].
		w := len(mb) + 1
		lcs := make([]int32, (len(ma)+1)*w)
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
				} else {
					lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				emit(' ', ma[i])
				i++
				j++
			case j == len(mb) || (i < len(ma) && lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
				emit('-', ma[i])
				i++
			default:
				emit('+', mb[j])
				j++
			}
		}
	}
	for _, l := range a[len(a)-suf:] {
		emit(' ', l)
	}
	return edits
}
