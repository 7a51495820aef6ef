package trainenv

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/monolith-go/monolith/parity/harness"
)

func TestNoResolve(t *testing.T) {
	if addrs, err := NoResolve(context.Background(), "localhost"); err == nil || addrs != nil {
		t.Fatalf("NoResolve = %v, %v; want an error", addrs, err)
	}
}

func TestCheckPortLoopbackOnly(t *testing.T) {
	for host, wantInputErr := range map[string]bool{"127.0.0.1": false, "10.0.0.1": true, "example.com": true} {
		in := harness.Input{"host": json.RawMessage(`"` + host + `"`), "port": json.RawMessage(`"<port>"`), "timeout": json.RawMessage(`1`)}
		got, err := checkPort(nil, in)
		var ie *harness.InputError
		if errors.As(err, &ie) != wantInputErr {
			t.Errorf("checkPort(%s) = %v, %v; want an input error: %v", host, got, err, wantInputErr)
		}
		if !wantInputErr && got != true {
			t.Errorf("checkPort(%s) = %v, want true for the adapter's own listener", host, got)
		}
	}
}
