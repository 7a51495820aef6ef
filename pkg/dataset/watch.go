package dataset

import (
	"context"
	"io"
	"time"
)

// DefaultPoll is how often a Watcher matches its patterns while it waits for a new file.
const DefaultPoll = time.Second

// WatchOptions say when a Watcher looks for files and when its input ends.
type WatchOptions struct {
	// Poll is the time between two matches of the patterns while waiting for a new file; 0
	// means DefaultPoll.
	Poll time.Duration
	// Idle ends the input: a NextFile that has waited Idle without a new file appearing returns
	// io.EOF. 0 means no idle end: wait until Stop is closed or the context ends.
	Idle time.Duration
	// Stop, when closed, ends the input after one last match: the files found by then are still
	// returned, then io.EOF.
	Stop <-chan struct{}
}

// Watcher is a FileSource that picks up files while they are read: the reference's
// DynamicMatchingFilesDataset, which matches each pattern when it gets to it, generalized to
// matching every pattern again until the input ends (WatchOptions). Each file is returned once,
// the files found by one match in sorted order. A file is picked up as soon as it matches, so a
// writer should write it elsewhere (or under a name the patterns do not match) and rename it into
// place when complete; a file read while still being written ends in a truncated record.
type Watcher struct {
	patterns []string
	shard    Shard
	exclude  func(string) bool
	opts     WatchOptions

	seen    map[string]bool
	pending []string
	done    bool
}

// NewWatcher returns a Watcher of the files patterns match (the syntax of Match), keeping those
// shard owns (Shard.OwnsFile) and exclude (when set) does not drop. A bad pattern or a missing
// @ file list is an error now, rather than at the first match.
func NewWatcher(patterns []string, shard Shard, exclude func(string) bool, opts WatchOptions) (*Watcher, error) {
	if err := shard.validate(); err != nil {
		return nil, err
	}
	if _, err := Match(patterns...); err != nil {
		return nil, err
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	return &Watcher{
		patterns: append([]string(nil), patterns...),
		shard:    shard,
		exclude:  exclude,
		opts:     opts,
		seen:     map[string]bool{},
	}, nil
}

// NextFile returns the next new file. When none is waiting it matches the patterns every Poll
// until one appears; it returns io.EOF when Idle passes first or once Stop is closed and the last
// match's files are returned, and ctx's error when ctx ends first.
func (w *Watcher) NextFile(ctx context.Context) (string, error) {
	var idle <-chan time.Time
	if w.opts.Idle > 0 {
		t := time.NewTimer(w.opts.Idle)
		defer t.Stop()
		idle = t.C
	}
	idled := false
	for {
		if len(w.pending) > 0 {
			f := w.pending[0]
			w.pending = w.pending[1:]
			return f, nil
		}
		if w.done {
			return "", io.EOF
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		// Whether Stop was closed before this match decides whether it is the last one.
		stopped := closed(w.opts.Stop)
		if err := w.match(); err != nil {
			return "", err
		}
		if len(w.pending) > 0 {
			// A match after Stop is the last; its files are still returned.
			w.done = stopped
			continue
		}
		if stopped || idled {
			w.done = true
			return "", io.EOF
		}
		poll := time.NewTimer(w.opts.Poll)
		select {
		case <-ctx.Done():
			poll.Stop()
			return "", ctx.Err()
		case <-w.opts.Stop:
		case <-idle:
			idled = true
		case <-poll.C:
		}
		poll.Stop()
	}
}

// match matches the patterns once and queues the new files this worker owns.
func (w *Watcher) match() error {
	files, err := Match(w.patterns...)
	if err != nil {
		return err
	}
	for _, f := range files {
		if w.seen[f] {
			continue
		}
		w.seen[f] = true
		if (w.exclude == nil || !w.exclude(f)) && w.shard.OwnsFile(f) {
			w.pending = append(w.pending, f)
		}
	}
	return nil
}

// closed reports whether c is closed (a nil channel never is).
func closed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Watch reads the files patterns match as they appear (see Watcher), sharded by opts.Shard's file
// rule for watching and filtered by opts.Exclude.
func Watch(patterns []string, wopts WatchOptions, opts Options) (*Reader, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	w, err := NewWatcher(patterns, opts.Shard, opts.Exclude, wopts)
	if err != nil {
		return nil, err
	}
	return NewReader(w, opts), nil
}
