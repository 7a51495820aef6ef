// Package instance reads and converts the request payloads the serving tools send to TF Serving:
// Monolith's Instance and ExampleBatch protos, in the record-framed binary dumps, text protos and
// JSON files of tfs_client.py and utils.py (make_tensor_proto, InstanceFormater).
package instance

import (
	"errors"
	"fmt"
	"io"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Header says which headers precede each record of a binary dump (tfs_client.py's
// --lagrangex_header, --kafka_dump_prefix, --has_sort_id and --kafka_dump flags).
type Header struct {
	// Lagrangex: an 8-byte header (ReadRecord skips it; FrameReader returns it, the record's type
	// and data source key); the other fields are then ignored.
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
	f, err := readFrame(r, h, false)
	return f.Data, err
}

func truncated(what string, err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return errkind.Wrap(errkind.Value, fmt.Errorf("record: truncated %s: %w", what, err))
}
