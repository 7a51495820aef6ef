// Command convert turns CSV/TSV files into TFRecord files of Examples for cmd/train, as a feature
// schema describes the columns (pkg/featureschema): the label's column and rule, sparse id
// columns (integers, or strings) with their fid slots, dense float columns.
//
//	convert --schema=schema.yaml --input='logs/*.csv.gz' --output=data/ --shards=8
//	train --schema=schema.yaml --input_format=tf_example --train_data='data/part-*' ...
//
// --example=tf_example writes tf.train.Examples (the label as a float_list of its raw value, ids
// as int64_list, strings as bytes_list, dense values as float_list; the trainer applies the
// schema's label rule and hashes the strings); --example=monolith writes Monolith Examples (the
// label field, fid_v2_list ids with strings hashed here, float_list dense values), each feature
// named by its source column. Either way the records are what pkg/trainer/batch.Decoder reads.
//
// Every file starts with a header row naming its columns (in any order; other columns are
// ignored); each value is checked as the trainer would check it, so that a bad row (a wrong number
// of fields, a value that does not parse, a NaN, a bad label, an empty required cell, a dense cell
// of the wrong number of values) fails here naming file:line, the column and the value, rather
// than in training. --max_bad_rows=N skips up to N of them (each logged, all counted).
//
// A cell may hold several values split by the feature's separator (";" unless the schema names
// one); spaces around values are dropped, an empty item ("1;;2") is a bad row. An optional
// feature's empty cell leaves the feature out of the record: the trainer's decoder then uses the
// schema's default, so the schema stays the one place defaults are stated.
//
// Nothing half-written is left behind: the shards are written as hidden temporary files of
// --output and renamed into place only when every input converted; on failure they are removed
// (and --output too when convert made it and it is empty). An --output already holding
// part-*.tfrecord files is refused unless --overwrite, which replaces them once the new shards are
// complete (and removes old parts no new one replaced, e.g. of another shard count).
//
// A progress line is logged on stderr every --progress_interval (rows, rows/s, bad rows, record
// bytes before compression); the summary (rows written, bad rows, files and their bytes) goes to
// stdout.
//
// Exit status: 0 after converting, 2 for a bad command line or bad input (schema, patterns, a
// missing column, bad rows, an --output with part files), 1 for a failure at run time.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	convertspec "github.com/monolith-go/monolith/gen/spec/go/convert"
	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/csvconvert"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

const name = "convert"

const description = "Convert CSV/TSV files into TFRecord files of Examples (tf.train.Example or Monolith Example), as a feature schema describes the columns."

type cmdFlags struct {
	cli.Common
	convertspec.ConvertFlags
}

func main() { cli.Main(cli.IgnoreSecondSignal, run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cmdFlags
	return cli.Run(name, description, &c, &c.LogLevel, args, stdout, stderr, func(log *slog.Logger) error {
		return cli.OneLine(convert(ctx, c.ConvertFlags, stdout, log))
	})
}

func convert(ctx context.Context, f convertspec.ConvertFlags, stdout io.Writer, log *slog.Logger) error {
	switch {
	case f.Schema == "":
		return cli.Usage(errors.New("--schema is required: the feature schema (YAML) describing the columns"))
	case f.Input == "":
		return cli.Usage(errors.New("--input is required: the CSV/TSV files (file patterns)"))
	case f.Output == "":
		return cli.Usage(errors.New("--output is required: the directory to write the TFRecord files into"))
	case f.Shards <= 0:
		return cli.Usage(fmt.Errorf("--shards %d: want at least 1", f.Shards))
	case f.MaxBadRows < 0:
		return cli.Usage(fmt.Errorf("--max_bad_rows %d is negative", f.MaxBadRows))
	}
	compression, err := dataset.ParseCompression(f.Compression)
	if err != nil {
		return cli.Usage(fmt.Errorf("--compression: %w", err))
	}
	schema, err := featureschema.Load(f.Schema)
	if err != nil {
		return cli.Usage(fmt.Errorf("--schema: %w", err))
	}
	plan, err := csvconvert.PlanOf(schema)
	if err != nil {
		return cli.Usage(fmt.Errorf("--schema: %w", err))
	}
	files, err := dataset.ExpandPatterns(f.Input)
	if err != nil {
		return cli.Usage(fmt.Errorf("--input %q: %w", f.Input, err))
	}
	comma := ','
	if f.Format == "tsv" {
		comma = '\t'
	}
	format := batch.Format(f.Example)

	out, err := csvconvert.CreateOutput(f.Output, f.Shards, compression, f.Overwrite)
	if err != nil {
		return classify(fmt.Errorf("--output: %w", err))
	}
	conv, err := csvconvert.NewConverter(plan, out.Writers(), csvconvert.Options{
		Format:     format,
		Comma:      comma,
		MaxBadRows: int64(f.MaxBadRows),
		OnBadRow: func(e *csvconvert.RowError) {
			log.Warn("bad row skipped", "error", e.Error())
		},
		Progress: func(s csvconvert.Stats) {
			log.Info("progress", "rows", s.Rows, "rows_per_s", int64(perSecond(s.Rows, s.Elapsed)),
				"bad_rows", s.BadRows, "record_bytes", s.RecordBytes)
		},
		ProgressInterval: f.ProgressInterval,
		Suggest:          featureschema.Suggest,
	})
	if err != nil {
		out.Abort()
		return classify(err)
	}
	log.Info("converting", "files", len(files), "example", format, "shards", f.Shards, "output", f.Output)
	for _, file := range files {
		if err := conv.ConvertFile(ctx, file); err != nil {
			out.Abort()
			return classify(err)
		}
	}
	written, err := out.Commit()
	if err != nil {
		return err
	}
	s := conv.Stats()
	if replaced := out.Replaced(); len(replaced) > 0 {
		log.Info("replaced the part files --output held", "files", len(replaced))
	}
	return summary(stdout, f, s, written)
}

// classify makes bad input (kinds Value and NotFound: a missing column, a bad row, an --output
// holding part files) a usage error (exit status 2).
func classify(err error) error {
	var rowErr *csvconvert.RowError
	if errors.As(err, &rowErr) {
		return cli.Usage(err)
	}
	switch errkind.Of(err) {
	case errkind.Value, errkind.NotFound:
		return cli.Usage(err)
	}
	return err
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// summary prints what was written, one fact a line.
func summary(w io.Writer, f convertspec.ConvertFlags, s csvconvert.Stats, files []csvconvert.File) error {
	var bytes int64
	for _, file := range files {
		bytes += file.Bytes
	}
	compression := f.Compression
	if compression == "" {
		compression = "none"
	}
	lines := []string{
		fmt.Sprintf("input files   %d", s.Files),
		fmt.Sprintf("rows written  %d (%.0f rows/s)", s.Rows, perSecond(s.Rows, s.Elapsed)),
		fmt.Sprintf("bad rows      %d skipped (--max_bad_rows=%d)", s.BadRows, f.MaxBadRows),
		fmt.Sprintf("output files  %d in %s (%s, compression %s)", len(files), f.Output, f.Example, compression),
		fmt.Sprintf("bytes         %d", bytes),
	}
	for _, file := range files {
		lines = append(lines, fmt.Sprintf("  %s  %d bytes", filepath.Base(file.Path), file.Bytes))
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
