package ps

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
)

// wireCodec is gRPC's proto codec with the bulk messages (lookup and apply requests, lookup
// answers) encoded and decoded by hand, to the same protobuf bytes: their ids and floats are sent
// from the caller's memory, and a lookup answer is received with one copy, into the caller's rows
// (rowsReply), where the proto codec copies a payload twice on each side (into a marshal buffer;
// out of the transport's buffers, then again into the message). Every other message goes through
// the proto codec. Its name is
// "proto", so the content type on the wire is unchanged and any protobuf peer understands it.
type wireCodec struct{}

// codec is the codec the package's servers and clients use.
var codec encoding.CodecV2 = wireCodec{}

func (wireCodec) Name() string { return grpcproto.Name }

// protoCodec is gRPC's own proto codec, for every other message.
var protoCodec = encoding.GetCodecV2(grpcproto.Name)

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *pspb.LookupResponse:
		return marshalLookupResponse(m), nil
	case *pspb.LookupRequest:
		var hdr []byte
		hdr = appendString(hdr, 1, m.GetTable())
		hdr = appendVarint(hdr, 2, uint64(int64(m.GetDim())))
		return withPayloads(hdr, payload{3, m.GetIds(), nil}), nil
	case *pspb.ApplyGradientsRequest:
		var hdr, tail []byte
		hdr = appendString(hdr, 1, m.GetTable())
		hdr = appendVarint(hdr, 2, uint64(int64(m.GetDim())))
		tail = appendVarint(tail, 5, uint64(m.GetGlobalStep()))
		if lrs := m.GetLearningRates(); len(lrs) > 0 {
			tail = protowire.AppendTag(tail, 6, protowire.BytesType)
			tail = protowire.AppendVarint(tail, uint64(4*len(lrs)))
			for _, f := range lrs {
				tail = protowire.AppendFixed32(tail, *(*uint32)(unsafe.Pointer(&f)))
			}
		}
		tail = appendVarint(tail, 7, uint64(m.GetUpdateTimeSec()))
		tail = appendVarint(tail, 8, uint64(m.GetNewestEventTimeMs()))
		return withPayloads(hdr, payload{3, m.GetIds(), nil}, payload{4, m.GetGrads(), tail}), nil
	}
	return protoCodec.Marshal(v)
}

// payload is a bytes field sent from its own memory, followed by encoded fields.
type payload struct {
	num  protowire.Number
	data []byte
	tail []byte
}

// withPayloads is hdr, then each payload's tag, length, data (not copied) and tail.
func withPayloads(hdr []byte, ps ...payload) mem.BufferSlice {
	out := mem.BufferSlice{}
	for _, p := range ps {
		if len(p.data) > 0 {
			hdr = protowire.AppendTag(hdr, p.num, protowire.BytesType)
			hdr = protowire.AppendVarint(hdr, uint64(len(p.data)))
			out = append(out, mem.SliceBuffer(hdr), mem.SliceBuffer(p.data))
			hdr = nil
		}
		hdr = append(hdr, p.tail...)
	}
	if len(hdr) > 0 {
		out = append(out, mem.SliceBuffer(hdr))
	}
	return out
}

// marshalLookupResponse sends the embeddings from their buffer; when the buffer is one of the
// server's pooled ones, it goes back to the pool once the transport has written it.
func marshalLookupResponse(m *pspb.LookupResponse) mem.BufferSlice {
	var tail []byte
	tail = appendVarint(tail, 2, uint64(m.GetFound()))
	emb := m.GetEmbeddings()
	if len(emb) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(tail)}
	}
	var hdr []byte
	hdr = protowire.AppendTag(hdr, 1, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(len(emb)))
	var body mem.Buffer = mem.SliceBuffer(emb)
	if owned, ok := responseBuffers.take(emb); ok {
		body = mem.NewBuffer(owned, floatPool)
	}
	out := mem.BufferSlice{mem.SliceBuffer(hdr), body}
	if len(tail) > 0 {
		out = append(out, mem.SliceBuffer(tail))
	}
	return out
}

// appendVarint appends a varint field unless it is 0 (proto3 leaves defaults out).
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rowsReply); ok {
		return r.unmarshal(data)
	}
	return protoCodec.Unmarshal(data, v)
}

// rowsReply receives a LookupResponse straight into the caller's memory: the embedding of the
// request's id u goes to out[rows[u]*dim:(rows[u]+1)*dim], copied once from the transport's
// buffers (the proto codec would copy them into one buffer, then into the message).
type rowsReply struct {
	out   []float32
	rows  []int32
	dim   int
	found int64
}

func (r *rowsReply) unmarshal(data mem.BufferSlice) error {
	c := cursor{bufs: data}
	seen := false
	for !c.done() {
		num, typ, err := c.tag()
		if err != nil {
			return err
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			n, err := c.varint()
			if err != nil {
				return err
			}
			if want := uint64(len(r.rows) * r.dim * 4); n != want {
				return fmt.Errorf("ps codec: lookup answer of %d bytes, want %d (%d ids of dimension %d)", n, want, len(r.rows), r.dim)
			}
			if err := r.readRows(&c); err != nil {
				return err
			}
			seen = true
		case num == 2 && typ == protowire.VarintType:
			v, err := c.varint()
			if err != nil {
				return err
			}
			r.found = int64(v)
		default:
			if err := c.skip(typ); err != nil {
				return err
			}
		}
	}
	if !seen && len(r.rows) > 0 {
		return fmt.Errorf("ps codec: lookup answer without embeddings for %d ids", len(r.rows))
	}
	return nil
}

// readRows copies the embeddings into their rows: the rows wholly inside one of the transport's
// buffers in one loop of fixed-size copies (per row, the cursor's checks and a memmove call cost
// 6x the copy itself), a row split between two buffers through the cursor.
func (r *rowsReply) readRows(c *cursor) error {
	dim := r.dim
	if !littleEndian {
		buf := make([]byte, 4*dim)
		for _, p := range r.rows {
			if err := c.read(buf); err != nil {
				return err
			}
			v, _ := decodeFloat32s("row", buf)
			copy(r.out[int(p)*dim:int(p)*dim+dim], v)
		}
		return nil
	}
	size := 4 * dim
	out := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(r.out))), 4*len(r.out))
	rows := r.rows
	for len(rows) > 0 {
		if c.done() {
			return errTruncated
		}
		data := c.bufs[c.i].ReadOnlyData()[c.off:]
		whole := min(len(data)/size, len(rows))
		copyRows(out, size, rows[:whole], data)
		c.off += whole * size
		rows = rows[whole:]
		if len(rows) > 0 && whole*size < len(data) {
			// The next row starts in this buffer and ends in the next.
			p := int(rows[0])
			if err := c.read(out[p*size : p*size+size]); err != nil {
				return err
			}
			rows = rows[1:]
		}
	}
	return nil
}

// copyRows copies the rows of src, size bytes each, to rows[k] of dst.
func copyRows(dst []byte, size int, rows []int32, src []byte) {
	switch size {
	// Rows of a common size are copied as arrays, which the compiler inlines.
	case 32:
		copyRowsAs[[32]byte](dst, rows, src)
	case 64:
		copyRowsAs[[64]byte](dst, rows, src)
	case 128:
		copyRowsAs[[128]byte](dst, rows, src)
	case 256:
		copyRowsAs[[256]byte](dst, rows, src)
	default:
		for k, p := range rows {
			copy(dst[int(p)*size:int(p)*size+size], src[k*size:k*size+size])
		}
	}
}

func copyRowsAs[R [32]byte | [64]byte | [128]byte | [256]byte](dst []byte, rows []int32, src []byte) {
	var row R
	size := len(row)
	src = src[:len(rows)*size]
	for k, p := range rows {
		d := dst[int(p)*size : int(p)*size+size] // bounds-checked; R has byte alignment
		*(*R)(unsafe.Pointer(&d[0])) = *(*R)(unsafe.Pointer(&src[k*size]))
	}
}

var errTruncated = fmt.Errorf("ps codec: truncated message")

// cursor reads a message spread over the transport's buffers.
type cursor struct {
	bufs mem.BufferSlice
	i    int // current buffer
	off  int // offset in it
}

func (c *cursor) done() bool {
	for c.i < len(c.bufs) && c.off >= c.bufs[c.i].Len() {
		c.i, c.off = c.i+1, 0
	}
	return c.i >= len(c.bufs)
}

func (c *cursor) byte() (byte, error) {
	if c.done() {
		return 0, errTruncated
	}
	b := c.bufs[c.i].ReadOnlyData()[c.off]
	c.off++
	return b, nil
}

// read fills dst.
func (c *cursor) read(dst []byte) error {
	for len(dst) > 0 {
		if c.done() {
			return errTruncated
		}
		n := copy(dst, c.bufs[c.i].ReadOnlyData()[c.off:])
		c.off += n
		dst = dst[n:]
	}
	return nil
}

func (c *cursor) discard(n uint64) error {
	for n > 0 {
		if c.done() {
			return errTruncated
		}
		k := min(n, uint64(c.bufs[c.i].Len()-c.off))
		c.off += int(k)
		n -= k
	}
	return nil
}

func (c *cursor) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := c.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("ps codec: varint overflows 64 bits")
}

func (c *cursor) tag() (protowire.Number, protowire.Type, error) {
	v, err := c.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, fmt.Errorf("ps codec: invalid field number %d", num)
	}
	return num, typ, nil
}

// skip skips a field of an unknown number.
func (c *cursor) skip(typ protowire.Type) error {
	switch typ {
	case protowire.VarintType:
		_, err := c.varint()
		return err
	case protowire.Fixed32Type:
		return c.discard(4)
	case protowire.Fixed64Type:
		return c.discard(8)
	case protowire.BytesType:
		n, err := c.varint()
		if err != nil {
			return err
		}
		return c.discard(n)
	}
	return fmt.Errorf("ps codec: unsupported wire type %d", typ)
}

// bufferPool hands out byte buffers of power-of-two capacities, suitably aligned for float32 and
// int64 views.
type bufferPool struct {
	classes [64]sync.Pool
}

// floatPool holds the buffers of the server's lookup answers, until sent.
var floatPool = &bufferPool{}

// minPooled is the smallest buffer worth pooling.
const minPooled = 4 << 10

// Get returns a buffer of length n (not zeroed).
func (p *bufferPool) Get(n int) *[]byte {
	if n < minPooled {
		b := make([]byte, n)
		return &b
	}
	c := bits.Len(uint(n - 1))
	if v := p.classes[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:n]
		return b
	}
	// Allocated as int64s, so that the bytes are 8-aligned.
	words := make([]int64, (1<<c)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 1<<c)[:n]
	return &b
}

// Put returns a buffer; one not of a pooled size or alignment is dropped.
func (p *bufferPool) Put(b *[]byte) {
	c := cap(*b)
	if c < minPooled || c&(c-1) != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(*b)))%8 != 0 {
		return
	}
	p.classes[bits.Len(uint(c-1))].Put(b)
}

// responseBuffers remembers which embedding answers the server wrote into pooled buffers, so
// that the codec can hand them back after sending (an answer sent through another codec is
// forgotten when the entry is taken, or stays until the server's next answers take its place).
var responseBuffers = &owned{m: map[unsafe.Pointer]*[]byte{}}

type owned struct {
	mu sync.Mutex
	m  map[unsafe.Pointer]*[]byte
}

// put records that b's memory is the pooled buffer p.
func (o *owned) put(p *[]byte) {
	o.mu.Lock()
	if len(o.m) >= maxOwned {
		// Answers not sent through this codec: forget them (they are garbage collected).
		clear(o.m)
	}
	o.m[unsafe.Pointer(unsafe.SliceData(*p))] = p
	o.mu.Unlock()
}

// take returns the pooled buffer whose memory b is, forgetting it.
func (o *owned) take(b []byte) (*[]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := unsafe.Pointer(unsafe.SliceData(b))
	p, ok := o.m[k]
	if ok {
		delete(o.m, k)
	}
	return p, ok
}

// maxOwned bounds the answers remembered at once.
const maxOwned = 1024
