package gen

// formatRuntime is emitted once into every format.go: the position and error types and the
// decoder's helpers that the generated per-record decoders call. It is plain Go (gofmt'ed with the
// rest), kept here rather than in a shared package so that a generated format package stands alone.
const formatRuntime = `
// Pos is a place in a file: a 1-based line and column. The zero Pos is no place: a value that was
// not read from a file, or a key that was absent.
type Pos struct{ Line, Col int }

// IsZero reports whether p is no place.
func (p Pos) IsZero() bool { return p.Line == 0 }

// Error is an error about the value at Path (features[2].kind; empty: the file as a whole) at Pos
// of File. Error() is one line: file:line:col: path: message.
type Error struct {
	File string
	Pos  Pos
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var parts []string
	where := e.File
	if e.Pos.Line > 0 {
		where += fmt.Sprintf(":%d", e.Pos.Line)
		if e.Pos.Col > 0 {
			where += fmt.Sprintf(":%d", e.Pos.Col)
		}
	}
	if where = strings.TrimPrefix(where, ":"); where != "" {
		parts = append(parts, where)
	}
	if e.Path != "" {
		parts = append(parts, e.Path)
	}
	parts = append(parts, e.Msg)
	return strings.ReplaceAll(strings.Join(parts, ": "), "\n", " ")
}

// formatDecoder decodes yaml.v3 nodes strictly, naming file, place and path in its errors.
type formatDecoder struct{ file string }

func formatPos(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

func (d *formatDecoder) errorf(n *yaml.Node, path, format string, args ...any) error {
	return &Error{File: d.file, Pos: formatPos(n), Path: path, Msg: fmt.Sprintf(format, args...)}
}

// document parses data as exactly one YAML document without aliases and returns its content.
func (d *formatDecoder) document(data []byte, what string) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil { // the parser is not ours: no input may crash the caller
			root, err = nil, &Error{File: d.file, Msg: fmt.Sprintf("YAML parser failed: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: d.file, Msg: "empty file: want a " + what + " mapping"}
		}
		return nil, d.syntax(err)
	}
	if len(doc.Content) != 1 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
		return nil, &Error{File: d.file, Msg: "empty file: want a " + what + " mapping"}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, d.errorf(&extra, "", "a second YAML document: a %s file is one document", what)
	} else if !errors.Is(err, io.EOF) {
		return nil, d.syntax(err)
	}
	if err := d.noAliases(doc.Content[0], ""); err != nil {
		return nil, err
	}
	return doc.Content[0], nil
}

// syntax turns a yaml.v3 error ("yaml: line 3: did not find expected key") into an Error at its line.
func (d *formatDecoder) syntax(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				line, msg = n, after
			}
		}
	}
	return &Error{File: d.file, Pos: Pos{Line: line}, Msg: "YAML syntax: " + msg}
}

func (d *formatDecoder) noAliases(n *yaml.Node, path string) error {
	if n.Kind == yaml.AliasNode {
		return d.errorf(n, path, "YAML alias *%s: aliases are not supported (write the value out)", n.Value)
	}
	for i, c := range n.Content {
		p := path
		switch {
		case n.Kind == yaml.SequenceNode:
			p = formatItem(path, i)
		case n.Kind == yaml.MappingNode && i%2 == 1:
			p = formatJoin(path, n.Content[i-1].Value)
		}
		if err := d.noAliases(c, p); err != nil {
			return err
		}
	}
	return nil
}

// mapping checks that n is a mapping holding the record what.
func (d *formatDecoder) mapping(n *yaml.Node, path, what string) error {
	if n.Kind != yaml.MappingNode {
		return d.errorf(n, path, "want a mapping (%s), got %s", what, formatDesc(n))
	}
	return nil
}

// key checks a mapping key: a string, not seen before in the mapping.
func (d *formatDecoder) key(k *yaml.Node, path string, seen map[string]*yaml.Node) error {
	if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
		return d.errorf(k, path, "a key must be a string, got %s", formatDesc(k))
	}
	if prev := seen[k.Value]; prev != nil {
		return d.errorf(k, formatJoin(path, k.Value), "duplicate key (first at line %d:%d)", prev.Line, prev.Column)
	}
	seen[k.Value] = k
	return nil
}

func (d *formatDecoder) unknownKey(k *yaml.Node, path string, keys []string) error {
	if s := formatSuggest(k.Value, keys); s != "" {
		return d.errorf(k, path, "unknown key %q (did you mean %q?)", k.Value, s)
	}
	return d.errorf(k, path, "unknown key %q (known: %s)", k.Value, strings.Join(keys, ", "))
}

func (d *formatDecoder) missing(n *yaml.Node, path, key string) error {
	return d.errorf(n, path, "missing required key %q", key)
}

func (d *formatDecoder) str(n *yaml.Node, path string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", d.errorf(n, path, "want a string, got %s", formatDesc(n))
	}
	return n.Value, nil
}

func (d *formatDecoder) integer(n *yaml.Node, path string) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, d.errorf(n, path, "want an integer, got %s", formatDesc(n))
	}
	var v int64
	if err := n.Decode(&v); err != nil || int64(int(v)) != v {
		return 0, d.errorf(n, path, "integer %s is out of range", n.Value)
	}
	return int(v), nil
}

func (d *formatDecoder) number(n *yaml.Node, path string) (float64, error) {
	var v float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&v) != nil {
		return 0, d.errorf(n, path, "want a number, got %s", formatDesc(n))
	}
	return v, nil
}

func (d *formatDecoder) boolean(n *yaml.Node, path string) (bool, error) {
	var v bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&v) != nil {
		return false, d.errorf(n, path, "want true or false, got %s", formatDesc(n))
	}
	return v, nil
}

func (d *formatDecoder) enum(n *yaml.Node, path string, values []string) (string, error) {
	v, err := d.str(n, path)
	if err != nil {
		return "", err
	}
	for _, ok := range values {
		if v == ok {
			return v, nil
		}
	}
	if s := formatSuggest(v, values); s != "" {
		return "", d.errorf(n, path, "%q is not one of %s (did you mean %q?)", v, strings.Join(values, ", "), s)
	}
	return "", d.errorf(n, path, "%q is not one of %s", v, strings.Join(values, ", "))
}

// scalars reads a scalar or a list of scalars as their text; an empty list is an empty, non-nil slice.
func (d *formatDecoder) scalars(n *yaml.Node, path string) ([]string, error) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		return []string{n.Value}, nil
	case n.Kind == yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for i, it := range n.Content {
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return nil, d.errorf(it, formatItem(path, i), "want a scalar, got %s", formatDesc(it))
			}
			out = append(out, it.Value)
		}
		return out, nil
	}
	return nil, d.errorf(n, path, "want a scalar or a list of scalars, got %s", formatDesc(n))
}

func (d *formatDecoder) list(n *yaml.Node, path string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errorf(n, path, "want a list, got %s", formatDesc(n))
	}
	return n.Content, nil
}

// items checks a list's length against its check's bounds (negative: unbounded).
func (d *formatDecoder) items(n *yaml.Node, path string, got, least, most int) error {
	plural := func(n int) string {
		if n == 1 {
			return "item"
		}
		return "items"
	}
	if least >= 0 && got < least {
		return d.errorf(n, path, "want at least %d %s, got %d", least, plural(least), got)
	}
	if most >= 0 && got > most {
		return d.errorf(n, path, "want at most %d %s, got %d", most, plural(most), got)
	}
	return nil
}

// formatDesc describes a node for an error: its kind, or a scalar's type and text.
func formatDesc(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		names := map[string]string{"!!null": "null", "!!str": "string", "!!int": "integer", "!!float": "number", "!!bool": "bool"}
		name, ok := names[n.Tag]
		if !ok {
			name = "tagged " + n.Tag
		}
		if n.Tag == "!!null" {
			return name
		}
		return fmt.Sprintf("%s %q", name, n.Value)
	}
	return "nothing"
}

func formatJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func formatItem(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// formatSuggest returns the candidate nearest to name (case-insensitive optimal string alignment
// distance: edits and swaps of neighbours), if it is near enough to be a typo: at most a third of
// name's length (at least 1), and fewer edits than name has characters. Ties go to the first.
func formatSuggest(name string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		if d := formatDistance(strings.ToLower(name), strings.ToLower(c)); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	n := utf8.RuneCountInString(name)
	if bestDist < 0 || bestDist > max(1, (n+2)/3) || bestDist >= n {
		return ""
	}
	return best
}

// formatDistance is the optimal string alignment distance of a and b, in runes.
func formatDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
`
