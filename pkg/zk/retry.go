package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// RetryPolicy bounds Retry. A zero field takes the value of DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxTries is the number of calls in all, the first included.
	MaxTries int
	// Delay is the wait before the second call.
	Delay time.Duration
	// Backoff multiplies the wait after each further failure (at least 1).
	Backoff float64
	// MaxDelay caps the wait.
	MaxDelay time.Duration
}

// DefaultRetryPolicy is kazoo's default command retry (KazooRetry(max_tries=1, delay=0.1,
// backoff=2, max_delay=60)): one retry, so two calls, without kazoo's random jitter.
var DefaultRetryPolicy = RetryPolicy{MaxTries: 2, Delay: 100 * time.Millisecond, Backoff: 2, MaxDelay: 60 * time.Second}

// withDefaults fills zero fields and rejects negative ones.
func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	if p.MaxTries < 0 || p.Delay < 0 || p.MaxDelay < 0 || p.Backoff < 0 || (p.Backoff > 0 && p.Backoff < 1) {
		return p, errkind.New(errkind.Value, "zk: bad retry policy %+v: fields must be >= 0 and Backoff >= 1", p)
	}
	d := DefaultRetryPolicy
	if p.MaxTries == 0 {
		p.MaxTries = d.MaxTries
	}
	if p.Delay == 0 {
		p.Delay = d.Delay
	}
	if p.Backoff == 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = d.MaxDelay
	}
	return p, nil
}

// Retry calls fn until it succeeds, fails with an error that is not ErrConnectionLoss, or
// policy's tries are spent, waiting with exponential backoff between calls (the reference's
// zk.retry). Only ErrConnectionLoss is retried: the other errors say something about the
// data, and ErrSessionExpired needs the caller to rebuild its ephemeral state. When the tries
// are spent the last error is returned, wrapped; when ctx ends while waiting, the last error
// and ctx's error are both in the chain.
func Retry(ctx context.Context, policy RetryPolicy, fn func(ctx context.Context) error) error {
	p, err := policy.withDefaults()
	if err != nil {
		return err
	}
	delay := min(p.Delay, p.MaxDelay)
	for try := 1; ; try++ {
		err := fn(ctx)
		if err == nil || !errors.Is(err, ErrConnectionLoss) {
			return err
		}
		if try >= p.MaxTries {
			return fmt.Errorf("zk: gave up after %d tries: %w", try, err)
		}
		if werr := sleep(ctx, delay); werr != nil {
			return fmt.Errorf("zk: retry stopped after %d tries: %w (%w)", try, err, werr)
		}
		delay = nextDelay(delay, p)
	}
}

func nextDelay(d time.Duration, p RetryPolicy) time.Duration {
	next := time.Duration(float64(d) * p.Backoff)
	if next > p.MaxDelay || next < 0 { // < 0: float overflow
		return p.MaxDelay
	}
	return next
}

// sleep waits d or until ctx ends, whichever is first, and leaves no timer behind.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
