package zkconformance_test

import (
	"context"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
	"github.com/monolith-go/monolith/pkg/zk/zkconformance"
	"github.com/monolith-go/monolith/pkg/zk/zkfake"
	"github.com/monolith-go/monolith/pkg/zk/zkreal"
	"github.com/monolith-go/monolith/pkg/zk/zktest"
)

func TestFake(t *testing.T) {
	srv := zkfake.NewServer()
	zkconformance.Run(t, zkconformance.Backend{
		Name:   "zkfake",
		Client: func(*testing.T) zk.Client { return srv.Client() },
		Fake:   true,
	})
}

func TestReal(t *testing.T) {
	srv := zktest.Start(t)
	zkconformance.Run(t, zkconformance.Backend{
		Name: "zkreal",
		Client: func(t *testing.T) zk.Client {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := zkreal.Connect(ctx, zkreal.Options{Servers: []string{srv.Addr()}, SessionTimeout: 4 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	})
}
