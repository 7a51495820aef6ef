package agentconf

import (
	"fmt"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pathutil"
	"github.com/monolith-go/monolith/pkg/pytext"
)

// ModelServerConfig is the TF Serving model config for serverType ("" = the deploy type's own):
// ps_{i} for each PS shard this host serves, else entry / dense_0, plus the deep rough sort model
// where configured (the reference's _gen_model_server_config).
func (c *AgentConfig) ModelServerConfig(serverType string) (*servingconfig.ModelServerConfig, error) {
	st, err := c.Deploy.CompatServerType(serverType)
	if err != nil {
		return nil, err
	}
	data := modelconfig.VersionData{N: int64(c.VersionData)}
	var configs []*servingconfig.ModelConfig
	add := func(name, base string) error {
		mc, err := modelconfig.ModelConfig(name, base, c.VersionPolicy, data, nil)
		if err != nil {
			return err
		}
		configs = append(configs, mc)
		return nil
	}
	basePath := func(name string) (string, error) {
		if c.BasePath == nil {
			return "", errkind.New(errkind.Type, "model server config: base_path is not set")
		}
		return pathutil.Join(*c.BasePath, name), nil
	}
	roughPath := func(name string) (string, error) {
		if c.RoughSortModelLocalPath == nil {
			return "", errkind.New(errkind.Type, "model server config: rough_sort_model_local_path is not set")
		}
		return pathutil.Join(*c.RoughSortModelLocalPath, *c.RoughSortModelName, name), nil
	}
	hasRough := c.RoughSortModelName != nil && *c.RoughSortModelName != ""
	if st == ServerPS {
		schedule, err := c.ServerSchedule(st)
		if err != nil {
			return nil, err
		}
		for _, i := range schedule {
			idx := "None"
			if i != nil {
				idx = fmt.Sprint(*i)
			}
			name := st + "_" + idx
			p, err := basePath(name)
			if err != nil {
				return nil, err
			}
			if err := add(name, p); err != nil {
				return nil, err
			}
			if hasRough && c.RoughSortModelLoadedServer == RoughSortLoadedPS {
				name := RoughSortPrefixPS + "_" + idx
				p, err := roughPath(name)
				if err != nil {
					return nil, err
				}
				if err := add(name, p); err != nil {
					return nil, err
				}
			}
		}
	} else {
		name := st
		if st == ServerDense {
			name = st + "_0"
		}
		p, err := basePath(name)
		if err != nil {
			return nil, err
		}
		if err := add(name, p); err != nil {
			return nil, err
		}
		switch {
		case c.RoughSortResourceConstrained && c.RoughSortModelLoadedServer == RoughSortLoadedEntry:
			name := RoughSortPrefixEntry + "_0"
			p, err := basePath(name)
			if err != nil {
				return nil, err
			}
			if err := add(name, p); err != nil {
				return nil, err
			}
		case hasRough && (c.RoughSortModelLoadedServer == RoughSortLoadedEntry || c.RoughSortModelLoadedServer == RoughSortLoadedDense):
			name := RoughSortPrefixEntry + "_0"
			if c.RoughSortModelLoadedServer == RoughSortLoadedDense {
				name = RoughSortPrefixDense + "_0"
			}
			p, err := roughPath(name)
			if err != nil {
				return nil, err
			}
			if err := add(name, p); err != nil {
				return nil, err
			}
		}
	}
	if len(configs) == 0 {
		// As in the reference, no model leaves the list unset (a PS host with no shard to serve).
		return &servingconfig.ModelServerConfig{}, nil
	}
	return &servingconfig.ModelServerConfig{Config: &servingconfig.ModelServerConfig_ModelConfigList{
		ModelConfigList: &servingconfig.ModelConfigList{Config: configs}}}, nil
}

// writeModelServerConfig writes the config for serverType to a new temporary file, in the
// reference's text layout, and returns its path.
func (c *AgentConfig) writeModelServerConfig(serverType string) (string, error) {
	msc, err := c.ModelServerConfig(serverType)
	if err != nil {
		return "", err
	}
	return WriteTempFile(pytext.Format(msc))
}
