package spec

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// decoder maps yaml nodes onto the spec structs by their yaml tags, strictly: unknown keys, duplicate
// keys, missing required keys and scalars of the wrong type are errors at file:line. (yaml.v3's
// KnownFields only works with its Decoder, not per node, and does not report required keys.)
type decoder struct{ file string }

var nodePtrType = reflect.TypeOf((*yaml.Node)(nil))

func (d *decoder) errf(n *yaml.Node, format string, args ...any) error {
	return &Error{File: d.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) decode(n *yaml.Node, out any, what string) error {
	return d.value(n, reflect.ValueOf(out).Elem(), what)
}

func (d *decoder) value(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind == yaml.AliasNode {
		return d.errf(n, "%s: YAML aliases are not allowed in specs", what)
	}
	if v.Type() == nodePtrType {
		v.Set(reflect.ValueOf(n))
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return d.structValue(n, v, what)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.errf(n, "%s: want a list, got %s", what, kindName(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			if err := d.value(c, s.Index(i), fmt.Sprintf("%s[%d]", what, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := d.value(n, p.Elem(), what); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return d.errf(n, "%s: want a string, got %s", what, kindName(n))
		}
		v.SetString(n.Value)
		return nil
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			return d.errf(n, "%s: want true or false, got %s", what, kindName(n))
		}
		v.SetBool(b)
		return nil
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			return d.errf(n, "%s: want a number, got %s", what, kindName(n))
		}
		v.SetFloat(f)
		return nil
	}
	return d.errf(n, "%s: unsupported Go type %s", what, v.Type())
}

func (d *decoder) structValue(n *yaml.Node, v reflect.Value, what string) error {
	if n.Kind != yaml.MappingNode {
		return d.errf(n, "%s: want a mapping, got %s", what, kindName(n))
	}
	t := v.Type()
	fields := map[string]int{}
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		keys = append(keys, tag)
	}
	if lf, ok := t.FieldByName("Line"); ok && lf.Type.Kind() == reflect.Int {
		v.FieldByName("Line").SetInt(int64(n.Line))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if prev, ok := seen[k.Value]; ok {
			return d.errf(k, "%s: duplicate key %q (first at line %d)", what, k.Value, prev)
		}
		seen[k.Value] = k.Line
		idx, ok := fields[k.Value]
		if !ok {
			return d.errf(k, "%s: unknown key %q (known: %s)", what, k.Value, strings.Join(keys, ", "))
		}
		if err := d.value(val, v.Field(idx), what+"."+k.Value); err != nil {
			return err
		}
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("required") != "true" {
			continue
		}
		if _, ok := seen[f.Tag.Get("yaml")]; !ok {
			return d.errf(n, "%s: missing required key %q", what, f.Tag.Get("yaml"))
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return "something else"
}
