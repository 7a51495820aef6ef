package csvconvert

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/tfrecord"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
)

// RecordWriter takes the records of one shard: a dataset.FileWriter, a tfrecord.Writer.
type RecordWriter interface {
	Write(rec []byte) error
}

// Options say how a Converter reads and writes.
type Options struct {
	// Format is the records to write: batch.TFExample or batch.Monolith.
	Format batch.Format
	// Comma separates fields: ',' (CSV, the default) or '\t' (TSV).
	Comma rune
	// MaxBadRows bad rows are skipped (counted, and each reported to OnBadRow); the next one fails
	// the conversion.
	MaxBadRows int64
	// OnBadRow is told of each bad row skipped; nil: nothing is told.
	OnBadRow func(*RowError)
	// Progress is called about every ProgressInterval while rows are converted; nil or a zero
	// interval: never.
	Progress         func(Stats)
	ProgressInterval time.Duration
	// Suggest picks the name among candidates nearest to name for a did-you-mean ("": none);
	// nil: no suggestions.
	Suggest func(name string, candidates []string) string
}

// Stats count what a Converter did so far.
type Stats struct {
	// Files is the number of input files read to their end.
	Files int64
	// Rows is the number of records written; BadRows the rows skipped as bad.
	Rows, BadRows int64
	// RecordBytes is the size of the records written, TFRecord framing included, before any
	// compression.
	RecordBytes int64
	// Elapsed is the time since the Converter was made.
	Elapsed time.Duration
}

// Converter converts CSV files into records dealt round-robin to its shards. It is not safe for
// concurrent use.
type Converter struct {
	opts   Options
	plan   *Plan
	shards []RecordWriter
	next   int // the shard of the next record
	enc    *encoder
	stats  Stats
	start  time.Time
	// lastProgress is when Progress was last called.
	lastProgress time.Time
	// The current file's columns: each feature's, the label's, and how many the header has.
	cols      []int
	labelCol  int
	headerLen int
}

// NewConverter checks plan and returns a Converter writing to shards.
func NewConverter(plan *Plan, shards []RecordWriter, opts Options) (*Converter, error) {
	if opts.Format == "" {
		opts.Format = batch.TFExample
	}
	if _, err := batch.ParseFormat(string(opts.Format)); err != nil {
		return nil, err
	}
	if opts.Comma == 0 {
		opts.Comma = ','
	}
	if len(shards) == 0 {
		return nil, errkind.New(errkind.Value, "csvconvert: no shards to write to")
	}
	if err := plan.validate(opts.Format); err != nil {
		return nil, err
	}
	now := time.Now()
	return &Converter{
		opts: opts, plan: plan, shards: shards,
		enc:   newEncoder(opts.Format, plan),
		start: now, lastProgress: now,
	}, nil
}

// Stats are the counts so far.
func (c *Converter) Stats() Stats {
	s := c.stats
	s.Elapsed = time.Since(c.start)
	return s
}

// ConvertFile converts the CSV file at path (gzip-compressed when its name ends .gz or its bytes
// start as gzip's). Bad input (a missing column, a bad row beyond MaxBadRows, a corrupt gzip
// stream) is an error of kind Value naming the file; *RowError for a bad row.
func (c *Converter) ConvertFile(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errkind.Wrap(errkind.NotFound, fmt.Errorf("csvconvert: %w", err))
		}
		return fmt.Errorf("csvconvert: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var r io.Reader = br
	if magic, _ := br.Peek(2); strings.HasSuffix(path, ".gz") || bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		z, err := gzip.NewReader(br)
		if err != nil {
			return errkind.Wrap(errkind.Value, fmt.Errorf("%s: not a gzip file: %w", path, err))
		}
		defer z.Close()
		r = z
	}
	return c.Convert(ctx, path, r)
}

// Convert converts the CSV stream r, named name in errors: a header row naming the columns, then
// the rows.
func (c *Converter) Convert(ctx context.Context, name string, r io.Reader) error {
	cr := csv.NewReader(r)
	cr.Comma = c.opts.Comma
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return errkind.New(errkind.Value, "%s is empty: the first row must be a header naming the columns", name)
	}
	if err != nil {
		return c.readError(name, err)
	}
	if err := c.resolveColumns(name, header); err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			c.maybeProgress()
		}
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return c.readError(name, err)
			}
			if err := c.badRow(rowErrorOf(name, c.headerLen, pe, rec)); err != nil {
				return err
			}
			continue
		}
		rerr, err := c.convertRow(cr, name, rec)
		if err != nil {
			return err
		}
		if rerr != nil {
			if err := c.badRow(rerr); err != nil {
				return err
			}
		}
	}
	c.stats.Files++
	return nil
}

// readError is an error reading name: a corrupt compressed stream is bad input, anything else a
// failure at run time.
func (c *Converter) readError(name string, err error) error {
	err = fmt.Errorf("%s: read: %w", name, err)
	var ce flate.CorruptInputError
	if errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ce) {
		return errkind.Wrap(errkind.Value, err)
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return errkind.Wrap(errkind.Value, err)
	}
	return err
}

// rowErrorOf words a row encoding/csv could not read.
func rowErrorOf(name string, header int, pe *csv.ParseError, rec []string) *RowError {
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		return &RowError{File: name, Line: pe.StartLine, Reason: fmt.Sprintf("the row has %d fields, the header has %d", len(rec), header)}
	}
	return &RowError{File: name, Line: pe.Line, Col: pe.Column, Reason: pe.Err.Error()}
}

// badRow counts a bad row: skipped while MaxBadRows allows, else the conversion's error.
func (c *Converter) badRow(e *RowError) error {
	c.stats.BadRows++
	if c.stats.BadRows > c.opts.MaxBadRows {
		if c.opts.MaxBadRows > 0 {
			e.Reason += fmt.Sprintf(" (bad row %d, more than the %d allowed)", c.stats.BadRows, c.opts.MaxBadRows)
		}
		return errkind.Wrap(errkind.Value, e)
	}
	if c.opts.OnBadRow != nil {
		c.opts.OnBadRow(e)
	}
	return nil
}

// resolveColumns finds the plan's columns in name's header.
func (c *Converter) resolveColumns(name string, header []string) error {
	header = slices.Clone(header) // the reader reuses its record
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff") // a UTF-8 byte order mark
	}
	index := map[string]int{}
	dups := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		if _, dup := index[h]; dup {
			dups[h] = true
		}
		index[h] = i
	}
	find := func(col, what string) (int, error) {
		if dups[col] {
			return 0, errkind.New(errkind.Value, "%s: the header names column %q (%s) more than once", name, col, what)
		}
		if i, ok := index[col]; ok {
			return i, nil
		}
		msg := fmt.Sprintf("%s: the header has no column %q (%s)", name, col, what)
		if c.opts.Suggest != nil {
			if near := c.opts.Suggest(col, header); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
		}
		return 0, errkind.New(errkind.Value, "%s", msg)
	}
	var err error
	if c.labelCol, err = find(c.plan.LabelSource, "the label"); err != nil {
		return err
	}
	c.cols = c.cols[:0]
	for _, f := range c.plan.Features {
		i, err := find(f.Source, fmt.Sprintf("feature %q", f.Name))
		if err != nil {
			return err
		}
		c.cols = append(c.cols, i)
	}
	c.headerLen = len(header)
	return nil
}

// convertRow converts rec and writes its record to the next shard. A bad row is returned as a
// *RowError, a failure to write as an error.
func (c *Converter) convertRow(cr *csv.Reader, name string, rec []string) (*RowError, error) {
	record, bad, cerr := c.enc.encode(rec, c.labelCol, c.cols)
	if cerr != nil {
		if bad < 0 {
			return badValue(cr, name, rec, c.labelCol, c.plan.LabelSource, cerr), nil
		}
		return badValue(cr, name, rec, c.cols[bad], c.plan.Features[bad].Source, cerr), nil
	}
	if err := c.shards[c.next].Write(record); err != nil {
		return nil, fmt.Errorf("csvconvert: shard %d: %w", c.next, err)
	}
	c.next++
	if c.next == len(c.shards) {
		c.next = 0
	}
	c.stats.Rows++
	c.stats.RecordBytes += int64(len(record)) + tfrecord.HeaderLen + tfrecord.FooterLen
	return nil, nil
}

// badValue is the RowError of rec's cell col (of column, in name) being bad.
func badValue(cr *csv.Reader, name string, rec []string, col int, column string, e *cellError) *RowError {
	line, _ := cr.FieldPos(col)
	return &RowError{File: name, Line: line, Column: column, Value: rec[col], Reason: e.reason}
}

func (c *Converter) maybeProgress() {
	if c.opts.Progress == nil || c.opts.ProgressInterval <= 0 {
		return
	}
	if now := time.Now(); now.Sub(c.lastProgress) >= c.opts.ProgressInterval {
		c.lastProgress = now
		c.opts.Progress(c.Stats())
	}
}
