// Package agentconf reads agent.conf files and builds the agent's configuration (the config part of
// monolith/agent_service/utils.py and constants.py): conf_parser semantics, AgentConfig with its
// env-derived ports and ids, TF Serving command lines and the platform config text, and the ZooKeeper
// path and pattern helpers. Field definitions are generated from specs/agent_service/utils.yaml.
package agentconf

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strings"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pystr"
)

// HostShardEnv names the variable holding the number of shards of the host (constants.py).
const HostShardEnv = "MONOLITH_HOST_SHARD_N"

// confSeparator splits a line into key and value (the reference's SEQ).
var confSeparator = regexp.MustCompile(`[ =\t]+`)

// Entry is one key of a parsed conf file.
type Entry struct {
	Key string
	// Values holds every value given for the key, in file order.
	Values []string
	// Files and Lines say where each value came from.
	Files []string
	Lines []int
}

// PyValue is what the reference's conf_parser stores for the key: the value, or a list of the first
// two values when the key repeats (later repetitions are dropped there).
func (e *Entry) PyValue() any {
	if len(e.Values) == 1 {
		return e.Values[0]
	}
	return e.Values[:2]
}

// Conf is a parsed conf file.
type Conf struct {
	Entries map[string]*Entry
	// Keys in order of first appearance.
	Keys []string
	// Ignored lists lines the reference ignores (no value, empty value, missing include); FromFile
	// turns them into errors, ParseConf keeps the reference's behaviour.
	Ignored []Ignored
	// preset holds the keys the caller's args held before parsing (ParseConfOnto): their empty
	// values count, as the reference appends any value to a key already in args.
	preset map[string]bool
}

// Ignored is a conf line that gave no value.
type Ignored struct {
	File   string
	Line   int
	Text   string
	Reason string
}

// ParseConf reads an agent.conf the way the reference's conf_parser does: lines end at "\n", "\r\n"
// or "\r" (Python's universal newlines) and are stripped as str.strip does; blank lines and lines
// starting with # are skipped; text from a # (not at the start) is cut; "include PATH" parses
// another file in place; otherwise the line splits at the first run of spaces, tabs or '=' into key
// and value, and a key with an empty value is ignored. A missing file yields an empty Conf, as in
// the reference (FromFile checks existence itself); a file that exists but cannot be read is an error.
func ParseConf(path string) (*Conf, error) {
	c := &Conf{Entries: map[string]*Entry{}}
	if err := c.parse(path, 0, "", 0); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseConfOnto is the reference's conf_parser(file, args) for an args dict that may already hold
// keys: a key already in args (before or during parsing) whose value is not a list becomes the
// list [that value, the line's value] (an empty value included); a key whose value is a list keeps
// it unchanged; other keys are set as ParseConf reads them. A missing file leaves args as it is.
func ParseConfOnto(path string, args map[string]any) error {
	c := &Conf{Entries: map[string]*Entry{}, preset: make(map[string]bool, len(args))}
	for k := range args {
		c.preset[k] = true
	}
	if err := c.parse(path, 0, "", 0); err != nil {
		return err
	}
	for k, e := range c.Entries {
		prev, ok := args[k]
		switch {
		case !ok:
			args[k] = e.PyValue()
		case isList(prev):
			// The reference appends only to a value that is not a list yet.
		default:
			args[k] = []any{prev, e.Values[0]}
		}
	}
	return nil
}

func isList(v any) bool {
	if v == nil {
		return false
	}
	return reflect.TypeOf(v).Kind() == reflect.Slice
}

// maxIncludeDepth stops include cycles, which recurse in the reference until Python's recursion
// limit raises RecursionError (a RuntimeError): the error here has kind Runtime too.
const maxIncludeDepth = 16

func (c *Conf) parse(path string, depth int, from string, fromLine int) error {
	if depth > maxIncludeDepth {
		return errkind.New(errkind.Runtime, "%s: includes nested deeper than %d (an include cycle?)", path, maxIncludeDepth)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if depth > 0 {
			slog.Warn("agent conf include not found; ignored as the reference does", "path", path)
			c.Ignored = append(c.Ignored, Ignored{File: from, Line: fromLine, Text: "include " + path, Reason: "included file does not exist"})
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read conf: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	sc.Split(scanUniversalLines)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := pystr.Strip(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if idx := strings.Index(line, "#"); idx > 0 {
			line = line[:idx]
		}
		if strings.HasPrefix(line, "include") {
			fields := strings.FieldsFunc(line, pystr.IsSpace)
			if err := c.parse(fields[len(fields)-1], depth+1, path, lineNo); err != nil {
				return fmt.Errorf("%s:%d: %w", path, lineNo, err)
			}
			continue
		}
		parts := confSeparator.Split(line, 2)
		if len(parts) != 2 {
			// The reference logs the failed unpacking and skips the line.
			slog.Warn("agent conf line has no value; ignored", "file", path, "line", lineNo, "text", line)
			c.Ignored = append(c.Ignored, Ignored{File: path, Line: lineNo, Text: line, Reason: "a key without a value"})
			continue
		}
		key, value := parts[0], parts[1]
		if e, ok := c.Entries[key]; ok {
			e.Values = append(e.Values, value)
			e.Files = append(e.Files, path)
			e.Lines = append(e.Lines, lineNo)
			continue
		}
		if value == "" && !c.preset[key] {
			c.Ignored = append(c.Ignored, Ignored{File: path, Line: lineNo, Text: line, Reason: "a key with an empty value"})
			continue
		}
		c.Entries[key] = &Entry{Key: key, Values: []string{value}, Files: []string{path}, Lines: []int{lineNo}}
		c.Keys = append(c.Keys, key)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read conf %s: %w", path, err)
	}
	return nil
}

// scanUniversalLines splits text into lines the way Python's text files do (universal newlines):
// at "\n", "\r\n" or a lone "\r", without the terminator.
func scanUniversalLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a "\n" may follow
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// PyMap returns the dict the reference's conf_parser builds.
func (c *Conf) PyMap() map[string]any {
	m := make(map[string]any, len(c.Entries))
	for k, e := range c.Entries {
		m[k] = e.PyValue()
	}
	return m
}
