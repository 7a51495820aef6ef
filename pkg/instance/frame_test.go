package instance

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestFrameReader(t *testing.T) {
	lgx := u64(0x1234_5678_9abc_de07)
	tests := []struct {
		name    string
		h       Header
		input   []byte
		want    []string
		offsets []int64
		lgx     uint64 // of every frame
		errSub  string // "" : the input ends cleanly
		errOff  int64
		errIs   error
	}{
		{name: "empty input", input: nil},
		{name: "plain frames", input: cat(u64(1), []byte("a"), u64(0), u64(2), []byte("bc")), want: []string{"a", "", "bc"}, offsets: []int64{0, 9, 17}},
		{name: "lagrangex header kept", h: Header{Lagrangex: true}, input: cat(lgx, u64(2), []byte("hi"), lgx, u64(1), []byte("!")),
			want: []string{"hi", "!"}, offsets: []int64{0, 18}, lgx: 0x1234_5678_9abc_de07},
		{name: "sort id and kafka dump", h: Header{HasSortID: true, KafkaDump: true}, input: cat(u64(3), []byte("sid"), u64(9), u64(1), []byte("x")),
			want: []string{"x"}, offsets: []int64{0}},
		{name: "kafka prefix is the sort id size", h: Header{KafkaDumpPrefix: true, HasSortID: true}, input: cat(u64(2), []byte("ab"), u64(1), []byte("y")),
			want: []string{"y"}, offsets: []int64{0}},
		{name: "second frame truncated", input: cat(u64(1), []byte("a"), u64(5), []byte("abc")), want: []string{"a"}, offsets: []int64{0},
			errSub: "truncated record of 5 bytes (got 3)", errOff: 9, errIs: io.ErrUnexpectedEOF},
		{name: "partial size", input: cat(u64(1), []byte("a"), []byte{1, 2}), want: []string{"a"}, offsets: []int64{0},
			errSub: "truncated record size", errOff: 9, errIs: io.ErrUnexpectedEOF},
		{name: "truncated sort id", h: Header{HasSortID: true}, input: cat(u64(8), []byte("abc")), errSub: "truncated sort id", errIs: io.ErrUnexpectedEOF},
		{name: "fallback size refused", input: cat(u64(1), []byte("a"), u64(FallbackSize), []byte("more")), want: []string{"a"}, offsets: []int64{0},
			errSub: "DEADBEEF value found", errOff: 9, errIs: ErrFallbackSize},
		{name: "implausible size", h: Header{Lagrangex: true}, input: cat(lgx, u64(1<<63)), errSub: "not plausible"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFrameReader(bytes.NewReader(tc.input), tc.h)
			var got []string
			var offs []int64
			var err error
			for {
				var f Frame
				if f, err = fr.Next(); err != nil {
					break
				}
				got = append(got, string(f.Data))
				offs = append(offs, f.Offset)
				if f.Lagrangex != tc.lgx {
					t.Errorf("frame %d: lagrangex header %#x, want %#x", len(got)-1, f.Lagrangex, tc.lgx)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("frames %q, want %q", got, tc.want)
			}
			if !slices.Equal(offs, tc.offsets) {
				t.Errorf("offsets %v, want %v", offs, tc.offsets)
			}
			if tc.errSub == "" {
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				if fr.Offset() != int64(len(tc.input)) {
					t.Errorf("Offset at the end = %d, want %d", fr.Offset(), len(tc.input))
				}
				return
			}
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Offset != tc.errOff || !strings.Contains(err.Error(), tc.errSub) || errkind.Of(err) != errkind.Value {
				t.Fatalf("err = %v (kind %v), want a *FrameError at offset %d containing %q of kind Value", err, errkind.Of(err), tc.errOff, tc.errSub)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.errIs)
			}
			if _, again := fr.Next(); again != err {
				t.Errorf("second Next = %v, want the same error", again)
			}
		})
	}
}

// ReadRecord (tfs_client.read_data) does not refuse the fallback size; only the training reader
// does.
func TestReadRecordAcceptsFallbackSize(t *testing.T) {
	_, err := ReadRecord(bytes.NewReader(cat(u64(FallbackSize), []byte("short"))), Header{})
	if err == nil || errors.Is(err, ErrFallbackSize) || !strings.Contains(err.Error(), "truncated record") {
		t.Fatalf("err = %v, want a truncation", err)
	}
}

// The reference-written lagrangex dump: its header 0xdeadbeef is type 0xef of data source
// 0xdeadbe00.
func TestFrameReaderReferenceDump(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "example_batch.lagrangex.pb"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr := NewFrameReader(bufio.NewReader(f), Header{Lagrangex: true})
	frame, err := fr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if frame.PBType() != 0xef || frame.DataSourceKey() != 0xdeadbe00 {
		t.Errorf("type %#x, data source %#x; want 0xef, 0xdeadbe00", frame.PBType(), frame.DataSourceKey())
	}
	eb := &examplepb.ExampleBatch{}
	if err := proto.Unmarshal(frame.Data, eb); err != nil || eb.GetBatchSize() == 0 {
		t.Fatalf("parse the record: %v (batch size %d)", err, eb.GetBatchSize())
	}
	if _, err := fr.Next(); err != io.EOF {
		t.Fatalf("second Next = %v, want io.EOF", err)
	}
}
