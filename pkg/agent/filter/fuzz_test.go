package filter

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/monolith-go/monolith/internal/fuzzseed"
)

// FuzzFilterSet: a filter that parses prints (String, the reference's debug_info form) to a filter
// that parses to the same print and decides every sub graph the same way; a set accepts a sub graph
// exactly when its first filter that matches with a true condition exists (before any evaluation
// error), as AgentV3's layout callback decides. Seeds are the reference's recorded filter sets
// and sub graphs (testdata/python_filters.json) and the layout_filters of the agent.conf goldens;
// run with
//
//	go test ./pkg/agent/filter -run='^$' -fuzz='^FuzzFilterSet$' -fuzztime=60s
func FuzzFilterSet(f *testing.F) {
	data, err := os.ReadFile("testdata/python_filters.json")
	if err != nil {
		f.Fatal(err)
	}
	var sets []filterSet
	if err := json.Unmarshal(data, &sets); err != nil {
		f.Fatal(err)
	}
	for _, s := range sets {
		subs := make([]string, 0, len(s.Results))
		for sub := range s.Results {
			subs = append(subs, sub)
		}
		slices.Sort(subs)
		raws := append(append([]string{}, s.Filters...), "", "")
		for i, sub := range subs {
			f.Add(raws[0], raws[1], sub, int8(s.ShardID), int8(s.NumShard))
			if i > 3 {
				break
			}
		}
	}
	strs := fuzzseed.AllStrings(fuzzseed.PythonCases(f, "utils", "agent_service"))
	for _, l := range fuzzseed.Lines(strs, "layout_filters ") {
		f.Add(l, "entry; True", "ps_3", int8(1), int8(2))
	}
	f.Fuzz(func(t *testing.T, raw1, raw2, sub string, shard, num int8) {
		p := NewParams(int(shard), int(num))
		var set Set
		for _, raw := range []string{raw1, raw2} {
			flt, err := Parse(raw, p)
			if err != nil {
				var fe *Error
				if !errors.As(err, &fe) || fe.Filter != raw {
					t.Fatalf("Parse(%q): %v (%T)", raw, err, err)
				}
				continue
			}
			set = append(set, flt)
			again, err := Parse(flt.String(), p)
			if err != nil {
				t.Fatalf("%q prints as %q, which does not parse: %v", raw, flt.String(), err)
			}
			if again.String() != flt.String() {
				t.Fatalf("%q prints as %q, which prints as %q", raw, flt.String(), again.String())
			}
			m1, a1, e1 := flt.Eval(sub)
			m2, a2, e2 := again.Eval(sub)
			if m1 != m2 || a1 != a2 || (e1 == nil) != (e2 == nil) {
				t.Fatalf("%q and its print %q decide %q differently: %v %v %v / %v %v %v", raw, flt.String(), sub, m1, a1, e1, m2, a2, e2)
			}
		}
		ok, by, err := set.Accept(sub)
		want, wantBy, wantErr := len(set) == 0, (*Filter)(nil), error(nil)
		for _, flt := range set {
			m, a, e := flt.Eval(sub)
			if e != nil {
				wantErr = e
				break
			}
			if m && a {
				want, wantBy = true, flt
				break
			}
		}
		if ok != want || by != wantBy || (err == nil) != (wantErr == nil) {
			t.Fatalf("Accept(%q) = %v %v %v; want %v %v %v", sub, ok, by, err, want, wantBy, wantErr)
		}
	})
}
