package embeddingtask

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pyfmt"
	"github.com/monolith-go/monolith/pkg/pyint"
	"github.com/monolith-go/monolith/pkg/pystr"
)

// ParseVocabSizes reads a vocab size file (_create_vocab_dict): one "slot<TAB>count" per line,
// lines whose slot is not all digits (a header) skipped. Every line, after stripping surrounding
// whitespace, must have exactly two tab-separated fields (a blank line is an error, as in the
// reference). vocab_size_per_slot replaces every count; otherwise custom_vocab_size_mapping
// replaces the counts of its slots; vocab_size_offset is then added. A later line for the same
// slot wins.
func ParseVocabSizes(r io.Reader, p Params) (map[int]int, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read vocab sizes: %w", err)
	}
	if !utf8.Valid(data) {
		return nil, errkind.New(errkind.Value, "vocab sizes: not UTF-8 text")
	}
	// Universal newlines, as Python's text mode reads.
	text := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
	lines := strings.SplitAfter(text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	sizes := map[int]int{}
	for _, line := range lines {
		fields := strings.Split(pystr.Strip(line), "\t")
		if len(fields) != 2 {
			return nil, errkind.New(errkind.Precondition, "each line in %s must have 2 fields", pyfmt.Repr(fields))
		}
		if !isASCIIDigits(fields[0]) {
			continue
		}
		slot, err := pyint.Atoi(fields[0])
		if err != nil {
			return nil, errkind.Wrap(errkind.Value, fmt.Errorf("vocab sizes: slot: %w", err))
		}
		var count int
		if p.VocabSizePerSlot != nil {
			count = *p.VocabSizePerSlot
		} else {
			if count, err = pyint.Atoi(fields[1]); err != nil {
				return nil, errkind.Wrap(errkind.Value, fmt.Errorf("vocab sizes: slot %d: %w", slot, err))
			}
			if c, ok := p.CustomVocabSizeMapping[slot]; ok {
				count = c
			}
		}
		if p.VocabSizeOffset != nil {
			count += *p.VocabSizeOffset
		}
		sizes[slot] = count
	}
	return sizes, nil
}

// Downloader fetches the vocab size file of a date.
type Downloader interface {
	// Download fetches "<prefix><endDate>/part*.csv" and returns the local path of the one file
	// found; anything else (a failed copy, no file, several files) is an error.
	Download(ctx context.Context, prefix, endDate string) (string, error)
}

// HDFSDownloader runs `hadoop fs -copyToLocal` (download_vocab_size_file_from_hdfs).
type HDFSDownloader struct {
	// Hadoop is the hadoop command; empty means "hadoop" from PATH.
	Hadoop string
	// Dir is where a fresh download directory is made; empty means the system temp directory.
	Dir string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Download copies the files into a new directory under Dir (never reusing or deleting an
// existing one) and returns the path of the single file copied. The glob is expanded by hadoop,
// not by a shell.
func (d HDFSDownloader) Download(ctx context.Context, prefix, endDate string) (string, error) {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	hadoop := d.Hadoop
	if hadoop == "" {
		hadoop = "hadoop"
	}
	dir, err := os.MkdirTemp(d.Dir, "vocab-size-")
	if err != nil {
		return "", fmt.Errorf("vocab size download: %w", err)
	}
	src := fmt.Sprintf("%s%s/part*.csv", prefix, endDate)
	cmd := exec.CommandContext(ctx, hadoop, "fs", "-copyToLocal", src, dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	log.Info(fmt.Sprintf("Hdfs path prefix: %s, end_date: %s, download vocab size file from hdfs cmd: %s", prefix, endDate, strings.Join(cmd.Args, " ")))
	runErr := cmd.Run()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("vocab size download: %w", err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	if runErr != nil || len(names) != 1 {
		_ = os.RemoveAll(dir)
		if runErr != nil {
			return "", errkind.New(errkind.Runtime, "vocab size download of %s: %w: %s", src, runErr, strings.TrimSpace(out.String()))
		}
		return "", errkind.New(errkind.NotFound, "vocab size download of %s: want one file, got %s", src, pyfmt.Repr(names))
	}
	path := filepath.Join(dir, names[0])
	log.Info(fmt.Sprintf("Download vocab size file successfully from hdfs: %s, use downloaded vocab size file: %s.", src, path))
	return path, nil
}

// CreateVocabDict is _create_vocab_dict: when train.end_date and train.vocab_file_folder_prefix
// are set, the day's file is downloaded first and, on success, replaces p.VocabFilePath (on
// failure the configured path stays, as in the reference); then the file is parsed. A nil
// downloader means HDFSDownloader{}.
func CreateVocabDict(ctx context.Context, p *Params, dl Downloader, log *slog.Logger) (map[int]int, error) {
	if log == nil {
		log = slog.Default()
	}
	if p.Train.EndDate != nil && p.Train.VocabFileFolderPrefix != nil {
		if dl == nil {
			dl = HDFSDownloader{Logger: log}
		}
		path, err := dl.Download(ctx, *p.Train.VocabFileFolderPrefix, *p.Train.EndDate)
		if err != nil {
			log.Info(fmt.Sprintf("Download of the vocab size file failed: %v; use default vocab size file: %s", err, pyfmt.OptStr(p.VocabFilePath)))
		} else {
			p.VocabFilePath = &path
		}
	}
	if p.VocabFilePath == nil {
		return nil, errkind.New(errkind.Precondition, "Either provide vocab_file_path or vocab_file_folder_prefix and end date.")
	}
	f, err := os.Open(*p.VocabFilePath)
	if err != nil {
		return nil, errkind.Wrap(errkind.NotFound, fmt.Errorf("vocab sizes: %w", err))
	}
	defer f.Close()
	sizes, err := ParseVocabSizes(f, *p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", *p.VocabFilePath, err)
	}
	log.Info(fmt.Sprintf("Slot and vocab size: %v", sizes))
	return sizes, nil
}
