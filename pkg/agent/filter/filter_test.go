package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	utilsspec "github.com/monolith-go/monolith/gen/spec/agent_service/utils"
	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// filterSet is one line of testdata/python_filters.json (recorded by running the reference's normalize_regex and AgentV3 filter loop outside this repository).
type filterSet struct {
	Filters   []string       `json:"filters"`
	ShardID   int            `json:"shard_id"`
	NumShard  int            `json:"num_shard"`
	InitError string         `json:"init_error"`
	DebugInfo []string       `json:"debug_info"`
	Results   map[string]any `json:"results"` // sub graph -> accepted (bool) or the exception's class
}

// hostileAccepted are filter sets the reference runs happily and the Go filter rejects when
// parsing, on purpose: the reference's eval runs any Python, with agent_v3's module globals.
var hostileAccepted = map[string]bool{"entry; os.getcwd()": true}

// TestPythonFilters replays the reference's decisions (AgentV3's filter construction and its
// layout callback's loop, run outside this repository) on every recorded set and sub graph.
func TestPythonFilters(t *testing.T) {
	data, err := os.ReadFile("testdata/python_filters.json")
	if err != nil {
		t.Fatal(err)
	}
	var sets []filterSet
	if err := json.Unmarshal(data, &sets); err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, s := range sets {
		name := fmt.Sprintf("%q shard %d/%d", s.Filters, s.ShardID, s.NumShard)
		fs, err := ParseAll(s.Filters, NewParams(s.ShardID, s.NumShard))
		if s.InitError != "" {
			checked["init error"]++
			if err == nil {
				t.Errorf("%s: the reference raised %s building the filters; Go parsed them", name, s.InitError)
			}
			continue
		}
		if err != nil {
			// Stricter than the reference: it fails later (first evaluation), or never.
			var pyErr string
			for _, r := range s.Results {
				if e, ok := r.(string); ok {
					pyErr = e
				}
			}
			if pyErr == "" && !hostileAccepted[strings.Join(s.Filters, "|")] {
				t.Errorf("%s: Go rejects the filters (%v) but the reference never failed", name, err)
			}
			checked["parse error"]++
			continue
		}
		if got := fs.Strings(); !reflect.DeepEqual(got, s.DebugInfo) && len(s.DebugInfo)+len(got) > 0 {
			t.Errorf("%s: debug info %q, want %q", name, got, s.DebugInfo)
		}
		subs := make([]string, 0, len(s.Results))
		for sg := range s.Results {
			subs = append(subs, sg)
		}
		sort.Strings(subs)
		for _, sg := range subs {
			ok, f, err := fs.Accept(sg)
			switch want := s.Results[sg].(type) {
			case bool:
				checked["decision"]++
				if err != nil || ok != want {
					t.Errorf("%s: Accept(%q) = %v, %v; the reference: %v", name, sg, ok, err, want)
				}
				if ok && len(fs) > 0 && f == nil {
					t.Errorf("%s: Accept(%q) accepted with no filter", name, sg)
				}
			case string:
				checked["eval error"]++
				wantKind := map[string]errkind.Kind{"ZeroDivisionError": errkind.Value, "ValueError": errkind.Value,
					"TypeError": errkind.Type}[want]
				if err == nil || errkind.Of(err) != wantKind {
					t.Errorf("%s: Accept(%q) = %v, %v; the reference raised %s (want kind %v)", name, sg, ok, err, want, wantKind)
				}
			}
		}
	}
	for _, k := range []string{"init error", "parse error", "decision", "eval error"} {
		if checked[k] == 0 {
			t.Errorf("python_filters.json has no %s case", k)
		}
	}
}

// TestExampleConf runs the layout filters of cmd/agent/example.conf through agentconf, on shard 1
// of 2: entry everywhere, the odd PS shards here.
func TestExampleConf(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "agent.conf")
	text := "bzid demo\ndeploy_type unified\nagent_version 3\nzk_servers 127.0.0.1:2181\nlayout_pattern demo_layout\n" +
		"layout_filters entry; True\nlayout_filters ps_{i}; ${shard_id} == ${i} % ${shard_num}\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SHARD_ID": "1", "MONOLITH_HOST_SHARD_N": "2", "MY_HOST_IP": "127.0.0.1"}
	c, err := agentconf.FromFile(conf, agentconf.Options{
		Env:      agentconf.MapEnv(env),
		FreePort: func() (int, error) { return 1, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := FromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fs.Strings(), []string{"entry; True", `ps_(?P<i>\d+); 1 == ${i} % 2`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("filters %q, want %q", got, want)
	}
	want := map[string]bool{"entry": true, "ps_0": false, "ps_1": true, "ps_2": false, "ps_3": true, "dense": false}
	for sg, w := range want {
		ok, f, err := fs.Accept(sg)
		if err != nil || ok != w {
			t.Errorf("Accept(%q) = %v, %v; want %v", sg, ok, err, w)
		}
		if ok && f.Raw() != map[bool]string{true: "entry; True", false: "ps_{i}; ${shard_id} == ${i} % ${shard_num}"}[sg == "entry"] {
			t.Errorf("Accept(%q) by %q", sg, f.Raw())
		}
	}
}

func TestParamsFromConfig(t *testing.T) {
	cases := []struct {
		env  map[string]string
		num  *int
		want Params
		err  bool
	}{
		{env: map[string]string{}, want: Params{0, 1}},
		{env: map[string]string{"SHARD_ID": "3"}, num: ptr(4), want: Params{3, 4}},
		{env: map[string]string{"SHARD_ID": "-1"}, num: ptr(0), want: Params{0, 1}},
		{env: map[string]string{"SHARD_ID": "x"}, err: true},
	}
	for _, c := range cases {
		fields := utilsspec.DefaultAgentConfig()
		fields.DeployType = ptr("unified")
		conf, err := agentconf.New(fields, agentconf.Options{
			Env:      agentconf.MapEnv(c.env),
			FreePort: func() (int, error) { return 1, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		conf.NumShard = c.num
		got, err := ParamsFromConfig(conf)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("env %v num_shard %v: got %+v, %v; want %+v (error %v)", c.env, c.num, got, err, c.want, c.err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestParseErrors: every malformed filter is an error of kind Value naming the filter, the part
// and, for conditions, the column (1-based, in the condition after substitution).
func TestParseErrors(t *testing.T) {
	cases := []struct {
		raw  string
		part string
		col  int
		want string // the whole message when it starts with "layout filter", else a part of it
	}{
		{raw: "entry", want: `layout filter "entry": want pattern;condition (no ';' found)`},
		{raw: "", want: "no ';' found"},
		{raw: "ps_(; True", part: "pattern", want: "missing closing )"},
		{raw: "a)|(b; True", part: "pattern", want: "unexpected )"},
		{raw: "(?=ps); True", part: "pattern", want: "invalid or unsupported Perl syntax"},
		{raw: `(\w)\1; True`, part: "pattern", want: "invalid escape sequence"},
		{raw: "ps_{0}; True", part: "pattern", want: `group name "0" is not an identifier`},
		{raw: "{i}_{i}; True", part: "pattern", want: `group name "i" is used twice`},
		{raw: "ps_{i}; ${shard_id} ==", part: "condition", col: 6, want: `layout filter "ps_{i}; ${shard_id} ==": condition " 2 ==", column 6: unexpected end of condition`},
		{raw: "ps_{i}; i == j", part: "condition", col: 7, want: "name 'j' is not defined (the pattern's groups are i)"},
		{raw: "entry; i", part: "condition", col: 2, want: "name 'i' is not defined (the pattern has no named groups)"},
		{raw: "entry; __import__('os').system('true')", part: "condition", col: 12, want: "calls are not supported"},
		{raw: "ps_{i}; i.bit_length()", part: "condition", col: 3, want: "attribute access"},
		{raw: "entry;", part: "condition", col: 1, want: "empty condition"},
		{raw: "ps_{i}; i / 2 == 1", part: "condition", col: 4, want: "true division"},
	}
	for _, c := range cases {
		f, err := Parse(c.raw, Params{ShardID: 2, ShardNum: 4})
		if err == nil {
			t.Errorf("%q: parsed as %q", c.raw, f)
			continue
		}
		var fe *Error
		if !errors.As(err, &fe) || errkind.Of(err) != errkind.Value {
			t.Errorf("%q: error %v (%T, kind %v): want *Error of kind Value", c.raw, err, err, errkind.Of(err))
			continue
		}
		if fe.Filter != c.raw || fe.Part != c.part || fe.Column != c.col || fe.SubGraph != "" {
			t.Errorf("%q: error fields %+v; want part %q column %d", c.raw, fe, c.part, c.col)
		}
		if strings.HasPrefix(c.want, "layout filter") {
			if err.Error() != c.want {
				t.Errorf("%q: error\n  %s\nwant\n  %s", c.raw, err, c.want)
			}
		} else if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), fmt.Sprintf("layout filter %q", c.raw)) {
			t.Errorf("%q: error %q, want it to name the filter and contain %q", c.raw, err, c.want)
		}
	}
}

// TestEvalError: failures at evaluation name the sub graph too, with the reference's exception
// classes as kinds (ValueError, TypeError, ZeroDivisionError -> Value).
func TestEvalError(t *testing.T) {
	cases := []struct {
		raw, subGraph string
		kind          errkind.Kind
		want          string
	}{
		{"ps_{i}; 1 // (i - 3)", "ps_3", errkind.Value,
			`layout filter "ps_{i}; 1 // (i - 3)", sub graph "ps_3": condition " 1 // (i - 3)", column 4: integer division or modulo by zero`},
		{"ps_{i}; i * i > 0", "ps_9999999999", errkind.Value, "integer overflow in 9999999999 * 9999999999"},
		{"ps_{i}; True", "ps_99999999999999999999", errkind.Value, `group 'i' = "99999999999999999999": integer out of the 64-bit range`},
		{"(?P<m>[a-z]+); True", "ps", errkind.Value, `layout filter "(?P<m>[a-z]+); True", sub graph "ps": group 'm' = "ps": not an integer`},
		{"ps(_{i})?; True", "ps", errkind.Type, "group 'i' did not take part in the match"},
	}
	for _, c := range cases {
		f, err := Parse(c.raw, Params{ShardNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		matched, ok, err := f.Eval(c.subGraph)
		var fe *Error
		if !matched || ok || !errors.As(err, &fe) || fe.SubGraph != c.subGraph || errkind.Of(err) != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q on %q: %v %v %v (kind %v); want kind %v error %q", c.raw, c.subGraph, matched, ok, err, errkind.Of(err), c.kind, c.want)
		}
		// The set stops at the error: the reference's eval raises out of its callback.
		fs := Set{f, mustParse(t, "; True")}
		if ok, _, err := fs.Accept(c.subGraph); ok || err == nil {
			t.Errorf("Set.Accept(%q) = %v, %v; want the error", c.subGraph, ok, err)
		}
	}
}

func mustParse(t *testing.T, raw string) *Filter {
	t.Helper()
	f, err := Parse(raw, Params{ShardNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAcceptOrder: the first filter whose pattern matches and whose condition holds accepts; a
// match with a false condition passes on; re.match semantics (anchored at the start only).
func TestAcceptOrder(t *testing.T) {
	fs, err := ParseAll([]string{"ps_{i}; i > 5", "ps_{i}; i % 2 == 0", "entry; 1", "dense|other; False"}, Params{ShardNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sub  string
		ok   bool
		by   int
		matc bool
	}{
		{"ps_7", true, 0, true}, {"ps_4", true, 1, true}, {"ps_3", false, -1, true}, {"ps_8x", true, 0, true},
		{"entry", true, 2, true}, {"entry_ps_1", true, 2, true}, {"xentry", false, -1, false},
		{"dense", false, -1, true}, {"other", false, -1, true}, {"ps_", false, -1, false}, {"", false, -1, false},
	}
	for _, c := range cases {
		ok, f, err := fs.Accept(c.sub)
		if err != nil || ok != c.ok || (c.by >= 0 && f != fs[c.by]) || (c.by < 0 && f != nil) {
			t.Errorf("Accept(%q) = %v, %v, %v; want %v by #%d", c.sub, ok, f, err, c.ok, c.by)
		}
	}
	// An empty set accepts everything, as the reference's len(self._layout_filters) == 0 does.
	if ok, f, err := Set(nil).Accept("anything"); !ok || f != nil || err != nil {
		t.Errorf("empty set: %v %v %v", ok, f, err)
	}
	if got := fs[0].String(); got != `ps_(?P<i>\d+); i > 5` {
		t.Errorf("String() = %q", got)
	}
	if fs[0].Pattern() != `ps_(?P<i>\d+)` || fs[0].Condition() != " i > 5" || fs[0].Raw() != "ps_{i}; i > 5" {
		t.Errorf("accessors: %q %q %q", fs[0].Pattern(), fs[0].Condition(), fs[0].Raw())
	}
}

// TestManyGroups: more groups than Eval keeps on the stack.
func TestManyGroups(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "k", "m"}
	var pat, sub, sum []string
	for i, n := range names {
		pat = append(pat, "{"+n+"}")
		sub = append(sub, fmt.Sprint(i+1))
		sum = append(sum, n)
	}
	f := mustParse(t, strings.Join(pat, "_")+"; "+strings.Join(sum, " + ")+" == 55")
	if m, ok, err := f.Eval(strings.Join(sub, "_")); !m || !ok || err != nil {
		t.Fatalf("Eval = %v %v %v", m, ok, err)
	}
}

// FuzzFilter: no filter text or sub graph makes Parse or Eval panic, and every error is an *Error
// naming the filter.
func FuzzFilter(f *testing.F) {
	for _, s := range [][2]string{
		{"entry; True", "entry"}, {"ps_{i}; ${shard_id} == ${i} % ${shard_num}", "ps_3"},
		{"ps_{i}_{j}; i // j", "ps_1_0"}, {"(?P<m>[a-z]+)_{i}; i", "ps_1"}, {"ps_{i}(x_{j})?; j", "ps_1"},
		{"{a}{b}; a*b*a*b*a*b", "99999999999"}, {"; not", ""}, {"x;;;", "x"},
	} {
		f.Add(s[0], s[1], 1, 2)
	}
	f.Fuzz(func(t *testing.T, raw, sub string, shard, num int) {
		flt, err := Parse(raw, NewParams(shard, num))
		var fe *Error
		if err != nil {
			if !errors.As(err, &fe) || fe.Filter != raw {
				t.Fatalf("Parse(%q): %v (%T)", raw, err, err)
			}
			return
		}
		_, _, err = flt.Eval(sub)
		if err != nil && (!errors.As(err, &fe) || fe.SubGraph != sub) {
			t.Fatalf("Eval(%q) of %q: %v (%T)", sub, raw, err, err)
		}
	})
}

// BenchmarkAccept is one layout callback's decision for one saved model, under the example
// filters.
func BenchmarkAccept(b *testing.B) {
	fs, err := ParseAll([]string{"entry; True", "ps_{i}; ${shard_id} == i % ${shard_num}"}, Params{ShardID: 1, ShardNum: 4})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, err := fs.Accept("ps_13"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkParse is the cost of building one filter at startup.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("ps_{i}; ${shard_id} == i % ${shard_num} and not (i > 100 or i < 0)", Params{ShardID: 1, ShardNum: 4}); err != nil {
			b.Fatal(err)
		}
	}
}
