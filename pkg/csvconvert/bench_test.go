package csvconvert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/tfrecord"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// benchSchema is a 10-column CSV's: the label, 4 integer id columns, a string column and 4 floats.
const benchSchema = `
label: {source: label}
features:
  - {name: user_id, kind: sparse_int, slot: 1}
  - {name: item_id, kind: sparse_int, slot: 2}
  - {name: shop_id, kind: sparse_int, slot: 3}
  - {name: city_id, kind: sparse_int, slot: 4}
  - {name: category, kind: sparse_string, slot: 5}
  - {name: price, kind: dense, dim: 1}
  - {name: age, kind: dense, dim: 1}
  - {name: ctr, kind: dense, dim: 1}
  - {name: score, kind: dense, dim: 1}
`

// benchCSV is rows of benchSchema's columns, with ids and floats of realistic lengths.
func benchCSV(rows int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString("label,user_id,item_id,shop_id,city_id,category,price,age,ctr,score\n")
	categories := []string{"books", "electronics", "garden", "toys", "food", "music", "sports", "home_kitchen"}
	for range rows {
		fmt.Fprintf(&b, "%d,%d,%d,%d,%d,%s,%.2f,%d,%.6f,%.4f\n",
			rng.IntN(2), rng.Int64N(1e9), rng.Int64N(1e7), rng.Int64N(1e5), rng.IntN(400),
			categories[rng.IntN(len(categories))], rng.Float64()*500, 18+rng.IntN(60), rng.Float64()*0.1, rng.NormFloat64())
	}
	return b.Bytes()
}

// readCSV is encoding/csv alone reading the file at path (through the conversion's 256 KiB
// buffer), with or without reusing its record: the baselines a conversion is measured against.
func readCSV(path string, reuse bool) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 256<<10))
	r.ReuseRecord = reuse
	n := 0
	for {
		_, err := r.Read()
		if err == io.EOF {
			return n - 1, nil // the header is no row
		}
		if err != nil {
			return 0, err
		}
		n++
	}
}

// benchFile writes benchCSV(rows) into a file of a temporary directory.
func benchFile(b *testing.B, rows int) (path string, size int64) {
	data := benchCSV(rows)
	path = filepath.Join(b.TempDir(), "bench.csv")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return path, int64(len(data))
}

// BenchmarkConvertVsCSV converts a 10-column CSV file (a label, 4 id columns, a string column, 4
// float columns) into tf.train.Example records written through a TFRecord writer to io.Discard,
// and reads the same file with encoding/csv alone, alternately in each iteration so that both see
// the same machine. convert_over_csv is the conversion's rate over encoding/csv's as one reads a
// file (csv.Reader.Read: the goal is at least 0.5 on one core, -cpu 1); convert_over_csv_reuse
// is over encoding/csv reusing its record (ReuseRecord, as the conversion does: the stricter
// comparison).
func BenchmarkConvertVsCSV(b *testing.B) {
	const rows = 20000
	path, size := benchFile(b, rows)
	plan, err := PlanOf(mustSchema(b, benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var csvTime, reuseTime, convTime time.Duration
	iters := 0
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if n, err := readCSV(path, false); err != nil || n != rows {
			b.Fatalf("csv: %d rows, %v", n, err)
		}
		reuse := time.Now()
		if n, err := readCSV(path, true); err != nil || n != rows {
			b.Fatalf("csv: %d rows, %v", n, err)
		}
		mid := time.Now()
		c, err := NewConverter(plan, []RecordWriter{tfrecord.NewWriter(io.Discard)}, Options{Format: batch.TFExample})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.ConvertFile(ctx, path); err != nil {
			b.Fatal(err)
		}
		if got := c.Stats().Rows; got != rows {
			b.Fatalf("%d rows converted, want %d", got, rows)
		}
		csvTime += reuse.Sub(start)
		reuseTime += mid.Sub(reuse)
		convTime += time.Since(mid)
		iters++
	}
	total := float64(rows * iters)
	b.ReportMetric(total/convTime.Seconds(), "convert_rows/s")
	b.ReportMetric(total/csvTime.Seconds(), "csv_rows/s")
	b.ReportMetric(csvTime.Seconds()/convTime.Seconds(), "convert_over_csv")
	b.ReportMetric(total/reuseTime.Seconds(), "csv_reuse_rows/s")
	b.ReportMetric(reuseTime.Seconds()/convTime.Seconds(), "convert_over_csv_reuse")
}

// BenchmarkConvertMonolith is the conversion of the same file into Monolith Examples (strings
// hashed, fids).
func BenchmarkConvertMonolith(b *testing.B) {
	const rows = 20000
	path, size := benchFile(b, rows)
	plan, err := PlanOf(mustSchema(b, benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		c, err := NewConverter(plan, []RecordWriter{tfrecord.NewWriter(io.Discard)}, Options{Format: batch.Monolith})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.ConvertFile(context.Background(), path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
