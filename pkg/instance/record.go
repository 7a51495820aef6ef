// Package instance reads and converts the request payloads the serving tools send to TF Serving:
// Monolith's Instance and ExampleBatch protos, in the record-framed binary dumps, text protos and
// JSON files of tfs_client.py and utils.py (make_tensor_proto, InstanceFormater).
package instance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Header says which headers precede each record of a binary dump (tfs_client.py's
// --lagrangex_header, --kafka_dump_prefix, --has_sort_id and --kafka_dump flags).
type Header struct {
	// Lagrangex: an 8-byte header, skipped; the other fields are then ignored.
	Lagrangex bool
	// KafkaDumpPrefix: a little-endian uint64 size; when it is 0 a second one follows (the sort
	// id size), otherwise it is the aggregate page sort id size.
	KafkaDumpPrefix bool
	// HasSortID: a sort id of the size read above (or of a little-endian uint64 size read here).
	HasSortID bool
	// KafkaDump: 8 more bytes, skipped.
	KafkaDump bool
}

// ReadRecord reads one record the way tfs_client.read_data does: the headers h describes, a
// little-endian uint64 size, and that many bytes. Unlike the reference (which parses whatever a
// short read returned), a truncated record is an error (wrapping io.ErrUnexpectedEOF); io.EOF
// is returned only when r ends exactly before a record.
func ReadRecord(r io.Reader, h Header) ([]byte, error) {
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
		if n > 1<<62 {
			return errkind.New(errkind.Value, "record: %s size %d is not plausible", what, n)
		}
		m, err := io.CopyN(io.Discard, r, int64(n))
		if err != nil {
			if errors.Is(err, io.EOF) && first && m == 0 {
				return io.EOF
			}
			return truncated(what, err)
		}
		first = false
		return nil
	}
	if h.Lagrangex {
		if err := skip("lagrangex header", 8); err != nil {
			return nil, err
		}
	} else {
		var aggregate, size uint64
		var err error
		if h.KafkaDumpPrefix {
			if size, err = readU64("kafka dump prefix"); err != nil {
				return nil, err
			}
			if size == 0 {
				if size, err = readU64("kafka dump prefix"); err != nil {
					return nil, err
				}
			} else {
				aggregate = size
			}
		}
		if h.HasSortID {
			if aggregate == 0 {
				if size, err = readU64("sort id size"); err != nil {
					return nil, err
				}
			}
			if err := skip("sort id", size); err != nil {
				return nil, err
			}
		}
		if h.KafkaDump {
			if err := skip("kafka dump header", 8); err != nil {
				return nil, err
			}
		}
	}
	size, err := readU64("record size")
	if err != nil {
		return nil, err
	}
	if size > 1<<62 {
		return nil, errkind.New(errkind.Value, "record: size %d is not plausible (wrong header flags?)", size)
	}
	// Grow with the data actually read, so a corrupt size cannot make us allocate it up front.
	var buf bytes.Buffer
	if n, err := io.CopyN(&buf, r, int64(size)); err != nil {
		return nil, truncated(fmt.Sprintf("record of %d bytes (got %d)", size, n), err)
	}
	return buf.Bytes(), nil
}

func truncated(what string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return errkind.Wrap(errkind.Value, fmt.Errorf("record: truncated %s: %w", what, err))
}
