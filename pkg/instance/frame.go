package instance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Frame is one record of a framed binary dump and what its headers said.
type Frame struct {
	// Data is the record, in a slice the caller owns.
	Data []byte
	// Offset is the input offset of the frame's first byte (its first header, or its size).
	Offset int64
	// Lagrangex is the 8-byte lagrangex header (little endian) when Header.Lagrangex, else 0.
	Lagrangex uint64
}

// PBType is the record type the lagrangex header carries in its low byte (the training reader's
// pb_type; 0 without a lagrangex header).
func (f Frame) PBType() uint8 { return uint8(f.Lagrangex) }

// DataSourceKey is the data source the lagrangex header names: its low 32 bits with the type byte
// cleared, as data_reader.h's ReadDataHeader computes it (0 without a lagrangex header).
func (f Frame) DataSourceKey() uint32 { return uint32(f.Lagrangex) >> 8 << 8 }

// FallbackSize is the record size the training reader refuses (data_reader.h: "DEADBEEF value
// found"): a writer's FALLBACK_RESERVE_VALUE left in place of a real size.
const FallbackSize = 0xfefefefe

// ErrFallbackSize is wrapped by the error for a record whose size is FallbackSize.
var ErrFallbackSize = errors.New("DEADBEEF value found")

// FrameError reports a bad frame and where it starts.
type FrameError struct {
	// Offset is the input offset of the bad frame's first byte.
	Offset int64
	// Err says what is wrong: a truncation (wrapping io.ErrUnexpectedEOF), an implausible size,
	// ErrFallbackSize, or the input's own read error.
	Err error
}

func (e *FrameError) Error() string { return fmt.Sprintf("frame at offset %d: %v", e.Offset, e.Err) }

func (e *FrameError) Unwrap() error { return e.Err }

// FrameReader reads the records of a framed binary dump the way the training reader
// (data_reader.h's BaseStreamReader::ReadPBBytes) does: the headers h describes, a little-endian
// uint64 size, and that many bytes. It reads exactly what each frame holds (never ahead), so give
// it a buffered reader. A FrameReader is not safe for concurrent use.
type FrameReader struct {
	r   io.Reader
	h   Header
	off int64
	err error
}

// NewFrameReader returns a FrameReader of the frames in r, each preceded by the headers h says.
func NewFrameReader(r io.Reader, h Header) *FrameReader {
	return &FrameReader{r: r, h: h}
}

// Offset is the input offset of the next frame.
func (fr *FrameReader) Offset() int64 { return fr.off }

// Next returns the next frame. It returns io.EOF when the input ends exactly before a frame, and
// a *FrameError otherwise; errors are sticky. Unlike ReadRecord it refuses a record size of
// FallbackSize, as the training reader does.
func (fr *FrameReader) Next() (Frame, error) {
	if fr.err != nil {
		return Frame{}, fr.err
	}
	start := fr.off
	cr := countingReader{r: fr.r}
	f, err := readFrame(&cr, fr.h, true)
	fr.off += cr.n
	if err != nil {
		if !errors.Is(err, io.EOF) {
			err = &FrameError{Offset: start, Err: err}
		}
		fr.err = err
		return Frame{}, err
	}
	f.Offset = start
	return f, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// maxFrameSize bounds the sizes a frame may declare; a larger one comes from wrong header flags or
// corrupt data, and must not reach an allocation or an int64 offset.
const maxFrameSize = 1 << 62

// preallocFrame bounds what readFrame allocates before a record's bytes arrive, so that a corrupt
// size cannot make it allocate memory the input does not back.
const preallocFrame = 1 << 20

// readFrame reads one frame from r (see ReadRecord); refuseFallback adds the training reader's
// FallbackSize check. io.EOF means r ended exactly before the frame.
func readFrame(r io.Reader, h Header, refuseFallback bool) (Frame, error) {
	var f Frame
	first := true
	readU64 := func(what string) (uint64, error) {
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if first && errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, truncated(what, err)
		}
		first = false
		return binary.LittleEndian.Uint64(b[:]), nil
	}
	skip := func(what string, n uint64) error {
		if n == 0 {
			return nil
		}
		if n > maxFrameSize {
			return errkind.New(errkind.Value, "record: %s size %d is not plausible", what, n)
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
			return truncated(what, err)
		}
		first = false
		return nil
	}
	if h.Lagrangex {
		v, err := readU64("lagrangex header")
		if err != nil {
			return f, err
		}
		f.Lagrangex = v
	} else {
		var aggregate, size uint64
		var err error
		if h.KafkaDumpPrefix {
			if size, err = readU64("kafka dump prefix"); err != nil {
				return f, err
			}
			if size == 0 {
				if size, err = readU64("kafka dump prefix"); err != nil {
					return f, err
				}
			} else {
				aggregate = size
			}
		}
		if h.HasSortID {
			if aggregate == 0 {
				if size, err = readU64("sort id size"); err != nil {
					return f, err
				}
			}
			if err := skip("sort id", size); err != nil {
				return f, err
			}
		}
		if h.KafkaDump {
			if _, err := readU64("kafka dump header"); err != nil {
				return f, err
			}
		}
	}
	size, err := readU64("record size")
	if err != nil {
		return f, err
	}
	if refuseFallback && size == FallbackSize {
		return f, errkind.Wrap(errkind.Value, fmt.Errorf("record: size %#x: %w", size, ErrFallbackSize))
	}
	if size > maxFrameSize {
		return f, errkind.New(errkind.Value, "record: size %d is not plausible (wrong header flags?)", size)
	}
	// Grow with the data actually read, so a corrupt size cannot make us allocate it up front.
	data := make([]byte, 0, min(size, preallocFrame))
	for uint64(len(data)) < size {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		end := min(uint64(cap(data)), size)
		n, err := io.ReadFull(r, data[len(data):end])
		data = data[:len(data)+n]
		if err != nil {
			return f, truncated(fmt.Sprintf("record of %d bytes (got %d)", size, len(data)), err)
		}
	}
	f.Data = data
	return f, nil
}
