package tbevent

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
)

func benchSummary() *tfframework.Summary {
	s := &tfframework.Summary{}
	for i := range 10 {
		s.Value = append(s.Value, &tfframework.Summary_Value{Tag: fmt.Sprintf("eval/metric_%d", i), Value: &tfframework.Summary_Value_SimpleValue{SimpleValue: float32(i) / 7}})
	}
	return s
}

// BenchmarkAddSummary: one eval summary of 10 scalars per op, buffered (the flush interval is not
// reached), as the eval loop writes them.
func BenchmarkAddSummary(b *testing.B) {
	clk := &clock{t: time.Unix(1700000000, 0)}
	w, err := NewWriter(b.TempDir(), Options{Now: clk.Now, Hostname: "bench", FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	s := benchSummary()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.AddSummary(s, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadAll: decoding and CRC-checking an event file of 1000 such summaries.
func BenchmarkReadAll(b *testing.B) {
	clk := &clock{t: time.Unix(1700000000, 0)}
	w, err := NewWriter(b.TempDir(), Options{Now: clk.Now, Hostname: "bench", FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	s := benchSummary()
	for i := range 1000 {
		if err := w.AddSummary(s, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(w.Path())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		events, err := ReadAll(bytes.NewReader(data))
		if err != nil || len(events) != 1001 {
			b.Fatalf("%d events, %v", len(events), err)
		}
	}
}
