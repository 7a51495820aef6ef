// Package tlsconfig is the project's optional TLS for its gRPC servers and clients (AgentService,
// model server, parameter servers, parameter sync), from PEM files named by flags (--tls_cert,
// --tls_key, --tls_ca and the clients' matching ones). Plaintext stays the default: with no file
// named, the credentials are insecure ones.
//
//   - server, Cert and Key: TLS; with CA too, mutual TLS: a client must present a certificate the
//     CA signed, else the handshake fails.
//   - client, CA: the server's certificate is verified against it (without: the system's roots);
//     with Cert and Key too, the client presents them (for a mutual-TLS server).
//
// TLS 1.2 at least. A file that is missing or not PEM of the right kind is an error of kind Value
// naming the flag and the file.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// Files are the PEM files of one side; Flag names the flags in errors ("--tls", "--ps_tls").
type Files struct {
	Cert, Key, CA string
	// ServerName is the name a client checks the server's certificate for ("": the host of the
	// address dialled).
	ServerName string
	// Flag is the flags' prefix in errors: Cert is <Flag>_cert, and so on (default "--tls").
	Flag string
}

// Enabled reports whether any file is named (TLS on).
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

func (f Files) flag(name string) string {
	p := f.Flag
	if p == "" {
		p = "--tls"
	}
	return p + "_" + name
}

// pair loads the certificate and key, both or neither.
func (f Files) pair() ([]tls.Certificate, error) {
	switch {
	case f.Cert == "" && f.Key == "":
		return nil, nil
	case f.Cert == "" || f.Key == "":
		return nil, errkind.New(errkind.Value, "%s and %s: give both or neither (got %q and %q)", f.flag("cert"), f.flag("key"), f.Cert, f.Key)
	}
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, errkind.New(errkind.Value, "%s %s, %s %s: %v", f.flag("cert"), f.Cert, f.flag("key"), f.Key, err)
	}
	return []tls.Certificate{c}, nil
}

// pool loads the CA file ("" none).
func (f Files) pool() (*x509.CertPool, error) {
	if f.CA == "" {
		return nil, nil
	}
	data, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, errkind.New(errkind.Value, "%s: %v", f.flag("ca"), err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(data) {
		return nil, errkind.New(errkind.Value, "%s %s: no PEM certificate in it", f.flag("ca"), f.CA)
	}
	return p, nil
}

// Server is the TLS config of a server (nil, nil when no file is named).
func (f Files) Server() (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	if certs == nil {
		return nil, errkind.New(errkind.Value, "%s without %s and %s: a TLS server needs its certificate and key", f.flag("ca"), f.flag("cert"), f.flag("key"))
	}
	pool, err := f.pool()
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12}
	if pool != nil {
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// Client is the TLS config of a client (nil, nil when no file is named).
func (f Files) Client() (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	certs, err := f.pair()
	if err != nil {
		return nil, err
	}
	pool, err := f.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: certs, RootCAs: pool, ServerName: f.ServerName, MinVersion: tls.VersionTLS12}, nil
}

// ServerOption is the gRPC server option of f: TLS credentials, or none (plaintext).
func (f Files) ServerOption() ([]grpc.ServerOption, error) {
	c, err := f.Server()
	if err != nil || c == nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c))}, nil
}

// ClientCredentials are the gRPC transport credentials of f: TLS, or insecure (plaintext).
func (f Files) ClientCredentials() (credentials.TransportCredentials, error) {
	c, err := f.Client()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return insecure.NewCredentials(), nil
	}
	return credentials.NewTLS(c), nil
}

// DialOption is ClientCredentials as a dial option.
func (f Files) DialOption() (grpc.DialOption, error) {
	c, err := f.ClientCredentials()
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return grpc.WithTransportCredentials(c), nil
}
