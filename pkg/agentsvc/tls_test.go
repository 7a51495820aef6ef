package agentsvc

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/serving/agent_service"
	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/tlsconfig"
	"github.com/monolith-go/monolith/pkg/tlsconfig/tlstest"
	"google.golang.org/grpc"
)

// TestListenOnWithTLS: ListenOn binds the host it is given (loopback only), and with TLS server
// options the AgentService answers a client with a certificate of the CA and refuses one without.
func TestListenOnWithTLS(t *testing.T) {
	leakcheck.Check(t)
	pki := tlstest.NewPKI(t, "agent")
	cert, key := pki.Issue("agent", 2)
	cliCert, cliKey := pki.Issue("entry", 3)
	opts, err := tlsconfig.Files{Cert: cert, Key: key, CA: pki.CA}.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string][]string{"m:ps_0": {"127.0.0.1:1"}}
	srv, err := ListenOn(NewProviderService(func() map[string][]string { return addrs }, nil, WithLogger(quiet)), "127.0.0.1", 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Stop(time.Second)
	if ip := srv.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf("bound to %v, want loopback", srv.Addr())
	}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port()))
	heartbeat := func(f tlsconfig.Files) error {
		t.Helper()
		o, err := f.DialOption()
		if err != nil {
			t.Fatal(err)
		}
		c, err := Dial(target, ClientOptions{Timeout: 3 * time.Second, DialOptions: []grpc.DialOption{o}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.HeartBeat(context.Background(), pb.ServerType_PS)
		return err
	}
	if err := heartbeat(tlsconfig.Files{CA: pki.CA, Cert: cliCert, Key: cliKey}); err != nil {
		t.Errorf("a client with a certificate of the CA: %v", err)
	}
	if err := heartbeat(tlsconfig.Files{CA: pki.CA}); err == nil {
		t.Error("a client without a certificate got a HeartBeat")
	}
}
