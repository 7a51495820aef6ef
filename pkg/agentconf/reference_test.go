package agentconf

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Expected values in this file are what the reference (monolith/agent_service/utils.py, Python
// 3.11) returned or raised for the same inputs.

func TestParseConfOnto(t *testing.T) {
	tests := []struct {
		name, conf, args, want string
	}{
		{"string then value", "a 1\nb 2\n", `{"a":"0"}`, `{"a":["0","1"],"b":"2"}`},
		{"string then two values", "a 1\na 2\n", `{"a":"0"}`, `{"a":["0","1"]}`},
		{"list kept", "a 1\na 2\n", `{"a":["x","y","z"]}`, `{"a":["x","y","z"]}`},
		{"empty list kept", "a 1\n", `{"a":[]}`, `{"a":[]}`},
		{"number then value", "a 1\n", `{"a":5}`, `{"a":[5,"1"]}`},
		{"None then value", "a 1\n", `{"a":null}`, `{"a":[null,"1"]}`},
		{"empty value appended", "a =\nb 2\n", `{"a":"0"}`, `{"a":["0",""],"b":"2"}`},
		{"other keys untouched", "b 2\n", `{"a":"0","c":["1"]}`, `{"a":"0","b":"2","c":["1"]}`},
		{"no args", "a 1\na 2\na 3\n", `{}`, `{"a":["1","2"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "agent.conf", tc.conf)
			var args map[string]any
			if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
				t.Fatal(err)
			}
			if err := ParseConfOnto(p, args); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(args)
			if string(got) != tc.want {
				t.Fatalf("args = %s, want %s", got, tc.want)
			}
		})
	}
	args := map[string]any{"a": "0"}
	if err := ParseConfOnto(filepath.Join(t.TempDir(), "missing.conf"), args); err != nil || len(args) != 1 || args["a"] != "0" {
		t.Fatalf("missing file: args %v, err %v", args, err)
	}
}

func TestParseSubModelNameReference(t *testing.T) {
	tests := []struct {
		in      string
		typ     string
		idx     int
		kind    errkind.Kind
		message string // checked when not empty: the reference's text
	}{
		{"  PS_3  ", "ps", 3, 0, ""},
		{"ps_2\x1f", "ps", 2, 0, ""}, // str.strip removes \x1c-\x1f
		{"\tps_2\n", "ps", 2, 0, ""},
		{"ps_ 3", "ps", 3, 0, ""},
		{"ps_\u0663", "ps", 3, 0, ""},
		{"_3", "", 3, 0, ""},
		{"ps_x", "", 0, errkind.Value, "invalid literal for int() with base 10: 'x'"},
		{"ps_", "", 0, errkind.Value, "invalid literal for int() with base 10: ''"},
		{"ps_3.0", "", 0, errkind.Value, "invalid literal for int() with base 10: '3.0'"},
		{"ps_0x10", "", 0, errkind.Value, "invalid literal for int() with base 10: '0x10'"},
		{"", "", 0, errkind.Runtime, "sub_model_name is None or empty"},
		{"ps_1_000", "", 0, errkind.Precondition, ""},
		{"ps_99999999999999999999", "", 0, errkind.Value, ""}, // Python's ints are unbounded; Go's are not
	}
	for _, tc := range tests {
		typ, idx, err := ParseSubModelName(tc.in)
		if tc.kind != 0 {
			if errkind.Of(err) != tc.kind || (tc.message != "" && err.Error() != tc.message) {
				t.Errorf("ParseSubModelName(%q) error %v (kind %v), want kind %v %q", tc.in, err, errkind.Of(err), tc.kind, tc.message)
			}
			continue
		}
		if err != nil || typ != tc.typ || idx != tc.idx {
			t.Errorf("ParseSubModelName(%q) = %q, %d, %v; want %q, %d", tc.in, typ, idx, err, tc.typ, tc.idx)
		}
	}
}

func TestExpandPatternErrorKinds(t *testing.T) {
	tests := []struct {
		pattern string
		kind    errkind.Kind
	}{
		{"x[1]", errkind.Type},      // int('1') works, list.extend(1) fails
		{"x[0-2,7]", errkind.Type},  // the same, after a range
		{"x[a]", errkind.Value},     // int('a') fails first
		{"x[]", errkind.Value},      // int('')
		{"x[0-2,]", errkind.Value},  // int('')
		{"x[1-2-3]", errkind.Value}, // too many values to unpack
		{"x[a-b]", errkind.Value},
	}
	for _, tc := range tests {
		if _, err := ExpandPattern(tc.pattern); errkind.Of(err) != tc.kind {
			t.Errorf("ExpandPattern(%q) = %v (kind %v), want kind %v", tc.pattern, err, errkind.Of(err), tc.kind)
		}
	}
}

func TestUpdateZKServersNumericLikePython(t *testing.T) {
	// str.isnumeric counts any Unicode numeric character, CJK numerals included.
	tests := []struct {
		servers string
		ipv4    bool
	}{
		{"127.1.2.3:2181", true},
		{"\uff11.\uff12.\uff13.\uff14:1", true},
		{"127.2.3.\u00b2:1", true},
		{"\u4e00.\u4e8c.\u4e09.\u56db:1", true},
		{"127..3.4:1", false},
		{" 127.1.2.3:1", false},
		{"a.b.c.d:1", false},
		{"127.1.2.3", false},
		{"[::1]:2181", false},
	}
	for _, tc := range tests {
		got, err := UpdateZKServers(tc.servers, true)
		if tc.ipv4 {
			if errkind.Of(err) != errkind.Generic || err.Error() != "the host is is ipv6 only, but zk_servers specified is ipv4" {
				t.Errorf("UpdateZKServers(%q) = %q, %v; want the reference's ipv4 error", tc.servers, got, err)
			}
			continue
		}
		if err != nil || got != tc.servers {
			t.Errorf("UpdateZKServers(%q) = %q, %v; want it unchanged", tc.servers, got, err)
		}
	}
}

func TestZKPathAttr(t *testing.T) {
	z := ParseZKPath("/bz/service/m/idc:cl/ps:0/1")
	for name, want := range map[string]string{"bzid": "bz", "base_name": "m", "idc": "idc", "cluster": "cl",
		"server_type": "ps", "index": "0", "replica_id": "1", "task": "ps:0", "location": "idc:cl",
		"path": "/bz/service/m/idc:cl/ps:0/1"} {
		got, err := z.Attr(name)
		if err != nil || got == nil || *got != want {
			t.Errorf("Attr(%q) = %v, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"replica", "foo", "Bzid", ""} {
		if _, err := z.Attr(name); errkind.Of(err) != errkind.Precondition {
			t.Errorf("Attr(%q) = %v, want a Precondition error (the reference asserts)", name, err)
		}
	}
	if got, err := ParseZKPath("/nope").Attr("task"); got != nil || err != nil {
		t.Errorf("unmatched path: Attr(task) = %v, %v; want nil, nil", got, err)
	}
}

// Lines are read as Python's text files read them (universal newlines) and stripped as str.strip
// strips them.
func TestParseConfPythonLines(t *testing.T) {
	tests := []struct{ name, conf, want string }{
		{"lone CR", "a 1\rb 2\rc 3\n", `{"a":"1","b":"2","c":"3"}`},
		{"CRLF", "a 1\r\nb 2\r\n", `{"a":"1","b":"2"}`},
		{"CR at the end", "a 1\r", `{"a":"1"}`},
		{"unit separators stripped", "\x1ca 1\x1f\nb\x1c2\n", `{"a":"1"}`},
		{"form feed is no line break", "a 1\x0cb 2\n", `{"a":"1\fb 2"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "agent.conf", tc.conf)
			c, err := ParseConf(p)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(c.PyMap())
			if string(got) != tc.want {
				t.Fatalf("PyMap = %s, want %s", got, tc.want)
			}
		})
	}
	// A "\r" at a read boundary still pairs with the "\n" after it.
	long := strings.Repeat("x", 64*1024-4)
	p := writeFile(t, t.TempDir(), "agent.conf", "a "+long+"\r\nb 2\n")
	c, err := ParseConf(p)
	if err != nil || len(c.Entries) != 2 || c.Entries["b"].Lines[0] != 2 {
		t.Fatalf("long line: %v, %+v", err, c)
	}
}
