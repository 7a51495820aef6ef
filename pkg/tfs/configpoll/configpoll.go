// Package configpoll re-reads a ModelServerConfig text file (TF Serving's --model_config_file,
// re-read every --model_config_file_poll_wait_seconds; the servers' Options.ConfigPollInterval)
// and hands on its config only when the file changed since the content last applied.
package configpoll

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"google.golang.org/protobuf/encoding/prototext"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Parse parses a ModelServerConfig in text format; a bad one is an error of kind Value.
func Parse(data []byte) (*servingconfig.ModelServerConfig, error) {
	cfg := &servingconfig.ModelServerConfig{}
	if err := prototext.Unmarshal(data, cfg); err != nil {
		return nil, errkind.Wrap(errkind.Value, err)
	}
	return cfg, nil
}

// Read reads and parses the config file a server starts with, returning its content too (a Poller's
// last); a missing file is an error of kind NotFound, a bad one of kind Value, each naming the file.
func Read(file string) (*servingconfig.ModelServerConfig, []byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, errkind.Wrap(errkind.NotFound, fmt.Errorf("model config file: %w", err))
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("model config file %s: %w", file, err)
	}
	return cfg, data, nil
}

// Poller polls one config file, hands each new config to its apply function and remembers the
// content last applied. Polls are serialized.
type Poller struct {
	file  string
	apply func(*servingconfig.ModelServerConfig) error
	log   *slog.Logger

	mu   sync.Mutex
	last []byte
}

// New returns a poller of file that hands each changed config to apply; last is the content
// already applied (nil when none was), log receives the polls' failures (nil discards them).
func New(file string, last []byte, apply func(*servingconfig.ModelServerConfig) error, log *slog.Logger) *Poller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Poller{file: file, apply: apply, log: log, last: last}
}

// Poll reads the file and, when its content is not the one last applied and not blank (a file
// caught between a truncate and a write), parses it and calls apply with it; the content counts
// as applied once apply returns nil. A file that cannot be read or parsed, or whose config apply
// rejects, changes nothing (the next Poll tries it again): it is logged with the file, as TF
// Serving does, and the models stay as they are.
func (p *Poller) Poll() {
	if err := p.poll(); err != nil {
		p.log.Error("poll model config file", "file", p.file, "err", err)
	}
}

func (p *Poller) poll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	data, err := os.ReadFile(p.file)
	if err != nil {
		return err
	}
	if bytes.Equal(data, p.last) || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	cfg, err := Parse(data)
	if err != nil {
		return err
	}
	if err := p.apply(cfg); err != nil {
		return err
	}
	p.last = data
	return nil
}
