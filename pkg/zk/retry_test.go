package zk

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func TestRetry(t *testing.T) {
	fast := RetryPolicy{MaxTries: 4, Delay: time.Microsecond, MaxDelay: 10 * time.Microsecond}
	other := errors.New("boom")
	tests := []struct {
		name      string
		policy    RetryPolicy
		errs      []error // returned by the successive calls; nil after the list
		wantCalls int
		wantErr   error
	}{
		{"success", fast, nil, 1, nil},
		{"retries connection loss", fast, []error{ErrConnectionLoss, ErrConnectionLoss}, 3, nil},
		{"wrapped connection loss", fast, []error{&PathError{Op: "get", Path: "/a", Err: ErrConnectionLoss}}, 2, nil},
		{"gives up", fast, []error{ErrConnectionLoss, ErrConnectionLoss, ErrConnectionLoss, ErrConnectionLoss, ErrConnectionLoss}, 4, ErrConnectionLoss},
		{"no retry of NoNode", fast, []error{ErrNoNode}, 1, ErrNoNode},
		{"no retry of session expiry", fast, []error{ErrSessionExpired}, 1, ErrSessionExpired},
		{"no retry of other errors", fast, []error{other}, 1, other},
		{"one try", RetryPolicy{MaxTries: 1, Delay: time.Microsecond}, []error{ErrConnectionLoss}, 1, ErrConnectionLoss},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := Retry(context.Background(), tc.policy, func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Retry() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestRetryBackoff(t *testing.T) {
	p, err := RetryPolicy{Delay: time.Second, Backoff: 3, MaxDelay: 5 * time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxTries != DefaultRetryPolicy.MaxTries {
		t.Fatalf("MaxTries = %d, want the default %d", p.MaxTries, DefaultRetryPolicy.MaxTries)
	}
	d := p.Delay
	var got []time.Duration
	for range 4 {
		d = nextDelay(d, p)
		got = append(got, d)
	}
	want := []time.Duration{3 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Retry(ctx, RetryPolicy{MaxTries: 100, Delay: time.Hour}, func(context.Context) error {
		calls++
		cancel()
		return ErrConnectionLoss
	})
	if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, ErrConnectionLoss) {
		t.Fatalf("Retry() = %v after %d calls, want canceled + connection loss after 1", err, calls)
	}
}

func TestRetryBadPolicy(t *testing.T) {
	for _, p := range []RetryPolicy{{MaxTries: -1}, {Delay: -time.Second}, {Backoff: 0.5}, {MaxDelay: -1}} {
		called := false
		err := Retry(context.Background(), p, func(context.Context) error { called = true; return nil })
		if err == nil || called || errkind.Of(err) != errkind.Value {
			t.Errorf("Retry(%+v) = %v (called %v), want a Value error and no call", p, err, called)
		}
	}
}
