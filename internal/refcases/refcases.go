// Package refcases loads, for tests, the recorded runs of a command line tool by the Python
// reference: testdata/cases.json (what to run) joined by position with testdata/reference.json
// (what the reference printed, its exit status and the ZooKeeper tree it left).
package refcases

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Case is the part of a case that every tool has: its name, and what the reference did, filled in
// from reference.json. A tool's case type embeds it and adds its own fields.
type Case struct {
	Name      string            `json:"name"`
	Exit      int               `json:"-"`
	Stdout    string            `json:"-"`
	TreeAfter map[string]string `json:"-"`
}

func (c *Case) recorded() *Case { return c }

// recorder is a pointer to a type that embeds Case.
type recorder[C any] interface {
	*C
	recorded() *Case
}

// Load reads dir/cases.json ({"cases": [...]}) and dir/reference.json and fills every case's
// recorded part. A reference.json that does not match cases.json case for case fails the test,
// pointing at readme (how to record it again).
func Load[C any, P recorder[C]](t testing.TB, dir, readme string) []C {
	t.Helper()
	var cases struct {
		Cases []C `json:"cases"`
	}
	ReadJSON(t, filepath.Join(dir, "cases.json"), &cases)
	var recs []struct {
		Name   string            `json:"name"`
		Exit   int               `json:"exit"`
		Stdout string            `json:"stdout"`
		Tree   map[string]string `json:"tree"`
	}
	ReadJSON(t, filepath.Join(dir, "reference.json"), &recs)
	if len(recs) != len(cases.Cases) {
		t.Fatalf("reference.json has %d records for %d cases: record it again (%s)", len(recs), len(cases.Cases), readme)
	}
	for i := range cases.Cases {
		c := P(&cases.Cases[i]).recorded()
		if recs[i].Name != c.Name {
			t.Fatalf("reference.json record %d is %q, cases.json says %q", i, recs[i].Name, c.Name)
		}
		c.Exit, c.Stdout, c.TreeAfter = recs[i].Exit, recs[i].Stdout, recs[i].Tree
	}
	return cases.Cases
}

// ReadJSON decodes the JSON file at path into v, failing the test on any error.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
