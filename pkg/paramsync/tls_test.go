package paramsync

import (
	"net"
	"testing"

	"google.golang.org/grpc"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
)

// TestPushOverMutualTLS: a pusher with the CA and a client certificate pushes to a target that
// requires mutual TLS; one without a certificate, or in plaintext, is refused and pushes nothing.
func TestPushOverMutualTLS(t *testing.T) {
	leakcheck.Check(t)
	ctx := tctx(t)
	pki := tlstest.NewPKI(t, "sync")
	srvCert, srvKey := pki.Issue("target", 2)
	cliCert, cliKey := pki.Issue("pusher", 3)
	opts, err := tlsconfig.Files{Cert: srvCert, Key: srvKey, CA: pki.CA}.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTarget{addr: lis.Addr().String(), gs: grpc.NewServer(opts...), got: map[string]map[int64][]float32{}, models: map[string]bool{}, arrived: make(chan struct{}, 1)}
	servingapis.RegisterPredictionServiceServer(f.gs, f)
	go f.gs.Serve(lis)
	t.Cleanup(f.gs.Stop)

	for _, tc := range []struct {
		name  string
		files tlsconfig.Files
		ok    bool
	}{
		{"without a client certificate", tlsconfig.Files{CA: pki.CA}, false},
		{"plaintext", tlsconfig.Files{}, false},
		{"mutual TLS", tlsconfig.Files{CA: pki.CA, Cert: cliCert, Key: cliKey}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			creds, err := tc.files.ClientCredentials()
			if err != nil {
				t.Fatal(err)
			}
			src := newSource(t, map[string]int{"a": 2})
			src.add(t, "a", ids(0, 5), 1)
			p := newPusher(t, Config{Source: src, Targets: StaticTargets{f.addr}, Retries: -1, Credentials: creds})
			res, err := p.PushOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Targets[0].IDs; (got == 5) != tc.ok || (res.Targets[0].Err == nil) != tc.ok {
				t.Errorf("target took %d ids (err %v); want a push %v", got, res.Targets[0].Err, tc.ok)
			}
		})
	}
}
