package backend

import (
	"fmt"

	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

// startServer starts a real single-node ZooKeeper for one case (Debian's zookeeper package, as
// pkg/zk/zktest runs it for tests) and returns it with the function that stops it and removes
// its directory.
func startServer(opts ...zktest.Option) (*zktest.Server, func(), error) {
	srv, err := zktest.Launch(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("real ZooKeeper: %w", err)
	}
	return srv, srv.Close, nil
}
