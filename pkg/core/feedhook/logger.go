package feedhook

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// PeriodicLogger logs a message only when more than an interval has passed since the last
// message it logged; the first message is always logged.
type PeriodicLogger struct {
	every time.Duration
	log   *slog.Logger
	now   func() time.Time

	mu   sync.Mutex
	last time.Time
}

// NewPeriodicLogger returns a logger for the interval. Nil log means slog.Default(); nil now
// means time.Now.
func NewPeriodicLogger(every time.Duration, log *slog.Logger, now func() time.Time) *PeriodicLogger {
	if log == nil {
		log = slog.Default()
	}
	if now == nil {
		now = time.Now
	}
	return &PeriodicLogger{every: every, log: log, now: now}
}

// Log logs the message (printf-formatted, as the reference's msg % args) at info level when the
// interval has passed, and says whether it did.
func (p *PeriodicLogger) Log(format string, args ...any) bool {
	p.mu.Lock()
	now := p.now()
	due := p.last.IsZero() || now.Sub(p.last) > p.every
	if due {
		p.last = now
	}
	p.mu.Unlock()
	if due {
		p.log.Info(fmt.Sprintf(format, args...))
	}
	return due
}
