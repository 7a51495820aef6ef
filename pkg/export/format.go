package export

import (
	"fmt"
	"regexp"
	"strconv"
)

// The layout of an export (see the package doc and the README's Export section).
const (
	// EntrySubGraph is the entry's sub-graph.
	EntrySubGraph = "entry"
	// EntryManifestFile is the entry version's manifest (EntryManifest, JSON).
	EntryManifestFile = "model.json"
	// PSManifestFile is a PS version's manifest (PSManifest, JSON).
	PSManifestFile = "shard.json"
	// DensePrefix is the entry's dense parameters: DensePrefix+".index" and ".data", pkg/runner/
	// checkpoint's dense format.
	DensePrefix = "dense"
	// SavedModelFile is the entry's TensorFlow SavedModel proto: no graph to run, only the
	// TfServingRemotePredict nodes naming the PS sub-graphs, which agentctl decl reads the model
	// name from.
	SavedModelFile = "saved_model.pb"
	// EmbeddingsDir holds a PS version's tables: EmbeddingsDir/<table>/part-NNNNN-of-NNNNN.
	EmbeddingsDir = "embeddings"
	// TempPrefix starts the name of a version directory being written (the reference's exporter
	// writes "temp-<version>" too); it is renamed to the version once complete.
	TempPrefix = "temp-"
	// ShardRule is how ids are routed to the PS sub-graphs: ps_<floormod(id, num_ps)>, as the
	// parameter servers route them.
	ShardRule = "floormod"
	// RemotePredictOp is the op of the entry graph's nodes that name the PS sub-graphs.
	RemotePredictOp = "TfServingRemotePredict"
)

// Formats of the manifests.
const (
	EntryFormat = "monolith-go/export/entry/v1"
	PSFormat    = "monolith-go/export/ps/v1"
)

// PSSubGraph is the sub-graph of PS shard i.
func PSSubGraph(i int) string { return "ps_" + strconv.Itoa(i) }

// psSubGraph matches a PS sub-graph's name.
var psSubGraph = regexp.MustCompile(`^ps_(0|[1-9][0-9]*)$`)

// tablePart is the path, relative to a PS version directory, of part i of n of table's entries.
func tablePart(table string, i, n int) string {
	return fmt.Sprintf("%s/%s/part-%05d-of-%05d", EmbeddingsDir, table, i, n)
}

// EntryManifest is model.json: what the entry serves and how to compute it.
type EntryManifest struct {
	Format    string `json:"format"`
	ModelName string `json:"model_name"`
	// Version is the version directory's name; GlobalStep the checkpoint's step.
	Version    int64  `json:"version"`
	GlobalStep int64  `json:"global_step"`
	Checkpoint string `json:"checkpoint"`
	// ExportedAt is when the export was written (RFC 3339, UTC).
	ExportedAt string `json:"exported_at"`
	// NumPS is the number of PS sub-graphs, ps_0 .. ps_<NumPS-1>; ShardRule how ids reach them.
	NumPS     int    `json:"num_ps"`
	ShardRule string `json:"shard_rule"`
	// Model is the model's configuration.
	Model ModelSpec `json:"model"`
	// Tables are the embedding tables, sorted by name, with their entries over all shards.
	Tables []TableEntries `json:"tables"`
	// Dense locates the dense parameters.
	Dense DenseInfo `json:"dense"`
	// WithOptimizerState is true when the optimizers' state was kept (the dense optimizer's slots
	// in the dense file, the tables' optimizer dumps in the PS shards).
	WithOptimizerState bool `json:"with_optimizer_state"`
}

// TableEntries is a table, its dimension and a count of its entries.
type TableEntries struct {
	Name    string `json:"name"`
	Dim     int    `json:"dim"`
	Entries int64  `json:"entries"`
}

// DenseInfo locates the dense parameters of the entry.
type DenseInfo struct {
	// Prefix is the dense checkpoint's prefix, relative to the version directory (DensePrefix).
	Prefix string `json:"prefix"`
	// Tensors are the names of its tensors, in file order.
	Tensors []string `json:"tensors"`
}

// PSManifest is shard.json: one PS shard of the embedding tables.
type PSManifest struct {
	Format     string `json:"format"`
	ModelName  string `json:"model_name"`
	Version    int64  `json:"version"`
	GlobalStep int64  `json:"global_step"`
	Checkpoint string `json:"checkpoint"`
	ExportedAt string `json:"exported_at"`
	// Index is this shard's index among NumPS: it holds the ids with floormod(id, NumPS) == Index.
	Index     int    `json:"index"`
	NumPS     int    `json:"num_ps"`
	ShardRule string `json:"shard_rule"`
	// WithOptimizerState is true when the entries carry their optimizer dumps.
	WithOptimizerState bool `json:"with_optimizer_state"`
	// Tables are this shard's tables, sorted by name.
	Tables []PSTable `json:"tables"`
}

// PSTable is one table of a PS shard.
type PSTable struct {
	Name    string `json:"name"`
	Dim     int    `json:"dim"`
	Entries int64  `json:"entries"`
	// Files are its EntryDump TFRecord files.
	Files []PSFile `json:"files"`
}

// PSFile is one EntryDump TFRecord file of a table.
type PSFile struct {
	// Path is relative to the version directory.
	Path    string `json:"path"`
	Entries int64  `json:"entries"`
	Bytes   int64  `json:"bytes"`
}
