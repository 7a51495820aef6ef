package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/monolith-go/monolith/pkg/dataset"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// StreamConfig says what a Stream reads.
type StreamConfig struct {
	// Files are read in order, once per epoch.
	Files   []string
	Options dataset.Options
	// NewDecoder makes the decoder of the records (one per Stream: decoders keep state).
	NewDecoder func() (*Decoder, error)
	// Epochs is the number of passes over Files (at least 1).
	Epochs int
	// BatchSize is the number of examples of a batch; batches run on across epochs, so only the
	// last batch of the stream may be smaller.
	BatchSize int
	// ShuffleBuffer, when > 1, shuffles each epoch's examples through a buffer of that many
	// (tf.data's shuffle): the order is a function of Seed and the epoch alone, so that a stream
	// of more epochs repeats the first ones exactly.
	ShuffleBuffer int
	Seed          uint64
	// Skip passes over this many examples first (what a restored checkpoint trained on).
	Skip int64
}

// Stream reads batches of examples epoch after epoch: the training input of a worker. It knows
// where it is (Position, the examples it has returned or skipped) and marks the batch that ends an
// epoch. It is not safe for concurrent use.
type Stream struct {
	cfg    StreamConfig
	dec    *Decoder
	r      *dataset.Reader
	epoch  int // 0-based epoch being read
	pos    int64
	rng    *rand.Rand
	buf    *Batch // the shuffle buffer
	size   int    // its capacity
	ended1 int    // the last epoch (from 1) a batch was marked as ending
	ended  bool   // the epoch being read has no records left
	err    error
	dim    int
}

// OpenStream checks cfg and opens its first epoch.
func OpenStream(cfg StreamConfig) (*Stream, error) {
	switch {
	case cfg.Epochs < 1:
		return nil, errkind.New(errkind.Value, "batch: %d epochs: want at least 1", cfg.Epochs)
	case cfg.BatchSize <= 0:
		return nil, errkind.New(errkind.Value, "batch: batch size %d is not positive", cfg.BatchSize)
	case cfg.ShuffleBuffer < 0:
		return nil, errkind.New(errkind.Value, "batch: shuffle buffer %d is negative", cfg.ShuffleBuffer)
	case cfg.Skip < 0:
		return nil, errkind.New(errkind.Value, "batch: skip %d is negative", cfg.Skip)
	case len(cfg.Files) == 0:
		return nil, errkind.New(errkind.Value, "batch: no files to read")
	}
	dec, err := cfg.NewDecoder()
	if err != nil {
		return nil, err
	}
	// Without shuffling the buffer holds one example: the look-ahead that tells whether a full
	// batch ends its epoch.
	s := &Stream{cfg: cfg, dec: dec, dim: dec.DenseDim(), size: max(1, cfg.ShuffleBuffer)}
	s.buf = &Batch{DenseDim: s.dim}
	if err := s.openEpoch(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stream) openEpoch() error {
	r, err := dataset.OpenFiles(s.cfg.Files, s.cfg.Options)
	if err != nil {
		return err
	}
	s.r, s.ended = r, false
	if s.cfg.ShuffleBuffer > 1 {
		// A generator per epoch, seeded by the seed and the epoch: the epochs' orders do not
		// depend on how many epochs the stream has.
		s.rng = rand.New(rand.NewPCG(s.cfg.Seed, uint64(s.epoch)+0x9e3779b97f4a7c15))
	}
	return nil
}

// Decoder is the stream's decoder (its Missing and Records).
func (s *Stream) Decoder() *Decoder { return s.dec }

// Position is the number of examples the stream has returned or skipped.
func (s *Stream) Position() int64 { return s.pos }

// Epoch is the 1-based epoch of the last example returned.
func (s *Stream) Epoch() int { return s.epoch + 1 }

// read appends the next record of the epoch to b; false at the epoch's end.
func (s *Stream) read(ctx context.Context, b *Batch) (bool, error) {
	rec, err := s.r.Next(ctx)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := s.dec.Append(b, rec.Data); err != nil {
		return false, &RecordError{File: rec.File, Offset: rec.Offset, Err: err}
	}
	return true, nil
}

// take moves the epoch's next example into b; false when the epoch has none left.
func (s *Stream) take(ctx context.Context, b *Batch) (bool, error) {
	for !s.ended && s.buf.Size() < s.size {
		ok, err := s.read(ctx, s.buf)
		if err != nil {
			return false, err
		}
		s.ended = !ok
	}
	n := s.buf.Size()
	if n == 0 {
		return false, nil
	}
	i := 0
	if s.rng != nil {
		i = s.rng.IntN(n)
	}
	b.moveFrom(s.buf, i)
	return true, nil
}

// moveFrom appends example i of src to b and removes it from src (its last example takes its
// place).
func (b *Batch) moveFrom(src *Batch, i int) {
	last := src.Size() - 1
	b.Labels = append(b.Labels, src.Labels[i])
	b.Fids = append(b.Fids, src.Fids[i])
	d := src.DenseDim
	b.Dense = append(b.Dense, src.Dense[i*d:(i+1)*d]...)
	src.Labels[i], src.Fids[i] = src.Labels[last], src.Fids[last]
	copy(src.Dense[i*d:(i+1)*d], src.Dense[last*d:(last+1)*d])
	src.Labels, src.Fids, src.Dense = src.Labels[:last], src.Fids[:last], src.Dense[:last*d]
}

// next takes the stream's next example into b: false at the stream's end.
func (s *Stream) next(ctx context.Context, b *Batch) (bool, error) {
	for {
		ok, err := s.take(ctx, b)
		if err != nil {
			return false, err
		}
		if ok {
			s.pos++
			return true, nil
		}
		if err := s.r.Close(); err != nil {
			return false, err
		}
		s.r = nil
		if s.dec.Records() == 0 {
			return false, errkind.New(errkind.Value, "no records in %s", filesWords(s.cfg.Files))
		}
		if s.epoch+1 >= s.cfg.Epochs {
			return false, nil
		}
		s.epoch++
		if err := s.openEpoch(); err != nil {
			return false, err
		}
	}
}

func filesWords(files []string) string {
	if len(files) == 1 {
		return files[0]
	}
	return fmt.Sprintf("%d files (%s, ...)", len(files), files[0])
}

// Next returns the next batch, and io.EOF after the last. Batch.EndsEpoch is set on a batch whose
// examples finish an epoch.
func (s *Stream) Next(ctx context.Context) (*Batch, error) {
	if s.err != nil {
		return nil, s.err
	}
	b, err := s.nextBatch(ctx)
	if err != nil {
		s.err = err
	}
	return b, err
}

func (s *Stream) nextBatch(ctx context.Context) (*Batch, error) {
	for s.pos < s.cfg.Skip {
		skip := &Batch{DenseDim: s.dim}
		ok, err := s.next(ctx, skip)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, io.EOF
		}
		// The epochs the skipped examples finished were the restored run's to end.
		s.ended1 = s.epoch
		if s.pos == s.cfg.Skip && s.atEpochEnd(ctx) {
			s.ended1 = s.epoch + 1
		}
	}
	b := &Batch{DenseDim: s.dim}
	for b.Size() < s.cfg.BatchSize {
		if s.r == nil {
			break
		}
		epoch := s.epoch
		ok, err := s.next(ctx, b)
		if err != nil {
			return nil, err
		}
		if !ok || s.epoch != epoch {
			// The stream ended, or the example came from the next epoch: epoch ended in this
			// batch, unless the batch before already said so (it ended with the epoch).
			s.endEpoch(b, epoch+1)
		}
		if !ok {
			break
		}
	}
	if b.Size() == 0 {
		return nil, io.EOF
	}
	b.Epoch = s.epoch + 1
	if s.r != nil && s.atEpochEnd(ctx) {
		s.endEpoch(b, s.epoch+1)
	}
	return b, nil
}

// endEpoch marks b as the end of epoch, once per epoch.
func (s *Stream) endEpoch(b *Batch, epoch int) {
	if epoch > s.ended1 {
		b.EndsEpoch, s.ended1 = epoch, epoch
	}
}

// atEpochEnd reports whether the epoch being read has no examples left, so that the batch just
// filled ends it. It reads ahead at most one record, into the buffer.
func (s *Stream) atEpochEnd(ctx context.Context) bool {
	if s.buf.Size() > 0 {
		return false
	}
	if !s.ended {
		ok, err := s.read(ctx, s.buf)
		if err != nil {
			// The error is the next batch's.
			s.err = err
			return false
		}
		s.ended = !ok
	}
	return s.ended
}

// Close closes the file being read.
func (s *Stream) Close() error {
	if s.r == nil {
		return nil
	}
	err := s.r.Close()
	s.r = nil
	return err
}
