package layout

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// TestMain stops a CUDA build of the tests where no device can run them, with one message: every
// comparison with the CUDA engine would fail otherwise, and not run is not passed.
func TestMain(m *testing.M) {
	if CUDAAvailable {
		if n, err := CUDADevices(); err != nil || n == 0 {
			fmt.Fprintf(os.Stderr, "layout tests built with the CUDA kernel, but there is no CUDA device to run it (%d devices: %v)\n", n, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func TestCUDAErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  InputError
		want string
	}{
		{InputError{Code: codeCUDA, A: 100, B: 1, Detail: "cudaErrorNoDevice: no CUDA-capable device is detected"},
			"CUDA error 100 (cudaErrorNoDevice: no CUDA-capable device is detected) while finding a CUDA device"},
		{InputError{Code: codeCUDA, A: 2, B: 3}, "CUDA error 2 while copying the inputs to the device"},
		{InputError{Code: codeCUDA, A: 719, B: 6, Detail: "cudaErrorLaunchFailure: unspecified launch failure"},
			"CUDA error 719 (cudaErrorLaunchFailure: unspecified launch failure) while running the kernel"},
		{InputError{Code: codeCUDA, A: 1, B: 99}, "CUDA error 1 at step 99"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.err, got, tc.want)
		}
	}
	err := engineErr("forward", &InputError{Code: codeCUDA, A: 100, B: 1})
	if errkind.Of(err) != errkind.Runtime || !strings.HasPrefix(err.Error(), "layout forward: CUDA error 100") {
		t.Errorf("engineErr: %v (%v)", err, errkind.Of(err))
	}
}

func TestCUDAKernelTimes(t *testing.T) {
	c := fitPreCase(21, false)
	p := compile(t, c, 1)
	kernel, copied, err := p.CUDAKernelTimes(c.in, 2, 1<<16)
	if !CUDAAvailable {
		if errkind.Of(err) != errkind.Runtime || !strings.Contains(err.Error(), "without the CUDA kernel") {
			t.Fatalf("CUDAKernelTimes without CUDA: %v", err)
		}
		if _, err := CUDADevices(); err == nil {
			t.Fatal("CUDADevices without CUDA: no error")
		}
		return
	}
	if err != nil || kernel < 0 || copied < 0 {
		t.Fatalf("CUDAKernelTimes: %v, %v, %v", kernel, copied, err)
	}
	for _, tc := range []struct {
		iters int
		bytes int64
	}{{0, 1}, {-1, 1}, {1, -1}} {
		if _, _, err := p.CUDAKernelTimes(c.in, tc.iters, tc.bytes); errkind.Of(err) != errkind.Value {
			t.Errorf("CUDAKernelTimes(%d, %d): %v, want a value error", tc.iters, tc.bytes, err)
		}
	}
	if _, _, err := p.CUDAKernelTimes(nil, 1, 1); errkind.Of(err) != errkind.Value {
		t.Errorf("CUDAKernelTimes(nil input): %v", err)
	}
	// An input error is the one forward reports: a fid in a part that does not exist (the first
	// fid that a slice reads).
	bad := *c.in
	bad.FidOffset = append([]uint64(nil), c.in.FidOffset...)
	var want error
	for i := range bad.FidOffset {
		bad.FidOffset[i] = 1000 << 32
		if _, want = p.ForwardWith(CUDA, &bad, nil); want != nil {
			break
		}
		bad.FidOffset[i] = c.in.FidOffset[i]
	}
	_, _, got := p.CUDAKernelTimes(&bad, 1, 1)
	wi, ok1 := AsInputError(want)
	gi, ok2 := AsInputError(got)
	if !ok1 || !ok2 || *wi != *gi || wi.Code != CodeFidPart {
		t.Errorf("CUDAKernelTimes on a bad fid: %v, forward: %v", got, want)
	}
}
