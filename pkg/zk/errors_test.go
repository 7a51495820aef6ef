package zk

import (
	"errors"
	"fmt"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestErrorKinds(t *testing.T) {
	tests := []struct {
		err  error
		kind errkind.Kind
	}{
		{ErrNoNode, errkind.NotFound},
		{ErrNodeExists, errkind.Runtime},
		{ErrNotEmpty, errkind.Precondition},
		{ErrBadVersion, errkind.Precondition},
		{ErrNoChildrenForEphemerals, errkind.Precondition},
		{ErrSessionExpired, errkind.Runtime},
		{ErrConnectionLoss, errkind.Runtime},
		{ErrClosed, errkind.Runtime},
		{ErrInvalidPath, errkind.Value},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("caller: %w", &PathError{Op: "create", Path: "/a/b", Err: tc.err})
			if !errors.Is(wrapped, tc.err) {
				t.Fatalf("errors.Is(%v, sentinel) = false", wrapped)
			}
			if got := errkind.Of(wrapped); got != tc.kind {
				t.Fatalf("errkind.Of(%v) = %v, want %v", wrapped, got, tc.kind)
			}
			for _, other := range tests {
				if other.err != tc.err && errors.Is(wrapped, other.err) {
					t.Fatalf("%v also matches %v", wrapped, other.err)
				}
			}
		})
	}
}

func TestPathErrorMessage(t *testing.T) {
	err := &PathError{Op: "delete", Path: "/monolith/zk", Err: ErrNotEmpty}
	if got, want := err.Error(), "zk: delete /monolith/zk: node has children"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestEnumStrings(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		EventNone: "NONE", EventCreated: "CREATED", EventDeleted: "DELETED", EventChanged: "CHANGED",
		EventChild: "CHILD", EventType(42): "EventType(42)",
		StateConnected: "CONNECTED", StateSuspended: "SUSPENDED", StateLost: "LOST", State(0): "State(0)",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
