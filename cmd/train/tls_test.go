package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// TestClusterTLS: parameter servers serving mutual TLS (cmd/ps --tls_*) and workers with a
// certificate of the same CA (--tls_*) train a job; a worker without a certificate is refused by
// the servers and fails naming them, not training on.
func TestClusterTLS(t *testing.T) {
	leakcheck.Check(t)
	zk := zktest.Start(t)
	pki := tlstest.NewPKI(t, "job")
	psCert, psKey := pki.Issue("ps", 2)
	wCert, wKey := pki.Issue("worker", 3)
	short := []string{"--demo_examples=2000", "--epochs=1"}
	c := cluster{t: t, zk: zk.Addr(), job: "tls", modelDir: filepath.Join(t.TempDir(), "m"), psTimeout: 10 * time.Second,
		psArgs: []string{"--tls_cert=" + psCert, "--tls_key=" + psKey, "--tls_ca=" + pki.CA},
		args:   append([]string{"--tls_cert=" + wCert, "--tls_key=" + wKey, "--tls_ca=" + pki.CA}, short...)}
	chief := c.run()
	if !strings.Contains(chief.stdout.String(), "eval auc=") {
		t.Errorf("the chief did not evaluate:\n%s", chief.stdout.String())
	}

	// Without a client certificate: refused.
	bad := c
	bad.job, bad.modelDir = "tls-refused", filepath.Join(t.TempDir(), "m2")
	bad.args = append([]string{"--tls_ca=" + pki.CA, "--discovery_timeout=20s"}, short...)
	servers := []*proc{bad.startPS(0), bad.startPS(1)}
	w := bad.startWorker(0)
	if code := w.wait(t, 2*time.Minute); code == 0 {
		t.Fatalf("a worker without a certificate trained; stdout:\n%s", w.stdout.String())
	}
	t.Logf("the worker without a certificate: %v", w.errorLines())
	// The server ends the handshake; the client reads its alert ("tls: certificate required")
	// or, when the close comes first, a broken connection.
	stderr := w.stderr.String()
	refused := false
	for _, why := range []string{"tls: certificate required", "broken pipe", "connection reset", "EOF"} {
		refused = refused || strings.Contains(stderr, why)
	}
	if !strings.Contains(stderr, "parameter server health: ps ") || !refused {
		t.Errorf("the failure does not say the parameter servers refused the worker:\n%s", w.tail())
	}
	for _, s := range servers {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.wait(t, time.Minute)
	}
}
