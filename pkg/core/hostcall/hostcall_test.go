package hostcall

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/core/tensor"
	"github.com/monolith-go/monolith/pkg/errkind"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestRecordSummaryTensor(t *testing.T) {
	h := New("/out", true, 42, quiet)
	if err := h.RecordSummaryTensor("loss_avg", tensor.Scalar[float32](0.5)); err != nil {
		t.Fatal(err)
	}
	if err := h.RecordSummaryTensor("labels", tensor.Vector[float32](1, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := h.Names(); !reflect.DeepEqual(got, []string{"global_step", "loss_avg", "labels"}) {
		t.Fatalf("names %v", got)
	}
	ts := h.Tensors()
	if !reflect.DeepEqual(ts[0], tensor.Tensor(tensor.Vector[int64](42))) || !reflect.DeepEqual(ts[1].Shape(), []int{1}) {
		t.Fatalf("tensors %v", ts)
	}
	for _, c := range []struct {
		name, tname string
		t           tensor.Tensor
		kind        errkind.Kind
		msg         string
	}{
		{"duplicate", "labels", tensor.Vector[float32](1), errkind.Precondition, `"labels" is already recorded`},
		{"global step name", "global_step", tensor.Vector[int64](1), errkind.Precondition, "already recorded"},
		{"rank 2", "m", mustNew(t, []int32{1, 2, 3, 4}, 2, 2), errkind.Precondition, "Now we only support tensor with shape (k, ) or ()but we met tensor with shape: (2, 2)"},
		{"nil", "n", nil, errkind.Value, "nil tensor"},
	} {
		err := h.RecordSummaryTensor(c.tname, c.t)
		if errkind.Of(err) != c.kind || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if len(h.Names()) != 3 {
		t.Errorf("a failed record changed the names: %v", h.Names())
	}

	if New("", true, 0, nil) == nil {
		t.Fatal("default logger")
	}
	off := New("/out", false, 1, quiet)
	if err := off.RecordSummaryTensor("x", mustNew(t, []int32{1, 2, 3, 4}, 2, 2)); err != nil {
		t.Fatalf("disabled host call: %v", err)
	}
	if len(off.Names()) != 1 || off.Enabled() || off.OutputDir() != "/out" {
		t.Errorf("disabled host call recorded: %v", off.Names())
	}
}

func mustNew[T tensor.Elem](t *testing.T, data []T, shape ...int) *tensor.Dense[T] {
	t.Helper()
	d, err := tensor.New(data, shape)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// core records one core's tensors: int64 global step, float32 and int32 metrics interleaved.
func core(t *testing.T, gs int64, base float32) *HostCall {
	t.Helper()
	h := New("", true, gs, quiet)
	for _, r := range []struct {
		name string
		t    tensor.Tensor
	}{
		{"loss_avg", tensor.Scalar(base)},
		{"uid_bucket", tensor.Vector[int32](int32(base), 7)},
		{"labels", tensor.Vector(base, base+1, base+2)},
		{"req_time", tensor.Vector(gs * 10)},
		{"stopping_signals", tensor.Vector(base > 1)},
	} {
		if err := h.RecordSummaryTensor(r.name, r.t); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestCompressDecompress(t *testing.T) {
	c0, c1 := core(t, 5, 1), core(t, 5, 2)
	for _, c := range []*HostCall{c0, c1} {
		if c.Compressed() {
			t.Fatal("compressed before CompressTensors")
		}
		if err := c.CompressTensors(); err != nil {
			t.Fatal(err)
		}
		if !c.Compressed() {
			t.Fatal("not compressed after CompressTensors")
		}
	}
	// Groups by dtype in order of first appearance: int64 (global_step, req_time), float32,
	// int32, bool.
	if got := c0.Names(); !reflect.DeepEqual(got, []string{"global_step", "req_time", "loss_avg", "labels", "uid_bucket", "stopping_signals"}) {
		t.Fatalf("compressed names %v", got)
	}
	if got := c0.TensorSizes(); !reflect.DeepEqual(got, [][]int{{1, 1}, {1, 3}, {2}, {1}}) {
		t.Fatalf("sizes %v", got)
	}
	ts := c0.Tensors()
	if len(ts) != 4 || !reflect.DeepEqual(ts[1].Shape(), []int{1, 4}) || !reflect.DeepEqual(ts[0].(*tensor.Dense[int64]).Data(), []int64{5, 50}) {
		t.Fatalf("compressed %v", ts)
	}
	args, err := ConcatCores([][]tensor.Tensor{c0.Tensors(), c1.Tensors()})
	if err != nil {
		t.Fatal(err)
	}
	gs, out, err := c0.DecompressTensors(args)
	if err != nil {
		t.Fatal(err)
	}
	if gs != 5 {
		t.Errorf("global step %d", gs)
	}
	want := []tensor.Tensor{
		tensor.Vector[int64](5, 5),
		tensor.Vector[int64](50, 50),
		tensor.Vector[float32](1, 2),
		mustNew(t, []float32{1, 2, 3, 2, 3, 4}, 2, 3),
		mustNew(t, []int32{1, 7, 2, 7}, 2, 2),
		tensor.Vector(false, true),
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("decompressed\n%v\nwant\n%v", out, want)
	}
	if err := c0.CompressTensors(); errkind.Of(err) != errkind.Precondition {
		t.Errorf("second compress: %v", err)
	}
	if err := c0.RecordSummaryTensor("late", tensor.Scalar[int32](1)); errkind.Of(err) != errkind.Precondition {
		t.Errorf("record after compress: %v", err)
	}
}

// With one core, tf.squeeze leaves scalars; the global step is still read.
func TestDecompressSingleCore(t *testing.T) {
	h := New("", true, 9, quiet)
	_ = h.RecordSummaryTensor("x_avg", tensor.Scalar[float32](2))
	if err := h.CompressTensors(); err != nil {
		t.Fatal(err)
	}
	gs, out, err := h.DecompressTensors(h.Tensors())
	if err != nil || gs != 9 || out[0].Rank() != 0 || out[1].Rank() != 0 {
		t.Fatalf("gs %d out %v err %v", gs, out, err)
	}
}

func TestDecompressErrors(t *testing.T) {
	h := New("", true, 1, quiet)
	if _, _, err := h.DecompressTensors(nil); errkind.Of(err) != errkind.Precondition {
		t.Errorf("before compress: %v", err)
	}
	_ = h.RecordSummaryTensor("a", tensor.Vector[float32](1, 2))
	if err := h.CompressTensors(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []tensor.Tensor
		kind errkind.Kind
		msg  string
	}{
		{"rank 1", []tensor.Tensor{tensor.Vector[int64](1)}, errkind.Precondition, "Compressed tensors shape must be (n, m), met shape: (1,)"},
		{"too many", []tensor.Tensor{mustNew(t, []int64{1}, 1, 1), mustNew(t, []float32{1, 2}, 1, 2), mustNew(t, []float32{1}, 1, 1)}, errkind.Value, "3 compressed tensors, 2 were compressed"},
		{"bad width", []tensor.Tensor{mustNew(t, []int64{1, 2}, 1, 2)}, errkind.Value, "split sizes"},
		{"global step dtype", []tensor.Tensor{mustNew(t, []float32{1}, 1, 1)}, errkind.Type, "global step"},
		{"nil", []tensor.Tensor{nil}, errkind.Precondition, "met shape: None"},
	} {
		_, _, err := h.DecompressTensors(c.args)
		if errkind.Of(err) != c.kind || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestConcatCoresErrors(t *testing.T) {
	if _, err := ConcatCores(nil); errkind.Of(err) != errkind.Value {
		t.Errorf("no cores: %v", err)
	}
	a := []tensor.Tensor{mustNew(t, []int64{1}, 1, 1)}
	if _, err := ConcatCores([][]tensor.Tensor{a, {}}); errkind.Of(err) != errkind.Value {
		t.Errorf("layouts differ: %v", err)
	}
	if _, err := ConcatCores([][]tensor.Tensor{a, {mustNew(t, []int64{1, 2}, 1, 2)}}); errkind.Of(err) != errkind.Value {
		t.Errorf("widths differ: %v", err)
	}
}
