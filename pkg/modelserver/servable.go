package modelserver

import (
	"context"
	"errors"
	"path"
	"regexp"
	"strings"

	tfframework "github.com/monolith-go/monolith/gen/pb/tensorflow/core/framework"
	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// DefaultSignature is the signature an empty signature_name asks for (TF Serving's
// kDefaultServingSignatureDefKey).
const DefaultSignature = "serving_default"

// PredictMethod is the method name of the servables' signatures (TF Serving's kPredictMethodName).
const PredictMethod = "tensorflow/serving/predict"

// Servable is one loaded version of a model: what Predict and GetModelMetadata reach. Its methods
// are called concurrently; Close is called once, after every Predict has returned.
type Servable interface {
	// Signatures are the signatures it serves, by name; DefaultSignature is among them.
	Signatures() map[string]*tfprotobuf.SignatureDef
	// Predict runs the signature (a key of Signatures) on inputs. Errors are gRPC statuses, or
	// errors the server maps to one (errkind.Value: INVALID_ARGUMENT, errkind.NotFound:
	// NOT_FOUND, context errors: DEADLINE_EXCEEDED / CANCELLED, else INTERNAL).
	Predict(ctx context.Context, signature string, inputs map[string]*tfframework.TensorProto) (map[string]*tfframework.TensorProto, error)
	// Close releases what the servable holds.
	Close() error
}

// Source is one version of a model to load.
type Source struct {
	// Model is the model's name in the config (for Monolith's sub-graphs "<model>:<sub_graph>").
	Model string
	// Kind is the model's sub-graph kind (KindOf).
	Kind string
	// Version is the version number, Dir its directory (<base_path>/<version>).
	Version int64
	Dir     string
}

// Loader loads a version. It must return when ctx is cancelled (the version was unloaded or the
// server stops while it loaded). An error marked Permanent is not retried.
type Loader func(ctx context.Context, src Source) (Servable, error)

// Loaders are the loaders by sub-graph kind.
type Loaders map[string]Loader

// Sub-graph kinds.
const (
	// KindEntry is Monolith's entry sub-graph ("entry").
	KindEntry = "entry"
	// KindPS is a PS shard sub-graph ("ps_<i>").
	KindPS = "ps"
)

var psSubGraph = regexp.MustCompile(`^ps_(0|[1-9][0-9]*)$`)

// subGraphKind is the kind of a sub-graph name, "" for none.
func subGraphKind(sub string) string {
	switch {
	case sub == KindEntry:
		return KindEntry
	case psSubGraph.MatchString(sub):
		return KindPS
	}
	return ""
}

// KindOf is the sub-graph kind of a model: from its name ("<model>:entry", "<model>:ps_3", or the
// bare sub-graph name, as the agent names TF Serving's models), else from the last element of its
// base path (Monolith's <export_base>/<sub_graph>); "" when neither says.
func KindOf(model, basePath string) string {
	if k := subGraphKind(model[strings.LastIndexByte(model, ':')+1:]); k != "" {
		return k
	}
	return subGraphKind(path.Base(strings.TrimRight(basePath, "/")))
}

// permanentError marks a load error that retrying cannot cure.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// Permanent marks err as a load failure that a retry would repeat (a corrupt or inconsistent
// version: its files do not change). nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether a load error is not worth retrying: marked Permanent, of kind Value
// or NotFound (what the export loader returns for a bad or missing file), or a context error.
func IsPermanent(err error) bool {
	var p permanentError
	switch {
	case errors.As(err, &p), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	k := errkind.Of(err)
	return k == errkind.Value || k == errkind.NotFound
}
