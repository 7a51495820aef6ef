package controller

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/hooks/barrier"
	"github.com/monolith-go/monolith/pkg/hooks/runhook"
)

// saver counts saves; block makes TriggerSave wait for its context.
type saver struct {
	saves   atomic.Int64
	err     error
	block   bool
	started chan struct{} // told when a blocking save starts
}

func (s *saver) TriggerSave(ctx context.Context) error {
	if s.block {
		if s.started != nil {
			s.started <- struct{}{}
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if s.err != nil {
		return s.err
	}
	s.saves.Add(1)
	return nil
}

func mustBarrier(t testing.TB, capacity int) *barrier.Barrier {
	t.Helper()
	b, err := barrier.New(capacity)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The reference's server_lib_test.test_basic: a training loop serves the controller; a client
// found through the model dir stops, inspects, resumes, checkpoints and reads the step.
func TestBasic(t *testing.T) {
	leakcheck.Check(t)
	modelDir := filepath.Join(t.TempDir(), "basic")
	b := mustBarrier(t, 1)
	sv := &saver{}
	var step atomic.Int64
	hook, err := NewHook(Config{
		ModelDir:   modelDir,
		Barrier:    b,
		Saver:      sv,
		GlobalStep: func(context.Context) (int64, error) { return step.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	var stub *Client
	err = runhook.Run(context.Background(), []runhook.Hook{hook}, func(_ context.Context, rc *runhook.RunContext) error {
		step.Add(1)
		if rc.Step < 2 {
			return nil
		}
		rc.RequestStop()
		ctx := rpcCtx(t)
		var err error
		if stub, err = DialModelDir(modelDir); err != nil {
			return err
		}
		if _, err := stub.StopTraining(ctx, &pb.StopTrainingRequest{}); err != nil {
			return err
		}
		_, err = stub.StopTraining(ctx, &pb.StopTrainingRequest{})
		if st, _ := status.FromError(err); st.Code() != codes.AlreadyExists || st.Message() != "Barrier is placed already." {
			t.Errorf("second StopTraining = %v, want ALREADY_EXISTS", err)
		}
		resp, err := stub.GetBlockStatus(ctx, &pb.GetBlockStatusRequest{})
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(resp.BlockedIndices, []int32{0}) || len(resp.UnblockedIndices) != 0 {
			t.Errorf("block status %v, want blocked [0]", resp)
		}
		if _, err := stub.ResumeTraining(ctx, &pb.ResumeTrainingRequest{}); err != nil {
			return err
		}
		if resp, err = stub.GetBlockStatus(ctx, &pb.GetBlockStatusRequest{}); err != nil {
			return err
		}
		if len(resp.BlockedIndices) != 0 || !reflect.DeepEqual(resp.UnblockedIndices, []int32{0}) {
			t.Errorf("block status %v, want unblocked [0]", resp)
		}
		if _, err := stub.SaveCheckpoint(ctx, &pb.SaveCheckpointRequest{}); err != nil {
			return err
		}
		ts, err := stub.GetTrainingStatus(ctx, &pb.GetTrainingStatusRequest{})
		if err != nil {
			return err
		}
		if ts.GlobalStep != 3 {
			t.Errorf("global step %d, want 3", ts.GlobalStep)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stub.Close()
	if sv.saves.Load() != 1 {
		t.Errorf("saves = %d, want 1", sv.saves.Load())
	}
	got, err := os.ReadFile(filepath.Join(modelDir, ServerAddrFilename))
	if err != nil || string(got) != hook.Addr() || !strings.Contains(hook.Addr(), ":") {
		t.Errorf("address file %q (%v), hook address %q", got, err, hook.Addr())
	}
	// End stopped the server.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := stub.GetTrainingStatus(ctx, &pb.GetTrainingStatusRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("call after End = %v, want UNAVAILABLE", err)
	}
}

// startHook starts a hook outside a loop and ends it when the test ends.
func startHook(t *testing.T, cfg Config) *Hook {
	t.Helper()
	if cfg.ModelDir == "" {
		cfg.ModelDir = t.TempDir()
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	h, err := NewHook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AfterCreateSession(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.End(context.Background(), nil, nil); err != nil {
			t.Error(err)
		}
	})
	return h
}

func dial(t *testing.T, h *Hook) *Client {
	t.Helper()
	c, err := DialModelDir(h.cfg.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The RPC names are the reference's (service.proto has no package): Python clients call these.
func TestWireMethodNames(t *testing.T) {
	leakcheck.Check(t)
	h := startHook(t, Config{Barrier: mustBarrier(t, 2), Saver: &saver{}, GlobalStep: func(context.Context) (int64, error) { return 7, nil }})
	conn, err := grpc.NewClient(h.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := rpcCtx(t)
	out := &pb.GetTrainingStatusResponse{}
	if err := conn.Invoke(ctx, "/Controller/GetTrainingStatus", &pb.GetTrainingStatusRequest{}, out); err != nil {
		t.Fatal(err)
	}
	if out.GlobalStep != 7 {
		t.Errorf("global step %d, want 7", out.GlobalStep)
	}
	if err := conn.Invoke(ctx, "/Controller/StopTraining", &pb.StopTrainingRequest{}, &pb.StopTrainingResponse{}); err != nil {
		t.Fatal(err)
	}
}

func TestBlockStatusWithWaitingWorker(t *testing.T) {
	leakcheck.Check(t)
	reached := make(chan struct{}, 2)
	b, err := barrier.New(3, func(context.Context, string) error { reached <- struct{}{}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	h := startHook(t, Config{Barrier: b, Saver: &saver{}, GlobalStep: func(context.Context) (int64, error) { return 0, nil }})
	c := dial(t, h)
	ctx := rpcCtx(t)
	if _, err := c.StopTraining(ctx, &pb.StopTrainingRequest{}); err != nil {
		t.Fatal(err)
	}
	<-reached
	done := make(chan error)
	go func() { done <- b.WaitUntilRemoved(ctx, 2) }()
	<-reached
	resp, err := c.GetBlockStatus(ctx, &pb.GetBlockStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resp.BlockedIndices, []int32{0, 2}) || !reflect.DeepEqual(resp.UnblockedIndices, []int32{1}) {
		t.Errorf("block status %v, want blocked [0 2] unblocked [1]", resp)
	}
	if _, err := c.ResumeTraining(ctx, &pb.ResumeTrainingRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// failingBarrier fails Place with a plain error.
type failingBarrier struct{ *barrier.Barrier }

func (failingBarrier) Place(context.Context, string) error { return errors.New("disk on fire") }

func TestServiceErrors(t *testing.T) {
	leakcheck.Check(t)
	boom := errors.New("boom")
	tests := []struct {
		name string
		cfg  Config
		call func(ctx context.Context, c *Client) error
		want codes.Code
	}{
		{
			name: "saver fails",
			cfg:  Config{Saver: &saver{err: boom}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.SaveCheckpoint(ctx, &pb.SaveCheckpointRequest{})
				return err
			},
			want: codes.Internal,
		},
		{
			name: "saver outlives the deadline",
			cfg:  Config{Saver: &saver{block: true}},
			call: func(ctx context.Context, c *Client) error {
				ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				_, err := c.SaveCheckpoint(ctx, &pb.SaveCheckpointRequest{})
				return err
			},
			want: codes.DeadlineExceeded,
		},
		{
			name: "global step fails",
			cfg:  Config{GlobalStep: func(context.Context) (int64, error) { return 0, boom }},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.GetTrainingStatus(ctx, &pb.GetTrainingStatusRequest{})
				return err
			},
			want: codes.Internal,
		},
		{
			name: "barrier fails",
			cfg:  Config{Barrier: failingBarrier{mustBarrier(t, 1)}},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.StopTraining(ctx, &pb.StopTrainingRequest{})
				return err
			},
			want: codes.Internal,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Barrier == nil {
				cfg.Barrier = mustBarrier(t, 1)
			}
			if cfg.Saver == nil {
				cfg.Saver = &saver{}
			}
			if cfg.GlobalStep == nil {
				cfg.GlobalStep = func(context.Context) (int64, error) { return 1, nil }
			}
			c := dial(t, startHook(t, cfg))
			if err := tc.call(rpcCtx(t), c); status.Code(err) != tc.want {
				t.Errorf("error %v, want code %v", err, tc.want)
			}
		})
	}
}

func TestNewHookValidates(t *testing.T) {
	b := mustBarrier(t, 1)
	step := func(context.Context) (int64, error) { return 0, nil }
	for name, cfg := range map[string]Config{
		"no model dir": {Barrier: b, Saver: &saver{}, GlobalStep: step},
		"no barrier":   {ModelDir: "d", Saver: &saver{}, GlobalStep: step},
		"no saver":     {ModelDir: "d", Barrier: b, GlobalStep: step},
		"no step":      {ModelDir: "d", Barrier: b, Saver: &saver{}},
	} {
		if _, err := NewHook(cfg); errkind.Of(err) != errkind.Value {
			t.Errorf("%s: NewHook = %v, want a Value error", name, err)
		}
	}
}

func TestHookLifecycle(t *testing.T) {
	leakcheck.Check(t)
	step := func(context.Context) (int64, error) { return 0, nil }
	t.Run("end before start", func(t *testing.T) {
		h, err := NewHook(Config{ModelDir: t.TempDir(), Barrier: mustBarrier(t, 1), Saver: &saver{}, GlobalStep: step})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.End(context.Background(), nil, errors.New("earlier failure")); err != nil {
			t.Fatal(err)
		}
		if h.Addr() != "" {
			t.Errorf("Addr = %q before start", h.Addr())
		}
	})
	t.Run("start twice", func(t *testing.T) {
		h := startHook(t, Config{Barrier: mustBarrier(t, 1), Saver: &saver{}, GlobalStep: step})
		if err := h.AfterCreateSession(context.Background(), nil); errkind.Of(err) != errkind.Precondition {
			t.Fatalf("second AfterCreateSession = %v, want a Precondition error", err)
		}
	})
	t.Run("nested model dir is created, no temporary file left", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		h := startHook(t, Config{ModelDir: dir, Barrier: mustBarrier(t, 1), Saver: &saver{}, GlobalStep: step})
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != ServerAddrFilename {
			t.Errorf("model dir holds %v, want only %s", entries, ServerAddrFilename)
		}
		if !strings.HasPrefix(h.Addr(), "127.0.0.1:") {
			t.Errorf("Addr = %q", h.Addr())
		}
	})
	t.Run("unwritable model dir stops the server", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := NewHook(Config{ModelDir: file, Host: "127.0.0.1", ListenAddr: "127.0.0.1:0", Barrier: mustBarrier(t, 1), Saver: &saver{}, GlobalStep: step})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AfterCreateSession(context.Background(), nil); err == nil {
			t.Fatal("AfterCreateSession succeeded with a file as model dir")
		}
		if err := h.End(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bad listen address", func(t *testing.T) {
		h, err := NewHook(Config{ModelDir: t.TempDir(), ListenAddr: "not-an-address", Barrier: mustBarrier(t, 1), Saver: &saver{}, GlobalStep: step})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AfterCreateSession(context.Background(), nil); err == nil {
			t.Fatal("AfterCreateSession succeeded with a bad listen address")
		}
	})
}

// End gives in-flight RPCs StopGrace, then cancels them and returns.
func TestEndCancelsSlowRPCAfterGrace(t *testing.T) {
	leakcheck.Check(t)
	const grace = 50 * time.Millisecond
	sv := &saver{block: true, started: make(chan struct{}, 1)}
	h, err := NewHook(Config{
		ModelDir:   t.TempDir(),
		Host:       "127.0.0.1",
		ListenAddr: "127.0.0.1:0",
		Barrier:    mustBarrier(t, 1),
		Saver:      sv,
		GlobalStep: func(context.Context) (int64, error) { return 0, nil },
		StopGrace:  grace,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AfterCreateSession(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	c := dial(t, h)
	rpcDone := make(chan error)
	go func() {
		_, err := c.SaveCheckpoint(rpcCtx(t), &pb.SaveCheckpointRequest{})
		rpcDone <- err
	}()
	<-sv.started
	start := time.Now()
	if err := h.End(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < grace {
		t.Errorf("End returned after %v with an RPC in flight, want at least the grace period %v", el, grace)
	}
	if code := status.Code(<-rpcDone); code != codes.Unavailable && code != codes.Canceled {
		t.Errorf("in-flight SaveCheckpoint code %v, want UNAVAILABLE or CANCELED", code)
	}
}

func TestReadAddr(t *testing.T) {
	tests := []struct {
		name    string
		content *string
		want    string
		kind    errkind.Kind
	}{
		{name: "as the reference writes it", content: ptr("10.1.2.3:4567"), want: "10.1.2.3:4567"},
		{name: "ipv6", content: ptr("[::1]:4567"), want: "[::1]:4567"},
		{name: "trailing newline", content: ptr("10.1.2.3:4567\n"), want: "10.1.2.3:4567"},
		{name: "missing", kind: errkind.NotFound},
		{name: "empty", content: ptr(""), kind: errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.content != nil {
				if err := os.WriteFile(filepath.Join(dir, ServerAddrFilename), []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadAddr(dir)
			if tc.kind != errkind.Unknown {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("ReadAddr = %q, %v; want kind %v", got, err, tc.kind)
				}
				if _, err := DialModelDir(dir); errkind.Of(err) != tc.kind {
					t.Fatalf("DialModelDir = %v; want kind %v", err, tc.kind)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ReadAddr = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestLocalIP(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	got, err := localIP(context.Background())
	if err != nil {
		t.Fatalf("localIP: %v (host name %q)", err, host)
	}
	addrs, err := net.LookupHost(host)
	if err != nil {
		t.Fatal(err)
	}
	if got != addrs[0] {
		t.Errorf("localIP = %q, want the first address of %q: %v", got, host, addrs)
	}
}

// The messages carry the reference's field numbers: hand-encoded proto3 bytes (repeated int32
// packed, as Python's proto3 encoder writes them).
func TestWireFormat(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want []byte
	}{
		{"GetBlockStatusResponse", &pb.GetBlockStatusResponse{BlockedIndices: []int32{0, 2}, UnblockedIndices: []int32{1}},
			[]byte{0x0a, 0x02, 0x00, 0x02, 0x12, 0x01, 0x01}},
		{"GetTrainingStatusResponse", &pb.GetTrainingStatusResponse{GlobalStep: 300}, []byte{0x08, 0xac, 0x02}},
		{"StopTrainingRequest", &pb.StopTrainingRequest{}, []byte{}},
	}
	for _, tc := range tests {
		got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: % x, %v; want % x", tc.name, got, err, tc.want)
		}
	}
	if sd := pb.File_monolith_native_training_hooks_server_service_proto.Services().Get(0); sd.FullName() != "Controller" {
		t.Errorf("service full name %q, want Controller (no proto package, as the reference)", sd.FullName())
	}
}
