package layer

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/monolith-go/monolith/internal/refcases"
	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// reference holds what the Python reference did (testdata/README.md).
type reference struct {
	CreateChild struct {
		HasA      bool   `json:"has_a"`
		ChildName string `json:"child_name"`
	} `json:"create_child"`
	CreateChildren struct {
		HasA bool `json:"has_a"`
		Len  int  `json:"len"`
	} `json:"create_children"`
	CreateChildrenUnnamed struct {
		ParamNames []string `json:"param_names"`
	} `json:"create_children_unnamed"`
	CreateChildUnnamed struct {
		Error struct{ Type, Message string } `json:"error"`
	} `json:"create_child_unnamed"`
	UnnamedParams struct {
		Error struct{ Type, Message string } `json:"error"`
	} `json:"unnamed_params"`
	FProp struct {
		Error struct{ Type, Message string } `json:"error"`
	} `json:"fprop"`
	GetUname []string `json:"get_uname"`
}

func loadReference(t *testing.T) reference {
	t.Helper()
	var r reference
	refcases.ReadJSON(t, "testdata/reference_layer.json", &r)
	return r
}

// base_layer_test.py's test_create_child and test_create_children.
func TestCreateChildReference(t *testing.T) {
	ref := loadReference(t)
	p := BaseParams(NewNames())
	p.Name = "test"
	l, err := p.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	b := l.(*Base)
	if err := b.CreateChild("a", p); err != nil {
		t.Fatal(err)
	}
	if b.HasChild("a") != ref.CreateChild.HasA {
		t.Errorf("has a: %v", b.HasChild("a"))
	}
	c, err := b.Child("a")
	if err != nil || c.Name() != "test" {
		t.Errorf("child: %v %v", c, err)
	}
	if _, ok := c.(*Base); !ok || ref.CreateChild.ChildName != "BaseLayer" {
		t.Errorf("child type %T, reference %s", c, ref.CreateChild.ChildName)
	}

	l, _ = p.Instantiate()
	b = l.(*Base)
	if err := b.CreateChildren("a", []Params{p, p}); err != nil {
		t.Fatal(err)
	}
	list, err := b.ChildList("a")
	if err != nil || b.HasChild("a") != ref.CreateChildren.HasA || len(list) != ref.CreateChildren.Len {
		t.Errorf("children: %v %v", list, err)
	}
}

func TestUnnamedParams(t *testing.T) {
	ref := loadReference(t)
	if _, err := NewBase(Params{}); errkind.Of(err) != errkind.Precondition || ref.UnnamedParams.Error.Type != "AssertionError" ||
		err.Error() != ref.UnnamedParams.Error.Message {
		t.Errorf("unnamed: %v, reference %+v", err, ref.UnnamedParams.Error)
	}
	names := NewNames()
	parent, _ := NewBase(Params{Name: "parent"})
	unnamed := BaseParams(names)
	unnamed.Name = ""
	// Children get name_<index>; the caller's params keep their (empty) name, where the
	// reference writes "kids_0" into them.
	if err := parent.CreateChildren("kids", []Params{unnamed, unnamed}); err != nil {
		t.Fatal(err)
	}
	kids, _ := parent.ChildList("kids")
	if kids[0].Name() != "kids_0" || kids[1].Name() != "kids_1" || unnamed.Name != "" {
		t.Errorf("kids %s %s, params %q", kids[0].Name(), kids[1].Name(), unnamed.Name)
	}
	if ref.CreateChildrenUnnamed.ParamNames[0] != "kids_0" {
		t.Errorf("reference %v", ref.CreateChildrenUnnamed)
	}
	// An unnamed child takes the parent's name (the reference fails: BaseLayer never sets p).
	if err := parent.CreateChild("b", unnamed); err != nil {
		t.Fatal(err)
	}
	b, _ := parent.Child("b")
	if b.Name() != "parent" || ref.CreateChildUnnamed.Error.Type != "AttributeError" {
		t.Errorf("unnamed child %q, reference %+v", b.Name(), ref.CreateChildUnnamed.Error)
	}
}

func TestChildAccess(t *testing.T) {
	parent, _ := NewBase(Params{Name: "p"})
	child := Params{Name: "c", New: func(p Params) (Layer, error) { return NewBase(p) }}
	_ = parent.CreateChild("one", child)
	_ = parent.CreateChildren("many", []Params{child})
	_ = parent.CreateChild("one", Params{Name: "c2", New: child.New})
	if got := parent.Children(); !reflect.DeepEqual(got, []string{"one", "many"}) {
		t.Errorf("children %v", got)
	}
	if c, _ := parent.Child("one"); c.Name() != "c2" {
		t.Errorf("replaced child %v", c.Name())
	}
	for _, c := range []struct {
		name string
		err  error
		kind errkind.Kind
		msg  string
	}{
		{"missing", errOf(parent.Child("zz")), errkind.Attribute, "zz is not a sub-layer of BaseLayer(p)."},
		{"missing list", errOfList(parent.ChildList("zz")), errkind.Attribute, "zz is not a sub-layer of BaseLayer(p)."},
		{"list as one", errOf(parent.Child("many")), errkind.Type, "list of 1 layers"},
		{"one as list", errOfList(parent.ChildList("one")), errkind.Type, "not a list"},
	} {
		if errkind.Of(c.err) != c.kind || !strings.Contains(c.err.Error(), c.msg) {
			t.Errorf("%s: %v", c.name, c.err)
		}
	}
	failing := Params{Name: "bad", New: func(Params) (Layer, error) { return nil, errors.New("boom") }}
	if err := parent.CreateChildren("mixed", []Params{child, failing}); err == nil || !strings.Contains(err.Error(), "boom") || parent.HasChild("mixed") {
		t.Errorf("failed children: %v", err)
	}
	if err := parent.CreateChild("x", Params{Name: "x"}); errkind.Of(err) != errkind.Attribute {
		t.Errorf("no constructor: %v", err)
	}
	if parent.Params().Name != "p" {
		t.Error("params")
	}
}

func errOf(_ Layer, err error) error       { return err }
func errOfList(_ []Layer, err error) error { return err }

func TestFPropIsAbstract(t *testing.T) {
	ref := loadReference(t)
	b, _ := NewBase(Params{Name: "x"})
	_, err := b.FProp(tensor.Scalar[float32](1))
	if errkind.Of(err) != errkind.Runtime || !strings.HasPrefix(err.Error(), ref.FProp.Error.Message+" of ") || ref.FProp.Error.Type != "NotImplementedError" {
		t.Errorf("fprop: %v, reference %+v", err, ref.FProp.Error)
	}
}

// A concrete layer embeds Base and brings its own FProp.
type doubler struct{ *Base }

func (d doubler) FProp(in ...tensor.Tensor) ([]tensor.Tensor, error) {
	x, err := tensor.As[float32](in[0])
	if err != nil {
		return nil, err
	}
	v := x.Data()
	for i := range v {
		v[i] *= 2
	}
	return []tensor.Tensor{tensor.Vector(v...)}, nil
}

func TestConcreteLayer(t *testing.T) {
	p := Params{Name: "double", New: func(p Params) (Layer, error) {
		b, err := NewBase(p)
		return doubler{b}, err
	}}
	parent, _ := NewBase(Params{Name: "net"})
	if err := parent.CreateChild("d", p); err != nil {
		t.Fatal(err)
	}
	d, _ := parent.Child("d")
	out, err := d.FProp(tensor.Vector[float32](1, 2))
	if err != nil || !reflect.DeepEqual(out[0], tensor.Tensor(tensor.Vector[float32](2, 4))) {
		t.Errorf("fprop %v %v", out, err)
	}
}

// get_uname: the reference never records a name as used, so it always returns the name itself
// (recorded). Names records it: the first use matches the reference, later ones are numbered.
func TestUniqueNames(t *testing.T) {
	ref := loadReference(t)
	n := NewNames()
	got := []string{n.Unique("BaseLayer"), n.Unique("BaseLayer"), n.Unique("Dense"), n.Unique("BaseLayer"), n.Unique("BaseLayer_1")}
	if got[0] != ref.GetUname[0] || got[2] != ref.GetUname[2] || ref.GetUname[1] != "BaseLayer" {
		t.Errorf("first uses %v, reference %v", got, ref.GetUname)
	}
	if !reflect.DeepEqual(got, []string{"BaseLayer", "BaseLayer_1", "Dense", "BaseLayer_2", "BaseLayer_1"}) {
		t.Errorf("names %v", got)
	}
	// Registries are independent (per run).
	if NewNames().Unique("BaseLayer") != "BaseLayer" || BaseParams(NewNames()).Name != "BaseLayer" {
		t.Error("a new registry saw old names")
	}
	var zero Names
	if zero.Unique("a") != "a" || zero.Unique("a") != "a_1" {
		t.Error("zero Names")
	}
	var wg sync.WaitGroup
	seen := sync.Map{}
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, dup := seen.LoadOrStore(n.Unique("L"), i); dup {
				t.Error("duplicate name")
			}
		}()
	}
	wg.Wait()
}

func TestLosses(t *testing.T) {
	l := NewLosses()
	l.Add("l1", 1.5)
	l.Add("l1", 2.0)
	l.Add("l2", 0.25)
	if got := l.Get(); !reflect.DeepEqual(got, map[string]float64{"l1": 3.5, "l2": 0.25}) {
		t.Errorf("losses %v", got)
	}
	if got := l.Names(); !reflect.DeepEqual(got, []string{"l1", "l2"}) {
		t.Errorf("names %v", got)
	}
	g := l.Get()
	g["l1"] = 0
	if l.Get()["l1"] != 3.5 {
		t.Error("Get aliases the registry")
	}
	if len(NewLosses().Get()) != 0 {
		t.Error("registries share state")
	}
	var zero Losses
	zero.Add("x", 1)
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); zero.Add("x", 1) }()
	}
	wg.Wait()
	if zero.Get()["x"] != 101 {
		t.Errorf("concurrent adds: %v", zero.Get())
	}
}
