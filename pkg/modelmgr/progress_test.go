package modelmgr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monolith-go/monolith/internal/syncbuf"
)

// copyRecorder is a Metrics that also observes copies.
type copyRecorder struct {
	mu     sync.Mutex
	copies []string
}

func (r *copyRecorder) EmitCounter(string, int64, map[string]string) {}
func (r *copyRecorder) EmitStore(string, int64, map[string]string)   {}
func (r *copyRecorder) ObserveCopy(model string, n int64, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.copies = append(r.copies, fmt.Sprintf("%s %d %v", model, n, d > 0))
}

// TestCopyProgress: a slow copy logs its progress (bytes copied so far, growing, against the
// total) and, when done, the bytes and duration of the whole copy, which the metrics observe.
func TestCopyProgress(t *testing.T) {
	e := newEnv(t)
	const files, size = 6, 100 << 10
	for i := range files {
		writeFile(t, filepath.Join(e.src, "mdl@7", "mdl", "ps_0", "7", fmt.Sprintf("part-%d", i)), strings.Repeat("x", size))
	}
	writeFile(t, filepath.Join(e.src, "mdl@7"+WriteDone), "")
	var logs syncbuf.Buffer
	rec := &copyRecorder{}
	m := e.manager(t, "mdl", func(c *Config) {
		c.CopyWorkers = 1
		c.ProgressInterval = 5 * time.Millisecond
		c.Metrics = rec
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	m.copyFile = func(ctx context.Context, src, dst string, info fs.FileInfo) error {
		time.Sleep(30 * time.Millisecond) // several progress reports per file
		return copyRegularFile(ctx, src, dst, info)
	}
	if err := m.LoopOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	var progress []int64
	var done map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(logs.String())), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch rec["msg"] {
		case "copying model":
			if rec["total_bytes"] != float64(files*size) {
				t.Errorf("progress total_bytes %v, want %d", rec["total_bytes"], files*size)
			}
			progress = append(progress, int64(rec["copied_bytes"].(float64)))
		case "model copied":
			done = rec
		}
	}
	if len(progress) < 2 {
		t.Fatalf("progress reports %v, want several", progress)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i] < progress[i-1] {
			t.Errorf("copied_bytes went back: %v", progress)
		}
	}
	if progress[len(progress)-1] == 0 || progress[len(progress)-1] > files*size {
		t.Errorf("copied_bytes %v out of range", progress)
	}
	if done == nil || done["bytes"] != float64(files*size) || done["files"] != float64(files) || done["model"] != "mdl" {
		t.Fatalf("final record %v, want bytes %d files %d", done, files*size, files)
	}
	if want := []string{fmt.Sprintf("mdl %d true", files*size)}; fmt.Sprint(rec.copies) != fmt.Sprint(want) {
		t.Errorf("observed copies %v, want %v", rec.copies, want)
	}
}
