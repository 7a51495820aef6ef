package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/monolith-go/monolith/internal/cli"
	"github.com/monolith-go/monolith/pkg/csvconvert"
	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/featureschema"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// source is the input: each pass hands every record of the input, in order, to emit. A record is
// valid only during the call (emit copies what it keeps).
type source interface {
	// Pass reads the input once. It ends at the input's end (nil), at emit's error (returned,
	// wrapped or not), at ctx's end, or at bad input (a usage error naming the file, and the
	// record's offset or the row's line).
	Pass(ctx context.Context, emit func(rec []byte) error) error
}

// tfrecordSource is TFRecord files, each record sent as it is.
type tfrecordSource struct {
	files []string
	opts  dataset.Options
}

func (s tfrecordSource) Pass(ctx context.Context, emit func([]byte) error) error {
	r, err := dataset.OpenFiles(s.files, s.opts)
	if err != nil {
		return inputError(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return inputError(err)
		}
		if err := emit(rec.Data); err != nil {
			return err
		}
	}
}

// inputError makes an error reading the files (a missing, unreadable or corrupt file: a
// *dataset.FileError, which names the file and the record's offset) a usage error; a context's
// error stays as it is.
func inputError(err error) error {
	var fe *dataset.FileError
	if errors.As(err, &fe) {
		return cli.Usage(err)
	}
	return err
}

// csvSource is CSV/TSV files converted row by row into Examples by pkg/csvconvert, as
// cmd/convert converts them, the records going to emit instead of to TFRecord shards.
type csvSource struct {
	files []string
	conv  *csvconvert.Converter
	w     *emitWriter
}

// emitWriter is the converter's one shard: it passes each record to the pass's emit.
type emitWriter struct{ emit func([]byte) error }

func (w *emitWriter) Write(rec []byte) error { return w.emit(rec) }

// newCSVSource reads the feature schema at schemaPath and makes the converter of its columns;
// comma separates the fields, format is the Examples to make. A bad schema is a usage error.
func newCSVSource(files []string, schemaPath string, comma rune, format batch.Format) (*csvSource, error) {
	schema, err := featureschema.Load(schemaPath)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--schema: %w", err))
	}
	plan, err := csvconvert.PlanOf(schema)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--schema: %w", err))
	}
	w := &emitWriter{}
	conv, err := csvconvert.NewConverter(plan, []csvconvert.RecordWriter{w}, csvconvert.Options{
		Format:  format,
		Comma:   comma,
		Suggest: featureschema.Suggest,
	})
	if err != nil {
		return nil, csvError(err)
	}
	return &csvSource{files: files, conv: conv, w: w}, nil
}

func (s *csvSource) Pass(ctx context.Context, emit func([]byte) error) error {
	s.w.emit = emit
	for _, f := range s.files {
		if err := s.conv.ConvertFile(ctx, f); err != nil {
			return csvError(err)
		}
	}
	return nil
}

// csvError makes bad input (a bad row, a missing column or file, a corrupt gzip stream: kinds
// Value and NotFound) a usage error, as cmd/convert does.
func csvError(err error) error {
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
