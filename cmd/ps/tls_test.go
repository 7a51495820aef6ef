package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/ps"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
)

// TestTLS: with --tls_cert, --tls_key and --tls_ca the parameter server serves mutual TLS: a
// worker with a certificate of the CA reaches it, one without (or in plaintext) is refused; a
// half-given pair is a usage error naming the flags.
func TestTLS(t *testing.T) {
	leakcheck.Check(t)
	pki := tlstest.NewPKI(t, "job")
	cert, key := pki.Issue("ps", 2)
	workerCert, workerKey := pki.Issue("worker", 3)
	s := start(t, []string{"--tls_cert=" + cert, "--tls_key=" + key, "--tls_ca=" + pki.CA, "--status_addr="}, nil)
	addr := s.addr(t)
	health := func(f tlsconfig.Files) error {
		t.Helper()
		var opts []grpc.DialOption
		if f.Enabled() {
			o, err := f.DialOption()
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, o)
		}
		r, err := ps.NewRouter(ps.RouterConfig{Addrs: []string{addr}, CallTimeout: 3 * time.Second, DialOptions: opts})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = r.Health(ctx)
		return err
	}
	if err := health(tlsconfig.Files{CA: pki.CA, Cert: workerCert, Key: workerKey}); err != nil {
		t.Errorf("a worker with a certificate of the CA: %v", err)
	}
	if err := health(tlsconfig.Files{CA: pki.CA}); err == nil {
		t.Error("a worker without a certificate reached the server")
	}
	if err := health(tlsconfig.Files{}); err == nil {
		t.Error("a plaintext worker reached the server")
	}
	if r := s.wait(t); r.code != 0 {
		t.Errorf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	r := runToEnd(t, "--tls_cert="+cert, "--status_addr=")
	if r.code != 2 || !strings.Contains(r.stderr, "--tls_cert and --tls_key: give both or neither") {
		t.Errorf("--tls_cert alone: exit %d, stderr %q", r.code, r.stderr)
	}
}
