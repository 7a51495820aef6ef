package tlsconfig

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	servingapis "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/apis"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
)

// serve starts a gRPC server (PredictionService, every method unimplemented: a call that reaches
// it answers UNIMPLEMENTED) with f's credentials on loopback.
func serve(t *testing.T, f Files) string {
	t.Helper()
	opts, err := f.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	servingapis.RegisterPredictionServiceServer(s, servingapis.UnimplementedPredictionServiceServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// call calls the server with the client's credentials: nil when the call reached it.
func call(t *testing.T, addr string, opt grpc.DialOption) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = servingapis.NewPredictionServiceClient(cc).GetModelMetadata(ctx, &servingapis.GetModelMetadataRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil
	}
	return err
}

func TestTLS(t *testing.T) {
	leakcheck.Check(t)
	ca := tlstest.NewPKI(t, "ours")
	other := tlstest.NewPKI(t, "theirs")
	srvCert, srvKey := ca.Issue("server", 2)
	cliCert, cliKey := ca.Issue("client", 3)
	strangerCert, strangerKey := other.Issue("stranger", 4)

	tlsAddr := serve(t, Files{Cert: srvCert, Key: srvKey})
	mtlsAddr := serve(t, Files{Cert: srvCert, Key: srvKey, CA: ca.CA})
	plainAddr := serve(t, Files{})
	dial := func(f Files) grpc.DialOption {
		t.Helper()
		o, err := f.DialOption()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		addr   string
		client grpc.DialOption
		ok     bool
	}{
		{"plaintext", plainAddr, dial(Files{}), true},
		{"tls", tlsAddr, dial(Files{CA: ca.CA}), true},
		{"tls: plaintext client", tlsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), false},
		{"tls: server of another CA", tlsAddr, dial(Files{CA: other.CA}), false},
		{"mtls", mtlsAddr, dial(Files{CA: ca.CA, Cert: cliCert, Key: cliKey}), true},
		{"mtls: client without a certificate", mtlsAddr, dial(Files{CA: ca.CA}), false},
		{"mtls: client certificate of another CA", mtlsAddr, dial(Files{CA: ca.CA, Cert: strangerCert, Key: strangerKey}), false},
		{"mtls: plaintext client", mtlsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := call(t, tc.addr, tc.client)
			if (err == nil) != tc.ok {
				t.Errorf("call: %v, want success %v", err, tc.ok)
			}
		})
	}
}

func TestBadFiles(t *testing.T) {
	ca := tlstest.NewPKI(t, "ours")
	cert, key := ca.Issue("server", 2)
	for _, tc := range []struct {
		name   string
		f      Files
		server bool
		want   string
	}{
		{"cert without key", Files{Cert: cert}, true, "--tls_cert and --tls_key: give both or neither"},
		{"ca alone on a server", Files{CA: ca.CA}, true, "--tls_ca without --tls_cert and --tls_key"},
		{"missing ca", Files{Cert: cert, Key: key, CA: "/nonexistent/ca.pem"}, true, "--tls_ca: open /nonexistent/ca.pem"},
		{"ca not pem", Files{CA: key + ".nope", Flag: "--ps_tls"}, false, "--ps_tls_ca: open"},
		{"ca of no certificate", Files{CA: key}, false, "no PEM certificate"},
		{"key of another cert", Files{Cert: ca.CA, Key: key}, true, "--tls_cert " + ca.CA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.server {
				_, err = tc.f.Server()
			} else {
				_, err = tc.f.Client()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
