package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/internal/syncbuf"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
)

// TestTLS: with --tls_cert, --tls_key and --tls_ca the model server serves mutual TLS: a client
// with a certificate of the CA is served (NOT_FOUND for a model it has not), one without, or in
// plaintext, is refused at the handshake.
func TestTLS(t *testing.T) {
	leakcheck.Check(t)
	pki := tlstest.NewPKI(t, "serving")
	cert, key := pki.Issue("model-server", 2)
	cliCert, cliKey := pki.Issue("pusher", 3)
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	done := make(chan int, 1)
	var out, errb syncbuf.Buffer
	go func() {
		done <- run(ctx, []string{"--host=127.0.0.1", "--port=0", "--status_addr=", "--tls_cert=" + cert, "--tls_key=" + key, "--tls_ca=" + pki.CA},
			&out, &errb, noEnv, func(addr, _ string) { addrs <- addr })
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d; stderr:\n%s", code, errb.String())
		}
	}()
	var addr string
	select {
	case addr = <-addrs:
	case code := <-done:
		done <- code
		t.Fatalf("exit %d before serving; stderr:\n%s", code, errb.String())
	case <-time.After(time.Minute):
		t.Fatal("not serving within a minute")
	}
	call := func(opt grpc.DialOption) error {
		t.Helper()
		cc, err := grpc.NewClient(addr, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, err = servingapis.NewModelServiceClient(cc).GetModelStatus(cctx, &servingapis.GetModelStatusRequest{ModelSpec: &servingapis.ModelSpec{Name: "none"}})
		return err
	}
	mtls, err := tlsconfig.Files{CA: pki.CA, Cert: cliCert, Key: cliKey}.DialOption()
	if err != nil {
		t.Fatal(err)
	}
	if err := call(mtls); status.Code(err) != codes.NotFound {
		t.Errorf("a client with a certificate of the CA: %v, want NOT_FOUND (served)", err)
	}
	noCert, err := tlsconfig.Files{CA: pki.CA}.DialOption()
	if err != nil {
		t.Fatal(err)
	}
	for name, opt := range map[string]grpc.DialOption{"no certificate": noCert, "plaintext": grpc.WithTransportCredentials(insecure.NewCredentials())} {
		if err := call(opt); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want refused (UNAVAILABLE)", name, err)
		}
	}
}
