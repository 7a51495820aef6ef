package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadDirSortedRecursive(t *testing.T) {
	dir := writeCases(t, "b", goldenCase{name: "z", call: "echo", output: 1}, goldenCase{name: "a", call: "echo", output: 2})
	if err := os.MkdirAll(filepath.Join(dir, "a", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := goldenCase{name: "m", call: "raise", input: map[string]any{"env": map[string]string{"PORT": "8001"}},
		pyErr: pyErr("ValueError", "bad")}
	if err := os.WriteFile(filepath.Join(dir, "a", "deep", "m.json"), c.json(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a case"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cases {
		rel, _ := filepath.Rel(dir, c.File)
		got = append(got, filepath.ToSlash(rel))
	}
	if want := "a/deep/m.json b/a.json b/z.json"; strings.Join(got, " ") != want {
		t.Fatalf("files %v, want %s", got, want)
	}
	m := cases[0]
	if m.Module != testModule || m.Case != "m" || m.Call != "raise" || m.Error == nil ||
		*m.Error != (PyError{Type: "ValueError", Message: "bad"}) || string(m.Output) != "null" ||
		m.Name() != testModule+"/m" {
		t.Fatalf("case m = %+v", m)
	}
	if env, _ := caseEnv(m.Input); env["PORT"] != "8001" {
		t.Fatalf("env = %v", env)
	}
}

func TestLoadDirMalformed(t *testing.T) {
	valid := func() map[string]any {
		return map[string]any{"module": testModule, "case": "bad", "call": "echo",
			"input": map[string]any{"env": map[string]string{}}, "output": 1, "error": nil}
	}
	with := func(key string, v any) []byte {
		m := valid()
		if v == nil {
			delete(m, key)
		} else {
			m[key] = v
		}
		b, _ := json.Marshal(m)
		return b
	}
	tests := []struct {
		name    string
		content []byte
		wantErr string
	}{
		{"truncated", []byte(`{"module": "x",`), "malformed JSON"},
		{"trailing data", append(with("case", "bad"), []byte(" {}")...), "trailing data"},
		{"unknown key", with("extra", 1), `unknown field "extra"`},
		{"missing call", with("call", nil), `missing or empty "call"`},
		{"missing input", with("input", nil), `missing "input" object`},
		{"missing output", with("output", nil), `missing "output"`},
		{"output with error", with("error", map[string]string{"type": "ValueError", "message": ""}), `"output" must be null`},
		{"env not strings", with("input", map[string]any{"env": map[string]int{"PORT": 1}}), `"input.env" must map names to strings`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeCases(t, "m", goldenCase{name: "good", call: "echo", output: 1})
			bad := filepath.Join(dir, "m", "bad.json")
			if err := os.WriteFile(bad, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDir(dir)
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("LoadDir error %v, want one naming %s and saying %q", err, bad, tc.wantErr)
			}
		})
	}
	if _, err := LoadDir(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("LoadDir of a missing directory must fail")
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	fn := func(*Ctx, Input) (any, error) { return nil, nil }
	r.Register("b", fn)
	r.Register("a", fn)
	if _, ok := r.Lookup("a"); !ok {
		t.Fatal("Lookup(a) failed")
	}
	if _, ok := r.Lookup("c"); ok {
		t.Fatal("Lookup(c) must fail")
	}
	if got := strings.Join(r.Calls(), ","); got != "a,b" {
		t.Fatalf("Calls() = %s", got)
	}
	for name, register := range map[string]func(){
		"duplicate": func() { r.Register("a", fn) },
		"nil func":  func() { r.Register("n", nil) },
		"no name":   func() { r.Register("", fn) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register must panic")
				}
			}()
			register()
		})
	}
}

func TestInput(t *testing.T) {
	in := Input{}
	if err := json.Unmarshal([]byte(`{"s": "x", "n": null, "i": 42, "f": 1.0, "b": true, "o": {"k": [1]}}`), &in); err != nil {
		t.Fatal(err)
	}
	if s, err := in.Str("s"); err != nil || s != "x" {
		t.Errorf("Str(s) = %q, %v", s, err)
	}
	if p, err := in.OptStr("n"); err != nil || p != nil {
		t.Errorf("OptStr(n) = %v, %v", p, err)
	}
	if p, err := in.OptStr("s"); err != nil || p == nil || *p != "x" {
		t.Errorf("OptStr(s) = %v, %v", p, err)
	}
	if i, err := in.Int("i"); err != nil || i != 42 {
		t.Errorf("Int(i) = %d, %v", i, err)
	}
	if b, err := in.Bool("b"); err != nil || !b {
		t.Errorf("Bool(b) = %v, %v", b, err)
	}
	var o struct{ K []int }
	if err := in.Decode("o", &o); err != nil || len(o.K) != 1 {
		t.Errorf("Decode(o) = %+v, %v", o, err)
	}
	if !in.Has("n") || in.Has("absent") {
		t.Error("Has")
	}
	errs := map[string]error{}
	_, errs[`input "absent": missing`] = in.Str("absent")
	_, errs[`input "i": want a string, got 42`] = in.Str("i")
	_, errs[`input "i": want a string or null, got 42`] = in.OptStr("i")
	_, errs[`input "f": want an integer, got 1.0`] = in.Int("f")
	_, errs[`input "s": want true or false, got "x"`] = in.Bool("s")
	_, errs[`input "absent": missing`+" "] = in.Raw("absent")
	errs[`input "s": json: cannot unmarshal`] = in.Decode("s", &o)
	for want, err := range errs {
		if err == nil || !strings.HasPrefix(err.Error(), strings.TrimSpace(want)) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
