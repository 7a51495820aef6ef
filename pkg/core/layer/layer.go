// Package layer is monolith/core/base_layer.py: layers that own named child layers, unique layer
// names, and the registry of per-layer losses.
//
// The reference keeps the names in use and the losses in module globals (losses keyed by the
// default TF graph). Here both are values a run creates and passes along: Names and Losses.
package layer

import (
	"fmt"
	"slices"
	"sync"

	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Layer is anything a Params instantiates.
type Layer interface {
	// Name is the layer's params name.
	Name() string
	// FProp is the forward propagation (__call__ forwards to it).
	FProp(inputs ...tensor.Tensor) ([]tensor.Tensor, error)
}

// Params are a layer's hyperparameters: its name and how to build it (InstantiableParams).
type Params struct {
	Name string
	// New builds the layer from these params.
	New func(Params) (Layer, error)
}

// Instantiate builds the layer.
func (p Params) Instantiate() (Layer, error) {
	if p.New == nil {
		return nil, errkind.New(errkind.Attribute, "params %q: no layer constructor", p.Name)
	}
	l, err := p.New(p)
	if err != nil {
		return nil, fmt.Errorf("instantiate %q: %w", p.Name, err)
	}
	return l, nil
}

// Names hands out unique layer names (get_uname): the first request for a name gets it as is,
// later ones get name_1, name_2, ... It is safe for concurrent use.
type Names struct {
	mu    sync.Mutex
	inUse map[string]int
}

// NewNames returns an empty name registry.
func NewNames() *Names { return &Names{inUse: map[string]int{}} }

// Unique returns name, or name_<n> when name was handed out before.
func (n *Names) Unique(name string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inUse == nil {
		n.inUse = map[string]int{}
	}
	count, seen := n.inUse[name]
	if !seen {
		n.inUse[name] = 0
		return name
	}
	count++
	n.inUse[name] = count
	return fmt.Sprintf("%s_%d", name, count)
}

// BaseParams is BaseLayer.params(): a unique "BaseLayer" name and the Base constructor.
func BaseParams(names *Names) Params {
	return Params{Name: names.Unique("BaseLayer"), New: func(p Params) (Layer, error) { return NewBase(p) }}
}

// child is one entry of a layer's children: a layer or a list of layers.
type child struct {
	layer Layer
	list  []Layer
}

// Base is BaseLayer: it owns named children, in creation order. Embed it in a concrete layer and
// give that layer its own FProp.
type Base struct {
	params   Params
	mu       sync.Mutex
	children map[string]child
	order    []string
}

// NewBase builds the base of a layer; the params must be named.
func NewBase(p Params) (*Base, error) {
	if p.Name == "" {
		return nil, errkind.New(errkind.Precondition, "Layer params for BaseLayer must have a \"name\"")
	}
	return &Base{params: p, children: map[string]child{}}, nil
}

// Name is the params name.
func (b *Base) Name() string { return b.params.Name }

// Params returns the layer's params.
func (b *Base) Params() Params { return b.params }

// FProp of the base layer is abstract.
func (b *Base) FProp(...tensor.Tensor) ([]tensor.Tensor, error) {
	return nil, errkind.New(errkind.Runtime, "Abstract method of %s", b)
}

func (b *Base) String() string { return fmt.Sprintf("BaseLayer(%s)", b.params.Name) }

func (b *Base) set(name string, c child) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.children[name]; !ok {
		b.order = append(b.order, name)
	}
	b.children[name] = c
}

// CreateChild instantiates p as the child called name (replacing an earlier child of that name).
// Unnamed params take this layer's name; p itself is not modified.
func (b *Base) CreateChild(name string, p Params) error {
	if p.Name == "" {
		p.Name = b.params.Name
	}
	l, err := p.Instantiate()
	if err != nil {
		return fmt.Errorf("create child %q of %s: %w", name, b, err)
	}
	b.set(name, child{layer: l})
	return nil
}

// CreateChildren instantiates a list of children under name; unnamed params are called
// name_<index>. The params are not modified. Nothing is stored unless every child is built.
func (b *Base) CreateChildren(name string, ps []Params) error {
	list := make([]Layer, 0, len(ps))
	for i, p := range ps {
		if p.Name == "" {
			p.Name = fmt.Sprintf("%s_%d", name, i)
		}
		l, err := p.Instantiate()
		if err != nil {
			return fmt.Errorf("create children %q of %s: %w", name, b, err)
		}
		list = append(list, l)
	}
	b.set(name, child{list: list})
	return nil
}

// HasChild says whether a child or child list called name exists (`name in layer.children`).
func (b *Base) HasChild(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.children[name]
	return ok
}

// Children returns the child names in creation order.
func (b *Base) Children() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.order)
}

// Child returns the single child called name (layer.<name>).
func (b *Base) Child(name string) (Layer, error) {
	b.mu.Lock()
	c, ok := b.children[name]
	b.mu.Unlock()
	if !ok {
		return nil, errkind.New(errkind.Attribute, "%s is not a sub-layer of %s.", name, b)
	}
	if c.layer == nil {
		return nil, errkind.New(errkind.Type, "%s of %s is a list of %d layers, not one layer", name, b, len(c.list))
	}
	return c.layer, nil
}

// ChildList returns the child list called name.
func (b *Base) ChildList(name string) ([]Layer, error) {
	b.mu.Lock()
	c, ok := b.children[name]
	b.mu.Unlock()
	if !ok {
		return nil, errkind.New(errkind.Attribute, "%s is not a sub-layer of %s.", name, b)
	}
	if c.layer != nil {
		return nil, errkind.New(errkind.Type, "%s of %s is one layer, not a list", name, b)
	}
	return slices.Clone(c.list), nil
}

// Losses is the layer-loss registry of one run (add_layer_loss / get_layer_loss): losses added
// under the same layer name are summed. It is safe for concurrent use.
type Losses struct {
	mu     sync.Mutex
	losses map[string]float64
	order  []string
}

// NewLosses returns an empty registry.
func NewLosses() *Losses { return &Losses{losses: map[string]float64{}} }

// Add adds loss to the layer's total.
func (l *Losses) Add(name string, loss float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.losses == nil {
		l.losses = map[string]float64{}
	}
	if _, ok := l.losses[name]; !ok {
		l.order = append(l.order, name)
	}
	l.losses[name] += loss
}

// Get returns a copy of the totals by layer name.
func (l *Losses) Get() map[string]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]float64, len(l.losses))
	for k, v := range l.losses {
		out[k] = v
	}
	return out
}

// Names returns the layer names in the order their first loss was added.
func (l *Losses) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}
