package embeddingtask

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/core/tensor"
)

// BenchmarkParseVocabSizes: a 10,000-slot vocab size file.
func BenchmarkParseVocabSizes(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("slot\tcount\n")
	for i := range 10000 {
		fmt.Fprintf(&sb, "%d\t%d\n", i, i*37+1)
	}
	data := sb.String()
	p := DefaultParams()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseVocabSizes(strings.NewReader(data), p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPostProcessExample: a batch of 512 examples, 50 slots of 3 ids each, plus uid.
func BenchmarkPostProcessExample(b *testing.B) {
	const batch, slots = 512, 50
	rng := rand.New(rand.NewPCG(3, 3))
	vocab := map[int]int{}
	var ss []Slot
	in := NewExample()
	for s := range slots {
		vocab[s] = 100000
		name := fmt.Sprintf("slot_%d", s)
		ss = append(ss, Slot{ID: s, Columns: []Column{{Name: name, Slices: []Slice{{Index: 0, Dim: 1}, {Index: 1, Dim: 8}}}}})
		sp := tensor.Sparse[int64]{DenseShape: []int64{batch, 3}}
		for r := range batch {
			for j := range 3 {
				sp.Indices = append(sp.Indices, []int64{int64(r), int64(j)})
				sp.Values = append(sp.Values, rng.Int64N(1<<40)-10)
			}
		}
		in.Sparse[name+"_0"] = sp
	}
	uids := make([]int64, batch)
	for i := range uids {
		uids[i] = rng.Int64()
	}
	in.Dense["uid"] = tensor.Vector(uids...)
	p := DefaultParams()
	p.CustomVocabSizeMapping = map[int]int{0: 1000}
	task := NewWithVocab(p, vocab, quiet)
	if err := task.SetSlots(ss); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ex := in.Clone()
		if err := task.PostProcessExample(ex); err != nil {
			b.Fatal(err)
		}
	}
}
