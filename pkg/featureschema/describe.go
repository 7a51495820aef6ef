package featureschema

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// DescribeFile is the file name Describe gives its input in errors.
const DescribeFile = "schema.yaml"

// Describe parses and checks a schema file (named DescribeFile in errors) and prints its resolved
// form, every default filled in (sources, separators, the label's rule, the dense row's layout,
// the ids of string defaults), one line per item: what the trainer and the converter will do with
// it; a sparse feature's pooling and buckets that the schema leaves to the trainer read as the
// trainer's flags (--pooling, --embedding_buckets). It is the func of the spec's golden cases.
func Describe(input []byte) ([]byte, error) {
	s, err := Parse(input, DescribeFile)
	if err != nil {
		return nil, err
	}
	return s.Describe()
}

// Describe prints s's resolved form (see the package func Describe).
func (s *Schema) Describe() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d features: %d sparse, %d dense (a dense row of %d floats)\n", len(s.Features), len(s.Sparse()), len(s.Dense()), s.DenseDim())
	fmt.Fprintf(&b, "label: source %q, %s\n", s.Label.SourceName(), s.Label.Rule())
	offset := 0
	for i, f := range s.Features {
		parts := []string{string(f.Kind)}
		if f.IsSparse() {
			parts = append(parts, fmt.Sprintf("slot %d", f.FidSlot()))
		} else {
			parts = append(parts, fmt.Sprintf("dim %d (row[%d:%d])", f.DenseDim(), offset, offset+f.DenseDim()))
			offset += f.DenseDim()
		}
		parts = append(parts, fmt.Sprintf("source %q", f.SourceName()), fmt.Sprintf("separator %q", f.CellSeparator()))
		def, err := f.describeDefault()
		if err != nil {
			return nil, err
		}
		parts = append(parts, def)
		if f.IsSparse() {
			pooling := "--pooling"
			if f.Pooling != nil {
				pooling = string(*f.Pooling)
			}
			buckets := "--embedding_buckets"
			if f.Buckets != nil {
				buckets = strconv.Itoa(*f.Buckets)
				if *f.Buckets == 0 {
					buckets += " (collisionless)"
				}
			}
			parts = append(parts, "pooling: "+pooling, "buckets: "+buckets)
		}
		fmt.Fprintf(&b, "features[%d] %q: %s\n", i, f.Name, strings.Join(parts, ", "))
	}
	return b.Bytes(), nil
}

func (f Feature) describeDefault() (string, error) {
	if !f.Optional {
		return "required", nil
	}
	switch f.Kind {
	case SparseInt, SparseString:
		ids, err := f.DefaultIDs()
		if err != nil {
			return "", err
		}
		if len(ids) == 0 {
			return "optional, default: no ids", nil
		}
		if f.Kind == SparseInt {
			return fmt.Sprintf("optional, default ids %v", ids), nil
		}
		return fmt.Sprintf("optional, default %q (ids %v)", f.Default, ids), nil
	}
	vals, err := f.DefaultFloats()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("optional, default %v", vals), nil
}
