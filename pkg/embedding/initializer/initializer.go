// Package initializer holds the embedding table's entry initializers: Monolith's C++ initializers
// (native_training/runtime/hash_table/initializer/), configured by its InitializerConfig proto.
// A new entry's embedding is filled by one Initializer (or by several, one slice each, through
// Combine).
package initializer

import (
	"fmt"
	"strings"

	initializerpb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/runtime/hash_table/initializer"
	"github.com/monolith-go/monolith/pkg/embedding/optimizer/cctext"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Initializer fills a new entry's embedding.
type Initializer interface {
	// Dim is the number of floats Initialize writes.
	Dim() int
	// Initialize writes the first Dim() floats of nums. It is safe for concurrent use.
	Initialize(nums []float32)
	// String is the reference's DebugString, e.g. "RandomUniform(D=16, min=-0.050000, max=0.050000)".
	String() string
}

// New returns the initializer cfg configures for embeddings of dim floats; the config's dim_size
// must be dim, or unset. Random uniform initializers draw from the shared generator (Shared). A
// config with no initializer set is an errkind.Value error with the reference's message:
// "Unsupported initializer: " and the config in ShortDebugString form.
func New(cfg *initializerpb.InitializerConfig, dim int) (Initializer, error) {
	return NewWithGenerator(cfg, dim, Shared)
}

// NewWithGenerator is New with random uniform values drawn from g.
func NewWithGenerator(cfg *initializerpb.InitializerConfig, dim int, g *Generator) (Initializer, error) {
	if cfg == nil {
		return nil, errkind.New(errkind.Value, "initializer: no InitializerConfig")
	}
	if dim <= 0 {
		return nil, errkind.New(errkind.Value, "initializer: dimension %d: want > 0", dim)
	}
	switch t := cfg.GetType().(type) {
	case *initializerpb.InitializerConfig_Zeros:
		return constants(dim, t.Zeros.DimSize, 0, "zeros")
	case *initializerpb.InitializerConfig_Ones:
		return constants(dim, t.Ones.DimSize, 1, "ones")
	case *initializerpb.InitializerConfig_Constants:
		return constants(dim, t.Constants.DimSize, t.Constants.GetConstant(), "constants")
	case *initializerpb.InitializerConfig_RandomUniform:
		c := t.RandomUniform
		if err := checkDim("random_uniform", c.DimSize, dim); err != nil {
			return nil, err
		}
		if g == nil {
			return nil, errkind.New(errkind.Value, "initializer: random_uniform needs a generator")
		}
		return &randomUniform{d: dim, min: c.GetMinval(), max: c.GetMaxval(), g: g}, nil
	}
	return nil, errkind.New(errkind.Value, "Unsupported initializer: %s", cctext.ShortFormat(cfg))
}

func checkDim(name string, dimSize *int32, dim int) error {
	if dimSize != nil && int(*dimSize) != dim {
		return errkind.New(errkind.Value, "initializer: %s.dim_size %d does not match the embedding dimension %d", name, *dimSize, dim)
	}
	return nil
}

// constant fills every value with c (the reference's ConstantsInitializer, also for zeros and ones).
type constant struct {
	d int
	c float32
}

func constants(dim int, dimSize *int32, c float32, name string) (Initializer, error) {
	if err := checkDim(name, dimSize, dim); err != nil {
		return nil, err
	}
	return &constant{d: dim, c: c}, nil
}

func (o *constant) Dim() int { return o.d }

func (o *constant) Initialize(nums []float32) {
	for i := range nums[:o.d] {
		nums[i] = o.c
	}
}

func (o *constant) String() string { return fmt.Sprintf("Constants(D=%d, C=%f)", o.d, o.c) }

// randomUniform draws each value from U[min, max) as std::uniform_real_distribution<float> does.
type randomUniform struct {
	d        int
	min, max float32
	g        *Generator
}

func (o *randomUniform) Dim() int { return o.d }

func (o *randomUniform) Initialize(nums []float32) {
	o.g.uniform(nums[:o.d], o.min, o.max)
}

func (o *randomUniform) String() string {
	return fmt.Sprintf("RandomUniform(D=%d, min=%f, max=%f)", o.d, o.min, o.max)
}

// Combine returns one initializer over the concatenation of the parts' values, in order (the
// reference's CombineInitializers). Combine of one initializer returns it.
func Combine(parts ...Initializer) (Initializer, error) {
	switch len(parts) {
	case 0:
		return nil, errkind.New(errkind.Value, "initializer: Combine of no initializers")
	case 1:
		return parts[0], nil
	}
	c := &combined{parts: parts}
	for _, p := range parts {
		c.d += p.Dim()
	}
	return c, nil
}

type combined struct {
	parts []Initializer
	d     int
}

func (c *combined) Dim() int { return c.d }

func (c *combined) Initialize(nums []float32) {
	for _, p := range c.parts {
		p.Initialize(nums[:p.Dim()])
		nums = nums[p.Dim():]
	}
}

func (c *combined) String() string {
	names := make([]string, len(c.parts))
	for i, p := range c.parts {
		names[i] = p.String()
	}
	return strings.Join(names, "|")
}
