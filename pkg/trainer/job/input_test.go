package job_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/monolith-go/monolith/internal/leakcheck"
	"github.com/monolith-go/monolith/pkg/estimator"
	"github.com/monolith-go/monolith/pkg/trainer/batch"
	"github.com/monolith-go/monolith/pkg/trainer/job"
	"github.com/monolith-go/monolith/pkg/trainer/synth"
)

// A worker's share of Files is every workers-th file from its index on; a worker without one is
// told so.
func TestFilesShard(t *testing.T) {
	f := job.Files{Name: "--train_data", Paths: []string{"a", "b", "c", "d", "e"}, Epochs: 2, BatchSize: 8}
	for _, c := range []struct {
		index, workers int
		want           []string
	}{{0, 1, []string{"a", "b", "c", "d", "e"}}, {0, 2, []string{"a", "c", "e"}}, {1, 2, []string{"b", "d"}}, {4, 5, []string{"e"}}} {
		s, err := f.Shard(c.index, c.workers)
		if err != nil {
			t.Fatalf("worker %d of %d: %v", c.index, c.workers, err)
		}
		if got := s.(job.Files); !reflect.DeepEqual(got.Paths, c.want) || got.Epochs != 2 || got.BatchSize != 8 {
			t.Errorf("worker %d of %d: %+v, want the files %v, 2 epochs in batches of 8", c.index, c.workers, got, c.want)
		}
	}
	if _, err := f.Shard(5, 6); err == nil || err.Error() != "--train_data: 5 files for 6 workers: worker 5 has none" {
		t.Errorf("worker 5 of 6: %v", err)
	}
}

// generated is a Source that is not files: batches drawn from a click log generator's stream, a
// worker's share its own stream. It fails its Next at batch failAt (0: never).
type generated struct {
	g               *synth.Generator
	stream          uint64
	batches, size   int
	failAt          int
	opened, skipped *int64
	// source, if set, gets the position the job opens the input at (Position.Source); the
	// batches carry their count as their position, as a stream's carry offsets.
	source *[]byte
}

func (s generated) Open(_ context.Context, at job.Position) (estimator.Input[*batch.Batch], error) {
	skip := at.Batches
	if s.opened != nil {
		*s.opened++
		*s.skipped = skip
	}
	if s.source != nil {
		*s.source = at.Source
	}
	in := &generatedInput{s: s, stream: s.g.Stream(s.stream)}
	for ; in.n < int(skip) && in.n < s.batches; in.n++ {
		for range s.size {
			in.stream.Next()
		}
	}
	return in, nil
}

func (s generated) Describe() string {
	return fmt.Sprintf("%d batches of %d from stream %d", s.batches, s.size, s.stream)
}

func (s generated) Shard(index, workers int) (job.Source, error) {
	s.stream += uint64(index)
	return s, nil
}

type generatedInput struct {
	s      generated
	stream *synth.Stream
	n      int
}

func (in *generatedInput) Next(context.Context) (*batch.Batch, error) {
	if in.n >= in.s.batches {
		return nil, io.EOF
	}
	in.n++
	if in.n == in.s.failAt {
		return nil, errors.New("the stream broke")
	}
	b := &batch.Batch{}
	for range in.s.size {
		ex, _ := in.stream.Next()
		if err := in.s.g.Schema().Append(b, ex); err != nil {
			return nil, err
		}
	}
	b.Position = []byte(fmt.Sprintf(`{"batches":%d}`, in.n))
	return b, nil
}

func (in *generatedInput) Close() error { return nil }

// A job trains and evaluates on any Source: here batches generated in memory. Its training input
// is opened once and, resumed, asked to skip the batches the restored step trained on (dnn); an
// error reading it is an *InputError.
func TestAnotherSource(t *testing.T) {
	leakcheck.Check(t)
	for _, model := range []string{job.ModelLogreg, job.ModelDNN} {
		t.Run(model, func(t *testing.T) {
			g, err := synth.New(demoClickLog(3, model))
			if err != nil {
				t.Fatal(err)
			}
			var opened, skipped int64
			var source []byte
			cfg := func(dir string, failAt int) job.Config {
				c := newConfig(t, model, input{schema: g.Schema()}, 1, 128, values("model_dir", dir))
				c.Train = generated{g: g, stream: 1, batches: 20, size: 128, failAt: failAt, opened: &opened, skipped: &skipped, source: &source}
				c.Eval = generated{g: g, stream: 2, batches: 4, size: 128}
				return c
			}
			dir := t.TempDir()
			r := runOK(t, cfg(dir, 0))
			if auc, _, steps := r.final(t); steps != 20 || auc <= 0.6 {
				t.Errorf("auc %v steps %d, want 20 steps and some learning", auc, steps)
			}
			if opened != 1 || skipped != 0 {
				t.Errorf("the training input was opened %d times skipping %d batches, want once skipping none", opened, skipped)
			}
			c := cfg(dir, 0)
			c.Steps = 5
			r = runOK(t, c)
			wantSkip := int64(0)
			if model == job.ModelDNN {
				wantSkip = 20 // a dnn job resumes where its input was
			}
			if skipped != wantSkip {
				t.Errorf("resumed at step 20: %d batches skipped, want %d", skipped, wantSkip)
			}
			// The checkpoint kept the source's position after its last batch (dnn: the chief's
			// position is in its checkpoints; logreg starts over).
			if want := `{"batches":20}`; model == job.ModelDNN && string(source) != want {
				t.Errorf("resumed with the source's position %q, want %q", source, want)
			}

			r = start(t, cfg(t.TempDir(), 3), nil)()
			var ie *job.InputError
			if r.code != 2 || !errors.As(r.err, &ie) || ie.What != "training input" || !strings.Contains(r.line, "training input: the stream broke") {
				t.Errorf("a failing source: exit %d, %v; want an input error", r.code, r.err)
			}
		})
	}
}
