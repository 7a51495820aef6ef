package ps

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pspb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/ps"
)

// TestWireCodecMarshal: the hand-encoded messages are the bytes proto.Marshal writes, and the
// proto codec's messages go through unchanged.
func TestWireCodecMarshal(t *testing.T) {
	floats := make([]float32, 3000)
	for i := range floats {
		floats[i] = float32(i) - 0.5
	}
	ids := []int64{-1, 0, 1 << 62, 12345}
	tests := []struct {
		name string
		msg  proto.Message
	}{
		{name: "lookup request", msg: &pspb.LookupRequest{Table: "emb", Dim: 16, Ids: int64Bytes(ids)}},
		{name: "empty lookup request", msg: &pspb.LookupRequest{}},
		{name: "negative dim", msg: &pspb.LookupRequest{Table: "t", Dim: -3}},
		{name: "apply request", msg: &pspb.ApplyGradientsRequest{Table: "emb", Dim: 2, Ids: int64Bytes(ids[:2]), Grads: float32Bytes(floats[:4]),
			GlobalStep: 7, LearningRates: []float32{0.5, 0.25}, UpdateTimeSec: 1 << 40, NewestEventTimeMs: 1_700_000_000_123}},
		{name: "apply request, negative step", msg: &pspb.ApplyGradientsRequest{Table: "emb", Dim: 1, GlobalStep: -1}},
		{name: "lookup response", msg: &pspb.LookupResponse{Embeddings: float32Bytes(floats), Found: 3}},
		{name: "lookup response, none found", msg: &pspb.LookupResponse{Embeddings: float32Bytes(floats[:4])}},
		{name: "empty lookup response", msg: &pspb.LookupResponse{}},
		{name: "other message", msg: &pspb.HealthResponse{Index: 3, Tables: []string{"a"}}},
	}
	// The full cases set every field of their message: a field added to the proto and not to the
	// hand codec fails here.
	for _, tc := range tests[:4] {
		if tc.name != "apply request" && tc.name != "lookup request" {
			continue
		}
		m := tc.msg.ProtoReflect()
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			if !m.Has(fields.Get(i)) {
				t.Errorf("case %q leaves field %s unset", tc.name, fields.Get(i).Name())
			}
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := codec.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			wire := got.Materialize()
			got.Free()
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(wire, want) {
				t.Fatalf("codec wrote\n%x\nproto writes\n%x", wire, want)
			}
		})
	}
}

// TestWireCodecUnmarshal decodes lookup answers into their rows however the transport splits
// them, skipping fields it does not know, as proto does, and refuses malformed ones.
func TestWireCodecUnmarshal(t *testing.T) {
	const n, dim = 250, 4
	emb := make([]float32, n*dim)
	for i := range emb {
		emb[i] = float32(i) * 0.25
	}
	// Answer row u goes to output row n-1-u.
	rows := make([]int32, n)
	for u := range rows {
		rows[u] = int32(n - 1 - u)
	}
	full, _ := proto.Marshal(&pspb.LookupResponse{Embeddings: float32Bytes(emb), Found: 9})
	// Unknown fields of every wire type, before the known ones.
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 20, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 300)
	unknown = protowire.AppendTag(unknown, 21, protowire.Fixed32Type)
	unknown = protowire.AppendFixed32(unknown, 1)
	unknown = protowire.AppendTag(unknown, 22, protowire.Fixed64Type)
	unknown = protowire.AppendFixed64(unknown, 1)
	unknown = protowire.AppendTag(unknown, 23, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, []byte("skip me"))
	withUnknown := append(append([]byte(nil), unknown...), full...)
	short, _ := proto.Marshal(&pspb.LookupResponse{Embeddings: float32Bytes(emb[:dim]), Found: 1})
	tests := []struct {
		name  string
		wire  []byte
		split int // bytes per transport buffer (0: one buffer)
		want  string
	}{
		{name: "one buffer", wire: full},
		{name: "many buffers", wire: full, split: 7},
		{name: "unknown fields", wire: withUnknown, split: 5},
		{name: "truncated", wire: full[:len(full)-10], want: "truncated"},
		{name: "another size", wire: short, want: "lookup answer of 16 bytes, want 4000 (250 ids of dimension 4)"},
		{name: "no embeddings", wire: []byte{0x10, 0x01}, want: "lookup answer without embeddings for 250 ids"},
		{name: "bad varint", wire: []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, want: "overflows"},
		{name: "field zero", wire: []byte{0x00, 0x01}, want: "invalid field number"},
		{name: "group", wire: []byte{0x1b}, want: "unsupported wire type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var bufs mem.BufferSlice
			for rest := tc.wire; len(rest) > 0; {
				k := len(rest)
				if tc.split > 0 {
					k = min(k, tc.split)
				}
				bufs = append(bufs, mem.SliceBuffer(rest[:k]))
				rest = rest[k:]
			}
			got := &rowsReply{out: make([]float32, n*dim), rows: rows, dim: dim}
			err := codec.Unmarshal(bufs, got)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Unmarshal = %v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.found != 9 {
				t.Fatalf("found %d, want 9", got.found)
			}
			for u := 0; u < n; u++ {
				p := n - 1 - u
				for j := 0; j < dim; j++ {
					if got.out[p*dim+j] != emb[u*dim+j] {
						t.Fatalf("row %d float %d = %v, want answer row %d's %v", p, j, got.out[p*dim+j], u, emb[u*dim+j])
					}
				}
			}
		})
	}
}

// TestWireCodecUnmarshalRowSizes decodes answers of every row size the codec copies as arrays,
// and one it does not, from transport buffers smaller than a row, a few rows long, and not a
// whole number of rows.
func TestWireCodecUnmarshalRowSizes(t *testing.T) {
	const n = 97
	for _, dim := range []int{3, 8, 16, 32, 64} {
		for _, split := range []int{0, 7, 100, 1000, 4099} {
			t.Run(fmt.Sprintf("dim=%d/split=%d", dim, split), func(t *testing.T) {
				emb := make([]float32, n*dim)
				for i := range emb {
					emb[i] = float32(i) + 0.5
				}
				rows := make([]int32, n)
				for u := range rows {
					rows[u] = int32((u * 37) % n) // 37 is prime to n: a permutation
				}
				wire, _ := proto.Marshal(&pspb.LookupResponse{Embeddings: float32Bytes(emb), Found: n})
				var bufs mem.BufferSlice
				for rest := wire; len(rest) > 0; {
					k := len(rest)
					if split > 0 {
						k = min(k, split)
					}
					bufs = append(bufs, mem.SliceBuffer(rest[:k]))
					rest = rest[k:]
				}
				got := &rowsReply{out: make([]float32, n*dim), rows: rows, dim: dim}
				if err := codec.Unmarshal(bufs, got); err != nil {
					t.Fatal(err)
				}
				for u, p := range rows {
					for j := 0; j < dim; j++ {
						if g, w := got.out[int(p)*dim+j], emb[u*dim+j]; g != w {
							t.Fatalf("row %d float %d = %v, want answer row %d's %v", p, j, g, u, w)
						}
					}
				}
			})
		}
	}
}

func TestBufferPool(t *testing.T) {
	p := &bufferPool{}
	for _, n := range []int{0, 10, minPooled, minPooled + 1, 1 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d) has length %d", n, len(*b))
		}
		if n > 0 {
			if _, err := decodeFloat32s("pooled", *b); err != nil && n%4 == 0 {
				t.Fatal(err)
			}
		}
		p.Put(b)
	}
	// A buffer comes back with the length asked for, from its size class.
	b := p.Get(5000)
	p.Put(b)
	if c := p.Get(6000); cap(*c) != 8192 || len(*c) != 6000 {
		t.Fatalf("Get(6000): len %d cap %d", len(*c), cap(*c))
	}
	// Buffers of other sizes are not pooled.
	odd := make([]byte, 5000)
	p.Put(&odd)
}
