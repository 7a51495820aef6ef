package backend

import (
	"reflect"
	"testing"

	"github.com/monolith-go/monolith/pkg/errkind"
)

func str(s string) *string { return &s }

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{SavedModel{"m", "ps_0"}.String(), "m:ps_0"},
		{Container{"psm;idc;cl", "pod"}.String(), "psm;idc;cl:pod"},
		{SavedModel{}.String(), ":"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseSavedModel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SavedModel
		err  bool
	}{
		{"m:entry", SavedModel{"m", "entry"}, false},
		{"m:ps_0:extra", SavedModel{"m", "ps_0"}, false},
		{"m:", SavedModel{"m", ""}, false},
		{"noColon", SavedModel{}, true},
	} {
		got, err := ParseSavedModel(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSavedModel(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && errkind.Of(err) != errkind.Value {
			t.Errorf("ParseSavedModel(%q): kind %v, want Value", tc.in, errkind.Of(err))
		}
	}
}

// The serialized forms are the reference's dataclasses-json bytes (json.dumps defaults: ", " and
// ": " separators, ASCII escapes, null for None).
func TestSerialize(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"deploy config", SavedModelDeployConfig{str("/p"), str("latest")}.Serialize(),
			`{"model_base_path": "/p", "version_policy": "latest"}`},
		{"deploy config default", SavedModelDeployConfig{}.Serialize(),
			`{"model_base_path": null, "version_policy": null}`},
		{"service info", ContainerServiceInfo{str("a:1"), str("a:2"), str("a:3"), str("a:4"), str("LQ"), str("d")}.Serialize(),
			`{"grpc": "a:1", "http": "a:2", "archon": "a:3", "agent": "a:4", "idc": "LQ", "debug_info": "d"}`},
		{"service info default", ContainerServiceInfo{}.Serialize(),
			`{"grpc": null, "http": null, "archon": null, "agent": null, "idc": null, "debug_info": null}`},
		{"escapes", SavedModelDeployConfig{str("/é\"\\\n<>&😀"), str("")}.Serialize(),
			`{"model_base_path": "/\u00e9\"\\\n<>&\ud83d\ude00", "version_policy": ""}`},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, tc.got, tc.want)
		}
	}
}

func TestDeserialize(t *testing.T) {
	cfgs := []struct {
		in   string
		want SavedModelDeployConfig
		kind errkind.Kind // Unknown: no error
	}{
		{`{"model_base_path": "/x"}`, SavedModelDeployConfig{ModelBasePath: str("/x")}, errkind.Unknown},
		{`{"model_base_path": "/x", "version_policy": null, "other": [1]}`, SavedModelDeployConfig{ModelBasePath: str("/x")}, errkind.Unknown},
		{`{"model_base_path": "/\u00e9", "version_policy": "latest_once"}`, SavedModelDeployConfig{str("/é"), str("latest_once")}, errkind.Unknown},
		{`{}`, SavedModelDeployConfig{}, errkind.Unknown},
		{`{"model_base_path": 1}`, SavedModelDeployConfig{}, errkind.Type},
		{`[]`, SavedModelDeployConfig{}, errkind.Attribute}, // dataclasses-json calls [].items()
		{`null`, SavedModelDeployConfig{}, errkind.Attribute},
		{`{`, SavedModelDeployConfig{}, errkind.Value},
		{`{} {}`, SavedModelDeployConfig{}, errkind.Value},
		{"\xff", SavedModelDeployConfig{}, errkind.Value},
	}
	for _, tc := range cfgs {
		got, err := DeserializeSavedModelDeployConfig([]byte(tc.in))
		if tc.kind != errkind.Unknown {
			if err == nil || errkind.Of(err) != tc.kind {
				t.Errorf("%s: error %v (kind %v), want kind %v", tc.in, err, errkind.Of(err), tc.kind)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	info, err := DeserializeContainerServiceInfo([]byte(`{"grpc": "g", "extra": 1}`))
	if err != nil || !reflect.DeepEqual(info, ContainerServiceInfo{GRPC: str("g")}) {
		t.Errorf("service info: got %+v, %v", info, err)
	}
	if _, err := DeserializeContainerServiceInfo([]byte(`{"idc": false}`)); errkind.Of(err) != errkind.Type {
		t.Errorf("bad idc: got %v, want a Type error", err)
	}
	// Round trip.
	in := ContainerServiceInfo{str("g"), nil, str("a"), nil, str("ＬＱ"), str("")}
	out, err := DeserializeContainerServiceInfo(in.Serialize())
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("round trip: got %+v, %v; want %+v", out, err, in)
	}
}
