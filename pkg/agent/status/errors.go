package agentstatus

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultRecentErrors is how many records an ErrorRing keeps by default.
const DefaultRecentErrors = 20

// Bounds of one record's text in the ring, so a huge value (a whole layout in an error) cannot
// make the status page megabytes long.
const (
	maxRecordMessage = 1 << 10
	maxRecordAttrs   = 4 << 10
)

// LogRecord is one WARN or ERROR record of the agent's log.
type LogRecord struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"msg"`
	// Attrs are the record's attributes (those of the logger's With included) as the text
	// handler writes them: key=value ..., groups as prefixes.
	Attrs string `json:"attrs,omitempty"`
}

// ErrorRing keeps the newest WARN and ERROR records of a log for the status page. It taps a log
// through Handler, so the code that logs needs no change:
//
//	ring := agentstatus.NewErrorRing(agentstatus.DefaultRecentErrors)
//	log := slog.New(ring.Handler(slog.NewTextHandler(os.Stderr, opts)))
//	... agentstatus.NewHandler(src, metrics, agentstatus.WithRecentErrors(ring))
type ErrorRing struct {
	mu    sync.Mutex
	recs  []LogRecord // a ring: the oldest at next once full
	next  int
	total uint64
	fmt   bytes.Buffer // what formatters write into, under mu
	root  slog.Handler // formats a record's attributes into fmt
}

// NewErrorRing keeps the newest size records (DefaultRecentErrors when size <= 0).
func NewErrorRing(size int) *ErrorRing {
	if size <= 0 {
		size = DefaultRecentErrors
	}
	r := &ErrorRing{recs: make([]LogRecord, 0, size)}
	r.root = slog.NewTextHandler(&r.fmt, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.TimeKey, slog.LevelKey, slog.MessageKey: // kept as fields of LogRecord
					return slog.Attr{}
				}
			}
			return a
		},
	})
	return r
}

// Handler returns a handler that passes every record to next as it is, and keeps a copy of
// those at WARN and above, whatever next's level.
func (r *ErrorRing) Handler(next slog.Handler) slog.Handler {
	return &ringHandler{ring: r, next: next, format: r.root}
}

// Records returns the kept records, oldest first (none for a nil ring).
func (r *ErrorRing) Records() []LogRecord {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LogRecord, 0, len(r.recs))
	out = append(out, r.recs[r.next:]...)
	return append(out, r.recs[:r.next]...)
}

// Total is how many records were kept since the ring was made (older ones have been dropped).
func (r *ErrorRing) Total() uint64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

func (r *ErrorRing) add(ctx context.Context, format slog.Handler, rec slog.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fmt.Reset()
	// The text handler only fails when its writer does; a bytes.Buffer does not.
	_ = format.Handle(ctx, rec)
	lr := LogRecord{Time: rec.Time, Level: rec.Level.String(), Message: truncate(rec.Message, maxRecordMessage),
		Attrs: truncate(strings.TrimSpace(r.fmt.String()), maxRecordAttrs)}
	r.total++
	if len(r.recs) < cap(r.recs) {
		r.recs = append(r.recs, lr)
		return
	}
	r.recs[r.next] = lr
	r.next = (r.next + 1) % len(r.recs)
}

// truncate cuts s to at most n bytes (on a rune boundary) and says how much it left out.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " more bytes)"
}

type ringHandler struct {
	ring   *ErrorRing
	next   slog.Handler
	format slog.Handler // the ring's formatter with this handler's attributes and groups
}

func (h *ringHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *ringHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		h.ring.add(ctx, h.format, rec)
	}
	if !h.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.next.Handle(ctx, rec)
}

func (h *ringHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &ringHandler{ring: h.ring, next: h.next.WithAttrs(as), format: h.format.WithAttrs(as)}
}

func (h *ringHandler) WithGroup(name string) slog.Handler {
	return &ringHandler{ring: h.ring, next: h.next.WithGroup(name), format: h.format.WithGroup(name)}
}
