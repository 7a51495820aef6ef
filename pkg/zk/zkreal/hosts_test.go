package zkreal

import (
	"context"
	"fmt"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestParseHosts(t *testing.T) {
	for _, tc := range []struct {
		in, hosts, chroot string
		err               bool
	}{
		{"127.0.0.1:2181", "[127.0.0.1:2181]", "", false},
		{" a:1, b:2 ,c:3/monolith/zk ", "[a:1 b:2 c:3]", "/monolith/zk", false},
		{"[::1]:2181", "[[::1]:2181]", "", false},
		{"[::1]:2181/", "[[::1]:2181]", "", false},
		{"a:1,,b:2", "", "", true},
		{"a:1, ,b:2", "", "", true},
		{"/chroot", "", "", true},
		{"", "", "", true},
	} {
		hosts, chroot, err := ParseHosts(tc.in)
		if tc.err {
			if err == nil || errkind.Of(err) != errkind.Value {
				t.Errorf("ParseHosts(%q): error %v, want a Value error", tc.in, err)
			}
			continue
		}
		if err != nil || fmt.Sprint(hosts) != tc.hosts || chroot != tc.chroot {
			t.Errorf("ParseHosts(%q) = %v %q %v, want %s %q", tc.in, hosts, chroot, err, tc.hosts, tc.chroot)
		}
	}
}

func TestConnectHostsBadHosts(t *testing.T) {
	if _, err := ConnectHosts(context.Background(), "a:1,,b:2", Options{}); err == nil || errkind.Of(err) != errkind.Value {
		t.Fatalf("ConnectHosts with an empty host: %v, want a Value error", err)
	}
}
