package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Case is one golden file: one call (or scripted sequence of calls) made against the reference.
type Case struct {
	Module string
	Case   string
	Call   string
	Input  map[string]json.RawMessage
	// Output is the reference result; JSON null when the call raised.
	Output json.RawMessage
	// Error is the exception the reference raised, nil when it returned.
	Error *PyError
	// Normalized says what the golden writer rewrote in Output ("" when nothing).
	Normalized string
	// File is the path the case was loaded from.
	File string
}

// PyError is an exception raised by the reference: its class name and str(exc).
type PyError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Name is module/case, the name reports and --run filters use.
func (c *Case) Name() string { return c.Module + "/" + c.Case }

// caseFile mirrors the golden schema; unknown keys are rejected so schema drift is noticed.
type caseFile struct {
	Module     string                     `json:"module"`
	Case       string                     `json:"case"`
	Call       string                     `json:"call"`
	Input      map[string]json.RawMessage `json:"input"`
	Output     json.RawMessage            `json:"output"`
	Error      *PyError                   `json:"error"`
	Normalized string                     `json:"normalized"`
}

// LoadDir loads every *.json file under dir (recursively), sorted by path. A file that does not
// follow the golden schema is an error naming the file.
func LoadDir(dir string) ([]Case, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(path, ".json") {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load goldens: %w", err)
	}
	sort.Strings(paths)
	cases := make([]Case, 0, len(paths))
	for _, p := range paths {
		c, err := LoadFile(p)
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// LoadFile loads one golden file.
func LoadFile(path string) (Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Case{}, fmt.Errorf("load golden: %w", err)
	}
	c, err := parseCase(data)
	if err != nil {
		return Case{}, fmt.Errorf("golden %s: %w", path, err)
	}
	c.File = path
	return c, nil
}

func parseCase(data []byte) (Case, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f caseFile
	if err := dec.Decode(&f); err != nil {
		return Case{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if dec.More() {
		return Case{}, errors.New("malformed JSON: trailing data after the object")
	}
	if err := validateCase(&f); err != nil {
		return Case{}, err
	}
	return Case{Module: f.Module, Case: f.Case, Call: f.Call, Input: f.Input, Output: f.Output,
		Error: f.Error, Normalized: f.Normalized}, nil
}

func validateCase(f *caseFile) error {
	for key, v := range map[string]string{"module": f.Module, "case": f.Case, "call": f.Call} {
		if v == "" {
			return fmt.Errorf("missing or empty %q", key)
		}
	}
	if f.Input == nil {
		return errors.New(`missing "input" object`)
	}
	if len(f.Output) == 0 {
		return errors.New(`missing "output" (null when the call raised)`)
	}
	if f.Error != nil && string(f.Output) != "null" {
		return errors.New(`"output" must be null when "error" is set`)
	}
	if _, err := caseEnv(f.Input); err != nil {
		return err
	}
	return nil
}

// caseEnv decodes input.env, the environment variables the reference ran with.
func caseEnv(in map[string]json.RawMessage) (map[string]string, error) {
	env := map[string]string{}
	raw, ok := in["env"]
	if !ok || string(raw) == "null" {
		return env, nil
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf(`"input.env" must map names to strings: %w`, err)
	}
	return env, nil
}
