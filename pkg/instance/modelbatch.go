package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	examplepb "github.com/monolith-go/monolith/gen/pb/idl/matrix/proto/example"
	"github.com/monolith-go/monolith/pkg/errkind"
)

// Random batches for an exported model: the features its entry reads, read from the entry's
// model.json (pkg/export's EntryManifest, format monolith-go/export/entry/v1; README "Export").
// The file is decoded here rather than through pkg/export so that the serving tools need not link
// the training side; only the fields below are read.

// ModelManifestFile is the entry version directory's manifest.
const ModelManifestFile = "model.json"

// entryFormatPrefix starts the format of every version of the entry manifest.
const entryFormatPrefix = "monolith-go/export/entry/"

// ModelFeatures are the features an exported model reads.
type ModelFeatures struct {
	// Dense are its float_list features, in the dense row's order.
	Dense []DenseFeature
	// Sparse are its fid_v2_list features.
	Sparse []ModelSparseFeature
}

// DenseFeature is a float_list feature of Dim values.
type DenseFeature struct {
	Name string
	Dim  int
}

// ModelSparseFeature is a fid_v2_list feature of one slot whose ids are looked up in a table of
// Entries entries.
type ModelSparseFeature struct {
	Name    string
	Slot    int
	Entries int64
}

// modelManifest is the part of model.json ReadModelFeatures reads.
type modelManifest struct {
	Format string `json:"format"`
	Model  struct {
		SparseFeatures []struct {
			Name  string `json:"name"`
			Slot  int    `json:"slot"`
			Table string `json:"table"`
		} `json:"sparse_features"`
		DenseFeatures []struct {
			Name string `json:"name"`
			Dim  int    `json:"dim"`
		} `json:"dense_features"`
	} `json:"model"`
	Tables []struct {
		Name    string `json:"name"`
		Entries int64  `json:"entries"`
	} `json:"tables"`
}

// ReadModelFeatures reads the features of the exported model whose entry manifest is path, or is
// model.json in the directory path (an entry version directory). A missing file is an error of
// kind NotFound; a file that is no entry manifest, or describes features that cannot be generated
// (no feature, a name given twice, a slot outside [1, 32767], a dimension below 1), of kind Value.
func ReadModelFeatures(path string) (*ModelFeatures, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, ModelManifestFile)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errkind.New(errkind.NotFound, "model spec %s does not exist (an export's entry/<version>/%s)", path, ModelManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("model spec: %w", err)
	}
	bad := func(format string, args ...any) error {
		return errkind.New(errkind.Value, "model spec %s: "+format, append([]any{path}, args...)...)
	}
	var m modelManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, bad("%v", err)
	}
	if !strings.HasPrefix(m.Format, entryFormatPrefix) {
		return nil, bad("format %q: not an export's entry manifest (%s...)", m.Format, entryFormatPrefix)
	}
	entries := map[string]int64{}
	for _, t := range m.Tables {
		entries[t.Name] = t.Entries
	}
	mf := &ModelFeatures{}
	seen := map[string]bool{}
	name := func(n string) error {
		switch {
		case n == "" || n == LabelFeature || n == LineIDFeature:
			return bad("feature name %q", n)
		case seen[n]:
			return bad("feature %q given twice", n)
		}
		seen[n] = true
		return nil
	}
	for _, d := range m.Model.DenseFeatures {
		if err := name(d.Name); err != nil {
			return nil, err
		}
		if d.Dim < 1 {
			return nil, bad("dense feature %q has dimension %d", d.Name, d.Dim)
		}
		mf.Dense = append(mf.Dense, DenseFeature{Name: d.Name, Dim: d.Dim})
	}
	for _, s := range m.Model.SparseFeatures {
		if err := name(s.Name); err != nil {
			return nil, err
		}
		if s.Slot < 1 || s.Slot > maxModelSlot {
			return nil, bad("sparse feature %q: slot %d is outside [1, %d]", s.Name, s.Slot, maxModelSlot)
		}
		mf.Sparse = append(mf.Sparse, ModelSparseFeature{Name: s.Name, Slot: s.Slot, Entries: entries[s.Table]})
	}
	if len(mf.Dense)+len(mf.Sparse) == 0 {
		return nil, bad("the model reads no feature")
	}
	return mf, nil
}

// maxModelSlot is the largest slot of the entry's fids (15 bits: pkg/export's rule).
const maxModelSlot = 1<<15 - 1

// RandomModelBatch is an ExampleBatch of batchSize examples carrying mf's features: each dense
// feature Dim standard normal values, each sparse feature one fid slot << 48 | id with id uniform
// in [1, Entries] (a table filled from a click log that numbers its ids from 1, as the demo's,
// then answers most lookups with an entry; a feature of an empty table gets a random 48-bit id),
// then __LINE_ID__ (a random line id, as the profile's) and __LABEL__ (example i: i % 2). A
// batch size below 1 is an error of kind Value.
func RandomModelBatch(rng *rand.Rand, mf *ModelFeatures, batchSize int, now time.Time) (*examplepb.ExampleBatch, error) {
	if batchSize < 1 {
		return nil, errkind.New(errkind.Value, "random model batch: batch size %d is not positive", batchSize)
	}
	n := batchSize
	eb := &examplepb.ExampleBatch{BatchSize: int32(n)}
	for _, d := range mf.Dense {
		list := &examplepb.NamedFeatureList{Name: d.Name, Feature: make([]*examplepb.Feature, n)}
		for i := range n {
			v := make([]float32, d.Dim)
			for j := range v {
				v[j] = float32(rng.NormFloat64())
			}
			list.Feature[i] = &examplepb.Feature{Type: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}}
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, list)
	}
	for _, s := range mf.Sparse {
		list := &examplepb.NamedFeatureList{Id: int32(s.Slot), Name: s.Name, Feature: make([]*examplepb.Feature, n)}
		for i := range n {
			var id uint64
			if s.Entries > 0 {
				id = 1 + uint64(rng.Int64N(s.Entries))
			} else {
				id = 1 + uint64(rng.Int64N(fidV2Mask))
			}
			fid := uint64(s.Slot)<<fidV2Bits | id&fidV2Mask
			list.Feature[i] = &examplepb.Feature{Type: &examplepb.Feature_FidV2List{FidV2List: &examplepb.FidList{Value: []uint64{fid}}}}
		}
		eb.NamedFeatureList = append(eb.NamedFeatureList, list)
	}
	lineIDs, labels, err := lineIDAndLabelLists(rng, n, ProfileExtraFeatures, ProfileActions, now)
	if err != nil {
		return nil, fmt.Errorf("random model batch: %w", err)
	}
	eb.NamedFeatureList = append(eb.NamedFeatureList, lineIDs, labels)
	return eb, nil
}
