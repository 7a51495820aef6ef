package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// The dense checkpoint format: the variables of a checkpoint <prefix> live in two files.
//
//	<prefix>.data   the tensors' values back to back, little endian (float32, float64 or int64 each)
//	<prefix>.index  a JSON manifest (DenseIndex): each tensor's name, dtype, shape, byte offset and
//	                length in the data file and the CRC-32C of those bytes, and the data file's size
//
// The data file is written first and the index last, each through a temporary file and a rename,
// so a checkpoint whose .index exists is complete; Exists looks for the .index, as TensorFlow's
// checkpoint_exists does for its V2 checkpoints.

// DenseFormat names the format in the index.
const DenseFormat = "monolith-go/dense/v1"

// DType is a tensor's element type.
type DType string

// Element types of the dense format.
const (
	Float32 DType = "float32"
	Float64 DType = "float64"
	Int64   DType = "int64"
)

// Tensor is a named value saved in a checkpoint: Float32 holds a float32 tensor's values, Float64
// a float64 tensor's (a model training in float64 resumes exactly), Int64 an int64 tensor's, in
// row-major order; their count is the product of Shape (1 for a scalar). One of them is set.
type Tensor struct {
	Name    string
	Shape   []int64
	Float32 []float32
	Float64 []float64
	Int64   []int64
}

// DType is the tensor's element type: that of the values it holds (Float32 when it holds none).
func (t *Tensor) DType() DType {
	switch {
	case t.Int64 != nil:
		return Int64
	case t.Float64 != nil:
		return Float64
	}
	return Float32
}

// kinds counts the value slices t holds.
func (t *Tensor) kinds() int {
	n := 0
	for _, set := range []bool{t.Float32 != nil, t.Float64 != nil, t.Int64 != nil} {
		if set {
			n++
		}
	}
	return n
}

// DenseIndex is the manifest of a dense checkpoint (<prefix>.index).
type DenseIndex struct {
	Format string `json:"format"`
	// DataFile is the data file's base name.
	DataFile string `json:"data_file"`
	// DataBytes is the data file's size.
	DataBytes int64        `json:"data_bytes"`
	Tensors   []DenseEntry `json:"tensors"`
}

// DenseEntry locates one tensor in the data file.
type DenseEntry struct {
	Name   string  `json:"name"`
	DType  DType   `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	Bytes  int64   `json:"bytes"`
	CRC32C uint32  `json:"crc32c"`
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

func elements(shape []int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d", d)
		}
		n *= d
	}
	return n, nil
}

// WriteDense writes tensors as the dense checkpoint prefix (<prefix>.data, then <prefix>.index).
// Names must be unique and each tensor's value count must match its shape.
func WriteDense(prefix string, tensors []Tensor) error {
	var data bytes.Buffer
	idx := DenseIndex{Format: DenseFormat, DataFile: filepath.Base(prefix) + ".data"}
	seen := map[string]bool{}
	for i := range tensors {
		t := &tensors[i]
		if t.Name == "" || seen[t.Name] {
			return errkind.New(errkind.Value, "checkpoint %s: tensor %d: empty or duplicate name %q", prefix, i, t.Name)
		}
		seen[t.Name] = true
		n, err := elements(t.Shape)
		if err != nil {
			return errkind.New(errkind.Value, "checkpoint %s: tensor %q: %v", prefix, t.Name, err)
		}
		start := data.Len()
		switch {
		case t.kinds() > 1:
			return errkind.New(errkind.Value, "checkpoint %s: tensor %q holds values of more than one type", prefix, t.Name)
		case t.Int64 != nil:
			if int64(len(t.Int64)) != n {
				return errkind.New(errkind.Value, "checkpoint %s: tensor %q: %d values for shape %v", prefix, t.Name, len(t.Int64), t.Shape)
			}
			for _, v := range t.Int64 {
				data.Write(binary.LittleEndian.AppendUint64(nil, uint64(v)))
			}
		case t.Float64 != nil:
			if int64(len(t.Float64)) != n {
				return errkind.New(errkind.Value, "checkpoint %s: tensor %q: %d values for shape %v", prefix, t.Name, len(t.Float64), t.Shape)
			}
			for _, v := range t.Float64 {
				data.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
			}
		default:
			if int64(len(t.Float32)) != n {
				return errkind.New(errkind.Value, "checkpoint %s: tensor %q: %d values for shape %v", prefix, t.Name, len(t.Float32), t.Shape)
			}
			for _, v := range t.Float32 {
				data.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
			}
		}
		b := data.Bytes()[start:]
		idx.Tensors = append(idx.Tensors, DenseEntry{Name: t.Name, DType: t.DType(), Shape: append([]int64{}, t.Shape...),
			Offset: int64(start), Bytes: int64(len(b)), CRC32C: crc32.Checksum(b, crc32c)})
	}
	idx.DataBytes = int64(data.Len())
	if err := WriteFileAtomic(prefix+".data", data.Bytes()); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	manifest, err := json.MarshalIndent(idx, "", " ")
	if err != nil {
		return fmt.Errorf("checkpoint %s: index: %w", prefix, err)
	}
	if err := WriteFileAtomic(prefix+".index", append(manifest, '\n')); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// ReadDense reads the dense checkpoint prefix. A missing index is an error of kind NotFound; an
// index that is not a valid manifest, a data file shorter or longer than the index says (a partial
// write) or a tensor whose bytes fail their CRC-32C is an error of kind Value; each names the file.
func ReadDense(prefix string) ([]Tensor, error) {
	idxFile := prefix + ".index"
	raw, err := os.ReadFile(idxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errkind.New(errkind.NotFound, "checkpoint %s: index %s does not exist (no such checkpoint, or it was not completely written)", prefix, idxFile)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	var idx DenseIndex
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&idx); err != nil {
		return nil, errkind.New(errkind.Value, "checkpoint index %s: not a valid manifest: %v", idxFile, err)
	}
	if idx.Format != DenseFormat {
		return nil, errkind.New(errkind.Value, "checkpoint index %s: format %q, want %q", idxFile, idx.Format, DenseFormat)
	}
	if idx.DataFile == "" || filepath.Base(idx.DataFile) != idx.DataFile {
		return nil, errkind.New(errkind.Value, "checkpoint index %s: bad data file name %q", idxFile, idx.DataFile)
	}
	dataFile := filepath.Join(filepath.Dir(prefix), idx.DataFile)
	data, err := os.ReadFile(dataFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errkind.New(errkind.NotFound, "checkpoint data %s does not exist (named by %s)", dataFile, idxFile)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	if int64(len(data)) != idx.DataBytes {
		return nil, errkind.New(errkind.Value, "checkpoint data %s: %d bytes, its index %s says %d (partial or overwritten checkpoint)", dataFile, len(data), idxFile, idx.DataBytes)
	}
	out := make([]Tensor, 0, len(idx.Tensors))
	for _, e := range idx.Tensors {
		n, err := elements(e.Shape)
		if err != nil {
			return nil, errkind.New(errkind.Value, "checkpoint index %s: tensor %q: %v", idxFile, e.Name, err)
		}
		size := map[DType]int64{Float32: 4, Float64: 8, Int64: 8}[e.DType]
		if size == 0 {
			return nil, errkind.New(errkind.Value, "checkpoint index %s: tensor %q: unknown dtype %q", idxFile, e.Name, e.DType)
		}
		if e.Bytes != n*size || e.Offset < 0 || e.Offset+e.Bytes > int64(len(data)) {
			return nil, errkind.New(errkind.Value, "checkpoint index %s: tensor %q: bytes %d+%d do not fit shape %v in %d data bytes", idxFile, e.Name, e.Offset, e.Bytes, e.Shape, len(data))
		}
		b := data[e.Offset : e.Offset+e.Bytes]
		if crc32.Checksum(b, crc32c) != e.CRC32C {
			return nil, errkind.New(errkind.Value, "checkpoint data %s: tensor %q (bytes %d to %d) fails its CRC-32C: the file is corrupt", dataFile, e.Name, e.Offset, e.Offset+e.Bytes)
		}
		t := Tensor{Name: e.Name, Shape: e.Shape}
		switch e.DType {
		case Int64:
			t.Int64 = make([]int64, n)
			for i := range t.Int64 {
				t.Int64[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			}
		case Float64:
			t.Float64 = make([]float64, n)
			for i := range t.Float64 {
				t.Float64[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			}
		default:
			t.Float32 = make([]float32, n)
			for i := range t.Float32 {
				t.Float32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
		out = append(out, t)
	}
	return out, nil
}
