package configpoll

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
)

const (
	confA = "model_config_list { config { name: \"a\" base_path: \"/m/a\" model_platform: \"tensorflow\" } }\n"
	confB = "model_config_list { config { name: \"b\" base_path: \"/m/b\" model_platform: \"tensorflow\" } }\n"
)

func TestPoll(t *testing.T) {
	errReject := errors.New("rejected")
	tests := []struct {
		name      string
		last      []byte
		content   *string // nil: no file
		applyErr  error
		wantModel string // the model apply gets; "" when apply is not called
		wantErr   func(error) bool
		wantLast  []byte
	}{
		{name: "first content is applied", content: ptr(confA), wantModel: "a", wantLast: []byte(confA)},
		{name: "changed content is applied", last: []byte(confA), content: ptr(confB), wantModel: "b", wantLast: []byte(confB)},
		{name: "unchanged content is skipped", last: []byte(confA), content: ptr(confA), wantLast: []byte(confA)},
		{name: "empty file is skipped", last: []byte(confA), content: ptr(""), wantLast: []byte(confA)},
		{name: "blank file is skipped", last: []byte(confA), content: ptr(" \n\t\n"), wantLast: []byte(confA)},
		{name: "empty file with nothing applied is skipped", content: ptr("")},
		{name: "missing file is an error", last: []byte(confA),
			wantErr: func(err error) bool { return errors.Is(err, fs.ErrNotExist) }, wantLast: []byte(confA)},
		{name: "bad text is an error of kind Value", last: []byte(confA), content: ptr("model_config_list {"),
			wantErr: func(err error) bool { return errkind.Of(err) == errkind.Value }, wantLast: []byte(confA)},
		{name: "rejected config is not remembered", last: []byte(confA), content: ptr(confB), applyErr: errReject, wantModel: "b",
			wantErr: func(err error) bool { return errors.Is(err, errReject) }, wantLast: []byte(confA)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := configFile(t, tt.content)
			var got []string
			apply := func(cfg *servingconfig.ModelServerConfig) error {
				for _, mc := range cfg.GetModelConfigList().GetConfig() {
					got = append(got, mc.GetName())
				}
				return tt.applyErr
			}
			logs := &recorder{}
			p := New(file, tt.last, apply, slog.New(logs))
			p.Poll()
			var err error
			if len(logs.records) > 0 {
				r := logs.records[0]
				if r.level != slog.LevelError || r.msg != "poll model config file" || r.attrs["file"] != file || len(logs.records) != 1 {
					t.Errorf("logged %+v, want one error with the file", logs.records)
				}
				err, _ = r.attrs["err"].(error)
			}
			switch {
			case tt.wantErr == nil && len(logs.records) != 0:
				t.Fatalf("Poll logged %+v", logs.records)
			case tt.wantErr != nil && (err == nil || !tt.wantErr(err)):
				t.Fatalf("Poll logged error %v, not the one expected", err)
			}
			var want []string
			if tt.wantModel != "" {
				want = []string{tt.wantModel}
			}
			if len(got) != len(want) || (len(got) == 1 && got[0] != want[0]) {
				t.Errorf("apply got models %q, want %q", got, want)
			}
			if !bytes.Equal(p.last, tt.wantLast) {
				t.Errorf("last applied = %q, want %q", p.last, tt.wantLast)
			}
		})
	}
}

// TestPollRetries checks that a content apply rejected is offered again on the next poll, and
// that one applied is not.
func TestPollRetries(t *testing.T) {
	file := filepath.Join(t.TempDir(), "model.config")
	if err := os.WriteFile(file, []byte(confA), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := 0
	results := []error{errors.New("rejected"), nil, nil}
	p := New(file, nil, func(*servingconfig.ModelServerConfig) error {
		calls++
		return results[calls-1]
	}, nil)
	for i, wantCalls := range []int{1, 2, 2} {
		p.Poll()
		if calls != wantCalls {
			t.Fatalf("after poll %d: apply called %d times, want %d", i+1, calls, wantCalls)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		wantKind errkind.Kind // Unknown: no error
		want     int          // models
	}{
		{"one model", confA, errkind.Unknown, 1},
		{"empty is an empty config", "", errkind.Unknown, 0},
		{"bad text", "model_config_list {", errkind.Value, 0},
		{"unknown field", "no_such_field: 1", errkind.Value, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.text))
			if tt.wantKind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tt.wantKind {
					t.Fatalf("Parse error = %v (kind %v), want kind %v", err, errkind.Of(err), tt.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := len(cfg.GetModelConfigList().GetConfig()); got != tt.want {
				t.Errorf("Parse: %d models, want %d", got, tt.want)
			}
		})
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		content  *string      // nil: no file
		wantKind errkind.Kind // Unknown: no error
		want     int          // models
	}{
		{name: "one model", content: ptr(confA), want: 1},
		{name: "missing file is NotFound", wantKind: errkind.NotFound},
		{name: "bad text is Value", content: ptr("model_config_list {"), wantKind: errkind.Value},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := configFile(t, tt.content)
			cfg, data, err := Read(file)
			if tt.wantKind != errkind.Unknown {
				if err == nil || errkind.Of(err) != tt.wantKind {
					t.Fatalf("Read error = %v (kind %v), want kind %v", err, errkind.Of(err), tt.wantKind)
				}
				if tt.content != nil && !strings.Contains(err.Error(), file) {
					t.Errorf("Read error %q does not name the file %s", err, file)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if got := len(cfg.GetModelConfigList().GetConfig()); got != tt.want {
				t.Errorf("Read: %d models, want %d", got, tt.want)
			}
			if string(data) != *tt.content {
				t.Errorf("Read content = %q, want %q", data, *tt.content)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// configFile is a config file path in a new directory, holding content (nil: no file there).
func configFile(t *testing.T, content *string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "model.config")
	if content != nil {
		if err := os.WriteFile(file, []byte(*content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

// recorder is a slog.Handler that keeps the records it gets.
type recorder struct{ records []record }

type record struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	attrs := map[string]any{}
	rec.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Any()
		return true
	})
	r.records = append(r.records, record{rec.Level, rec.Message, attrs})
	return nil
}
