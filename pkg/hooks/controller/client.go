package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/monolith-go/monolith/gen/pb/monolith/native_training/hooks/server"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// ReadAddr reads the controller's address from <modelDir>/ServerAddrFilename (kind NotFound when
// the file does not exist: no controller has started for this model dir).
func ReadAddr(modelDir string) (string, error) {
	path := filepath.Join(modelDir, ServerAddrFilename)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errkind.Wrap(errkind.NotFound, fmt.Errorf("controller: no server address: %w", err))
	}
	if err != nil {
		return "", fmt.Errorf("controller: read server address: %w", err)
	}
	// The reference writes the bare address; tolerate a trailing newline from other writers.
	addr := strings.TrimSpace(string(b))
	if addr == "" {
		return "", errkind.New(errkind.Value, "controller: %s is empty", path)
	}
	return addr, nil
}

// Client is a Controller client over its own connection.
type Client struct {
	pb.ControllerClient
	// Addr is the server address the client talks to.
	Addr string
	conn *grpc.ClientConn
}

// DialModelDir returns a client of the controller whose address is in modelDir (the reference's
// client_lib.get_stub_from_model_dir). The connection is insecure, as in the reference, and is
// made lazily: errors show on the first call, which should carry a deadline. opts are added to
// the dial options.
func DialModelDir(modelDir string, opts ...grpc.DialOption) (*Client, error) {
	addr, err := ReadAddr(modelDir)
	if err != nil {
		return nil, err
	}
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("controller: connect to %s: %w", addr, err)
	}
	return &Client{ControllerClient: pb.NewControllerClient(conn), Addr: addr, conn: conn}, nil
}

// Close closes the client's connection.
func (c *Client) Close() error { return c.conn.Close() }
