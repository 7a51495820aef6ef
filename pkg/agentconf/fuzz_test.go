package agentconf

import (
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/monolith-go/monolith/internal/fuzzseed"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// The fuzz targets of the agent.conf readers. Seeds are the Python goldens of agent_service/utils
// and the Go goldens' agent.conf inputs; run one with
//
//	go test ./pkg/agentconf -run='^$' -fuzz='^FuzzParseConf$' -fuzztime=60s

// Files the conf fuzzers write: main.conf is parsed, inc.conf is what it may include.
const (
	fuzzMain = "main.conf"
	fuzzInc  = "inc.conf"
)

// fuzzStrip is Python's str.strip(): Go's white space and the separators \x1c-\x1f.
func fuzzStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) })
}

// fuzzLines splits text at "\n", "\r\n" and "\r" (Python's universal newlines; a superset of
// where ParseConf may end a line).
func fuzzLines(text string) []string {
	return strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
}

// includeTargets lists the files the conf text includes, read as ParseConf reads its lines.
func includeTargets(text string) []string {
	var out []string
	for _, line := range fuzzLines(text) {
		line = fuzzStrip(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, "#"); i > 0 {
			line = line[:i]
		}
		if strings.HasPrefix(line, "include") {
			f := strings.Fields(line)
			out = append(out, f[len(f)-1])
		}
	}
	return out
}

// localIncludes reports whether the texts can include nothing but files of the test's directory:
// a path with a '/' could name a device or a file outside the test, which no property is about.
// It errs on the safe side: no '/' may follow an "include" anywhere.
func localIncludes(texts ...string) bool {
	for _, t := range texts {
		if i := strings.Index(t, "include"); i >= 0 && strings.Contains(t[i:], "/") {
			return false
		}
	}
	return true
}

// writeConfs makes dir the current directory (for the input's duration) and writes main.conf and
// inc.conf there. One directory serves every input of a run: a directory per input is much slower.
// (The fuzz target cannot change directory itself: its worker reads the corpus relative to it.)
func writeConfs(t *testing.T, dir, main, inc string) {
	t.Helper()
	t.Chdir(dir)
	for name, text := range map[string]string{fuzzMain: main, fuzzInc: inc} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// confSeeds are agent.conf texts (with what "<include>" names, when the case has one) from the
// goldens, plus edge cases.
func confSeeds(f *testing.F) [][2]string {
	var out [][2]string
	cases := fuzzseed.PythonCases(f, "utils")
	for _, c := range fuzzseed.Calls(cases, "conf_parser(file, args)", "AgentConfig.from_file") {
		main, _ := c.Input["file_content"].(string)
		inc, _ := c.Input["include_file_content"].(string)
		out = append(out, [2]string{strings.ReplaceAll(main, "<include>", fuzzInc), inc})
	}
	for _, dir := range []string{"agent_service/utils/conf_parser", "agent_service/utils/agent_config"} {
		for _, b := range fuzzseed.GoInputs(f, dir) {
			out = append(out, [2]string{string(b), ""})
		}
	}
	return append(out,
		[2]string{"a 1\ninclude inc.conf\nd 4\n", "c 3\nc 33\ninclude missing.conf\n"},
		[2]string{"include inc.conf", "include main.conf"}, // a cycle
		[2]string{"k\tv # comment\n=v\na=\na 1\na=\na 2\n", ""},
		[2]string{"a 1\r\nb 2\rc 3\n\x1cd 4\n\u00a0e 5\u0085\n", ""},
		[2]string{"include\nincludes x\ninclude .\n#include inc.conf\n", "x 1"},
		[2]string{"bzid " + strings.Repeat("\xff", 5000) + "\n", ""},
		[2]string{"bzid x\nbzid y\nbzid z\nbzid w\n", ""},
		[2]string{"zk_servers " + strings.Repeat("h:1,", 2000) + "\n", ""},
	)
}

// FuzzParseConf: ParseConf never fails on a file without includes; what it returns is consistent
// (every key once, values with where they came from); an included file reads as if its lines stood
// in place of the include line; and printing the result as "key=value" lines and parsing that
// gives the same keys and values.
func FuzzParseConf(f *testing.F) {
	for _, s := range confSeeds(f) {
		f.Add(s[0], s[1])
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, main, inc string) {
		if !localIncludes(main, inc) {
			return
		}
		writeConfs(t, dir, main, inc)
		c, err := ParseConf(fuzzMain)
		if err != nil {
			if len(includeTargets(main)) == 0 {
				t.Fatalf("ParseConf of a file without includes: %v", err)
			}
			return
		}
		checkConf(t, c)

		// Inlining: with only inc.conf included, and nothing included from it.
		if targets := includeTargets(main); len(targets) > 0 && len(includeTargets(inc)) == 0 {
			inlined, ok := inline(main, inc)
			if ok {
				writeConfs(t, dir, inlined, "")
				ci, err := ParseConf(fuzzMain)
				if err != nil {
					t.Fatalf("ParseConf of the inlined text: %v", err)
				}
				if !reflect.DeepEqual(values(c), values(ci)) || !reflect.DeepEqual(c.Keys, ci.Keys) {
					t.Fatalf("include differs from its text in place:\n%q\n%q", values(c), values(ci))
				}
			}
		}

		// Printing: a value ending in white space (left by a cut comment) loses it when its line
		// is read again, as in the reference.
		for _, e := range c.Entries {
			for _, v := range e.Values {
				if r, _ := utf8.DecodeLastRuneInString(v); v != "" && unicode.IsSpace(r) {
					return
				}
			}
		}
		var b strings.Builder
		for _, k := range c.Keys {
			for _, v := range c.Entries[k].Values {
				b.WriteString(k + "=" + v + "\n")
			}
		}
		writeConfs(t, dir, b.String(), "")
		cr, err := ParseConf(fuzzMain)
		if err != nil {
			t.Fatalf("ParseConf of the printed conf: %v", err)
		}
		if !reflect.DeepEqual(values(c), values(cr)) || !reflect.DeepEqual(c.Keys, cr.Keys) || len(cr.Ignored) != 0 {
			t.Fatalf("printed conf reads back differently:\n%q\n%q\nignored %v", values(c), values(cr), cr.Ignored)
		}
	})
}

// inline replaces main's include lines (all of inc.conf) with inc's lines.
func inline(main, inc string) (string, bool) {
	var b strings.Builder
	for _, line := range fuzzLines(main) {
		if ts := includeTargets(line); len(ts) == 1 {
			if ts[0] != fuzzInc {
				return "", false
			}
			b.WriteString(inc + "\n")
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String(), true
}

func values(c *Conf) map[string][]string {
	out := map[string][]string{}
	for k, e := range c.Entries {
		out[k] = e.Values
	}
	return out
}

func checkConf(t *testing.T, c *Conf) {
	t.Helper()
	if len(c.Keys) != len(c.Entries) {
		t.Fatalf("%d keys, %d entries", len(c.Keys), len(c.Entries))
	}
	py := c.PyMap()
	for _, k := range c.Keys {
		e := c.Entries[k]
		switch {
		case e == nil || e.Key != k:
			t.Fatalf("key %q: entry %+v", k, e)
		case len(e.Values) == 0 || len(e.Files) != len(e.Values) || len(e.Lines) != len(e.Values):
			t.Fatalf("key %q: %d values, %d files, %d lines", k, len(e.Values), len(e.Files), len(e.Lines))
		case e.Values[0] == "":
			t.Fatalf("key %q: first value empty", k)
		case strings.ContainsAny(k, " =\t#") || strings.HasPrefix(k, "include"):
			t.Fatalf("key %q cannot come from a line", k)
		}
		for i, v := range e.Values {
			if strings.ContainsAny(v, "#\n") || e.Lines[i] < 1 {
				t.Fatalf("key %q: value %q at line %d", k, v, e.Lines[i])
			}
		}
		switch v := py[k].(type) {
		case string:
			if len(e.Values) != 1 || v != e.Values[0] {
				t.Fatalf("key %q: PyValue %q of %q", k, v, e.Values)
			}
		case []string:
			if len(e.Values) < 2 || !reflect.DeepEqual(v, e.Values[:2]) {
				t.Fatalf("key %q: PyValue %q of %q", k, v, e.Values)
			}
		default:
			t.Fatalf("key %q: PyValue %T", k, v)
		}
	}
}

// maxConfError bounds FromFile's messages: values are quoted clipped, so a huge value cannot make
// a huge message.
const maxConfError = 4096

// FuzzFromFile: loading any agent.conf (with any environment) gives a config or an error, never a
// panic; an error names the file and stays short whatever the value sizes; a config answers every
// derived question (settings, properties, command lines, the platform config) the same way twice.
func FuzzFromFile(f *testing.F) {
	cases := fuzzseed.PythonCases(f, "utils")
	for _, c := range fuzzseed.Calls(cases, "AgentConfig.from_file") {
		text, _ := c.Input["file_content"].(string)
		env, _ := c.Input["env"].(map[string]any)
		var e strings.Builder
		for k, v := range env {
			s, _ := v.(string)
			e.WriteString(k + "=" + s + "\n")
		}
		f.Add(text, e.String())
	}
	for _, b := range fuzzseed.GoInputs(f, "agent_service/utils/agent_config") {
		var e strings.Builder
		for _, line := range strings.Split(string(b), "\n") {
			if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "# env:"); ok {
				e.WriteString(strings.TrimSpace(kv) + "\n")
			}
		}
		f.Add(string(b), e.String())
	}
	for _, s := range confSeeds(f) {
		f.Add(s[0], "PORT=1\nSHARD_ID=x\n")
	}
	f.Add("deploy_type "+strings.Repeat("é", 3000)+"\n", "")
	f.Add("bzid b\ndeploy_type ps\nnum_ps 2**70\n", "REPLICA_ID=3\nMONOLITH_HOST_SHARD_N=1")
	f.Add("bzid b\ndeploy_type dense\ndense_alone 1\nzk_servers [::1]:2181,127.0.0.1/a/b/\n", "DENSE_SERVICE_IDX=1\nPORT=99999")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text, envText string) {
		if !localIncludes(text) {
			return
		}
		env := map[string]string{}
		for _, line := range strings.Split(envText, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		// A usable host address: without one the config looks the host name up and probes a route.
		env["MY_HOST_IP"] = "10.1.2.3"
		writeConfs(t, dir, text, "")
		load := func() (*AgentConfig, error) {
			next := 30000
			return FromFile(fuzzMain, Options{
				Env:      MapEnv(env),
				FreePort: func() (int, error) { next++; return next, nil },
				Logger:   slog.New(slog.DiscardHandler),
			})
		}
		c, err := load()
		if err != nil {
			if c != nil {
				t.Fatalf("config with error %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, ".conf") {
				t.Fatalf("error does not name the file: %v", err)
			}
			if len(msg) > maxConfError {
				t.Fatalf("error of %d bytes: %.300q...", len(msg), msg)
			}
			if errkind.Of(err) == errkind.Unknown {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		d1, d2 := describe(t, c), describe(t, mustLoad(t, load))
		if !reflect.DeepEqual(d1, d2) {
			t.Fatalf("two loads of one file differ:\n%q\n%q", d1, d2)
		}
	})
}

func mustLoad(t *testing.T, load func() (*AgentConfig, error)) *AgentConfig {
	t.Helper()
	c, err := load()
	if err != nil {
		t.Fatalf("second load: %v", err)
	}
	return c
}

// describe is every derived answer of c, errors included.
func describe(t *testing.T, c *AgentConfig) []string {
	t.Helper()
	var out []string
	for _, s := range append(c.Settings(), c.Properties()...) {
		out = append(out, s.Name+"="+s.Value)
	}
	for _, st := range append(c.ServerTypes(), "", "mixed", ServerPS, ServerEntry, ServerDense, "x") {
		cmd, port, err := c.CmdAndPort("tensorflow_model_server", st, "/tmp/model.cfg")
		out = append(out, st+": "+cmd+" "+strconv.Itoa(port)+" "+errString(err))
		if msc, err := c.ModelServerConfig(st); err == nil {
			out = append(out, msc.String())
		} else {
			out = append(out, errString(err))
		}
		sched, err := c.ServerSchedule(st)
		out = append(out, strconv.Itoa(len(sched))+errString(err))
	}
	text, err := c.PlatformConfigText()
	return append(out, text, errString(err))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzZKPath: a service path that matches gives back its fields, and the fields printed in the
// path's form give the path; Task, Location and ShipIn agree with the fields.
func FuzzZKPath(f *testing.F) {
	cases := fuzzseed.PythonCases(f)
	for _, s := range fuzzseed.Matching(fuzzseed.AllStrings(cases), func(s string) bool { return strings.HasPrefix(s, "/") }) {
		f.Add(s)
	}
	for _, s := range []string{"/a/service/m/ps:0/1\n", "/a/service/m/lf:default/ps:\u0661/\uff11", "/a/service/m/\u2167:0",
		"/a/service/m/x:y/ps:0/1/2", "/a/service/m/ps:0\n\n", "//service//ps:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		z := ParseZKPath(path)
		if z.Path != path {
			t.Fatalf("Path %q", z.Path)
		}
		if z.Bzid == nil {
			if z != (ZKPath{Path: path}) || z.Task() != nil || z.Location() != nil || !z.ShipIn(nil, nil) {
				t.Fatalf("no match but fields: %+v", z)
			}
			return
		}
		for name, p := range map[string]*string{"bzid": z.Bzid, "base_name": z.BaseName, "server_type": z.ServerType, "index": z.Index} {
			if p == nil || *p == "" {
				t.Fatalf("%q: %s not set: %+v", path, name, z)
			}
		}
		if (z.IDC == nil) != (z.Cluster == nil) {
			t.Fatalf("%q: idc %v, cluster %v", path, z.IDC, z.Cluster)
		}
		rebuilt := "/" + *z.Bzid + "/service/" + *z.BaseName
		if z.IDC != nil {
			rebuilt += "/" + *z.IDC + ":" + *z.Cluster
		}
		rebuilt += "/" + *z.ServerType + ":" + *z.Index
		if z.Replica != nil {
			rebuilt += "/" + *z.Replica
		}
		if path != rebuilt && path != rebuilt+"\n" {
			t.Fatalf("%q rebuilt as %q", path, rebuilt)
		}
		if again := ParseZKPath(rebuilt); !reflect.DeepEqual(again.Task(), z.Task()) || !reflect.DeepEqual(again.Location(), z.Location()) ||
			!reflect.DeepEqual(again.Replica, z.Replica) || !reflect.DeepEqual(again.Bzid, z.Bzid) {
			t.Fatalf("%q rebuilt as %q parses as %+v", path, rebuilt, again)
		}
		if task := z.Task(); task == nil || *task != *z.ServerType+":"+*z.Index {
			t.Fatalf("Task %v", task)
		}
		if loc := z.Location(); (loc == nil) != (z.IDC == nil) || (loc != nil && *loc != *z.IDC+":"+*z.Cluster) {
			t.Fatalf("Location %v", loc)
		}
		if !z.ShipIn(nil, nil) || (z.IDC != nil && !z.ShipIn(z.IDC, z.Cluster)) {
			t.Fatalf("%q does not ship in its own location", path)
		}
		other := "\x00"
		if z.ShipIn(&other, &other) {
			t.Fatalf("%q ships in %q", path, other)
		}
	})
}

// FuzzSubModelName: a sub model name that parses prints back ("{type}_{index}") to a name that
// parses to the same; errors are errors of a kind, never panics.
func FuzzSubModelName(f *testing.F) {
	cases := fuzzseed.PythonCases(f, "utils")
	for _, c := range fuzzseed.Calls(cases, "pasre_sub_model_name(name)") {
		s, _ := c.Input["sub_model_name"].(string)
		f.Add(s)
	}
	for _, s := range []string{"ps_3", "PS_3", "entry", "ps_x", "a_b_c", "", " ps_ 1_0 ", "ps_\u0663", "ps_-0", "_1", "ps_99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		typ, idx, err := ParseSubModelName(name)
		if err != nil {
			if errkind.Of(err) == errkind.Unknown {
				t.Fatalf("%q: error without a kind: %v", name, err)
			}
			return
		}
		if typ != strings.ToLower(typ) || strings.Contains(typ, "_") {
			t.Fatalf("%q: type %q", name, typ)
		}
		printed := typ + "_" + strconv.Itoa(idx)
		typ2, idx2, err := ParseSubModelName(printed)
		if err != nil || typ2 != typ || idx2 != idx {
			t.Fatalf("%q -> (%q, %d) printed %q -> (%q, %d, %v)", name, typ, idx, printed, typ2, idx2, err)
		}
	})
}

// FuzzDeployType: deploy and server types are accepted in any case and come out lower case;
// CompatServerType's answer is one the deploy type runs.
func FuzzDeployType(f *testing.F) {
	cases := fuzzseed.PythonCases(f, "utils")
	for _, c := range fuzzseed.Calls(cases, "DeployType(dtype)", "DeployType(dtype).compat_server_type(server_type)") {
		for _, s := range fuzzseed.Strings(map[string]any(c.Input)) {
			f.Add(s, "ps")
			f.Add("mixed", s)
		}
	}
	for _, s := range [][2]string{{"MIXED", ""}, {"Ps", "ps"}, {"entry", "ps"}, {"unified", "mixed"}, {"\u0130", "i"}, {"dense", "DENSE"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, dtype, serverType string) {
		d, err := ParseDeployType(dtype)
		if err != nil {
			if errkind.Of(err) != errkind.Precondition {
				t.Fatalf("%q: %v", dtype, err)
			}
			return
		}
		if string(d) != strings.ToLower(dtype) {
			t.Fatalf("%q -> %q", dtype, d)
		}
		if again, err := ParseDeployType(string(d)); err != nil || again != d {
			t.Fatalf("%q -> %q -> %q, %v", dtype, d, again, err)
		}
		st, err := d.CompatServerType(serverType)
		if err != nil {
			return
		}
		switch {
		case d == DeployMixed && (st == "" || st == string(DeployMixed)):
			t.Fatalf("mixed runs %q", st)
		case d != DeployMixed && st != string(d):
			t.Fatalf("deploy type %q runs %q", d, st)
		}
	})
}
