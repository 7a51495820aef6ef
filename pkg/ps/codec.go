package ps

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// The wire format of ids and embeddings (ps_service.proto): little-endian int64 and float32. On a
// little-endian machine that is the memory layout, so a []int64 or []float32 is sent and received
// as a view of its bytes, without a conversion loop; elsewhere the values are converted.

// littleEndian reports whether this machine stores integers least significant byte first.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// int64Bytes is ids in wire format: a view of ids' memory on a little-endian machine, else a copy.
func int64Bytes(ids []int64) []byte {
	if len(ids) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), len(ids)*8)
	}
	b := make([]byte, len(ids)*8)
	for i, v := range ids {
		binary.LittleEndian.PutUint64(b[i*8:], uint64(v))
	}
	return b
}

// float32Bytes is v in wire format: a view of v's memory on a little-endian machine, else a copy.
func float32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4)
	}
	b := make([]byte, len(v)*4)
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(f))
	}
	return b
}

// decodeInt64s reads wire-format ids: a view of b when it is suitably aligned on a little-endian
// machine (b must then not change while the result is in use), else a copy.
func decodeInt64s(what string, b []byte) ([]int64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of int64 values", what, len(b))
	}
	n := len(b) / 8
	if n == 0 {
		return nil, nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(int64(0)) == 0 {
		return unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), n), nil
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[i*8:]))
	}
	return out, nil
}

// decodeFloat32s reads wire-format floats, as decodeInt64s reads ids.
func decodeFloat32s(what string, b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of float32 values", what, len(b))
	}
	n := len(b) / 4
	if n == 0 {
		return nil, nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(float32(0)) == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:]))
	}
	return out, nil
}
