package modelconfig

import (
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/pytext"
)

func TestModelConfig(t *testing.T) {
	// Expected texts are the reference's text_format output for the same calls.
	tests := []struct {
		name   string
		policy string
		data   VersionData
		labels map[string]int64
		want   string
		kind   errkind.Kind
	}{
		{"latest", "latest", VersionData{N: 3}, nil,
			"name: \"m\"\nbase_path: \"/b\"\nmodel_platform: \"tensorflow\"\nmodel_version_policy {\n  latest {\n    num_versions: 3\n  }\n}\n", 0},
		{"specific list with labels", "SPECIFIC", VersionData{List: []int64{1, 2}, IsList: true}, map[string]int64{"stable": 2, "canary": 1},
			"name: \"m\"\nbase_path: \"/b\"\nmodel_platform: \"tensorflow\"\nmodel_version_policy {\n  specific {\n    versions: 1\n    versions: 2\n  }\n}\n" +
				"version_labels {\n  key: \"canary\"\n  value: 1\n}\nversion_labels {\n  key: \"stable\"\n  value: 2\n}\n", 0},
		{"all", "all", VersionData{}, nil,
			"name: \"m\"\nbase_path: \"/b\"\nmodel_platform: \"tensorflow\"\nmodel_version_policy {\n  all {\n  }\n}\n", 0},
		{"latest with a list", "latest", VersionData{List: []int64{1}, IsList: true}, nil, "", errkind.Precondition},
		{"latest_once", "latest_once", VersionData{N: 1}, nil, "", errkind.Attribute},
		{"unknown policy", "newest", VersionData{N: 1}, nil, "", errkind.Value},
		// num_versions is a uint32: the reference's protobuf refuses what does not fit.
		{"latest negative", "latest", VersionData{N: -1}, nil, "", errkind.Value},
		{"latest beyond uint32", "latest", VersionData{N: 1 << 32}, nil, "", errkind.Value},
		{"latest largest uint32", "latest", VersionData{N: 1<<32 - 1}, nil,
			"name: \"m\"\nbase_path: \"/b\"\nmodel_platform: \"tensorflow\"\nmodel_version_policy {\n  latest {\n    num_versions: 4294967295\n  }\n}\n", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mc, err := ModelConfig("m", "/b", tc.policy, tc.data, tc.labels)
			if tc.kind != 0 {
				if errkind.Of(err) != tc.kind {
					t.Fatalf("error %v, want kind %v", err, tc.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pytext.Format(mc); got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestModelSpecAndStatus(t *testing.T) {
	zero := int64(0)
	sig := "predict"
	if got := pytext.Format(ModelSpec("m", Version{Number: &zero}, &sig)); got != "name: \"m\"\nversion {\n}\nsignature_name: \"predict\"\n" {
		t.Fatalf("ModelSpec: %q", got)
	}
	if got := pytext.Format(VersionStatus(1, 0, 0, nil)); got != "version: 1\nstatus {\n}\n" {
		t.Fatalf("VersionStatus: %q", got)
	}
}
