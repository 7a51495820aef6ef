package tfsmonitor

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	servingconfig "github.com/monolith-go/monolith/gen/pb/tensorflow_serving/config"
	"github.com/monolith-go/monolith/parity/adapters/datadef"
	"github.com/monolith-go/monolith/parity/adapters/utils"
	"github.com/monolith-go/monolith/parity/harness"
	ddef "github.com/monolith-go/monolith/pkg/datadef"
	"github.com/monolith-go/monolith/pkg/pytext"
	"github.com/monolith-go/monolith/pkg/tfs"
	"github.com/monolith-go/monolith/pkg/tfs/faketfs"
)

// CallRemoveConfig is tfs_monitor_test's reload and remove-config scenario: the monitor in front
// of fake TF Servings (one per service type the config has a port for), probed, then given
// reloads built by gen_model_config.
const CallRemoveConfig = "TFSMonitor(conf) + FakeTFServing (entry, ps, dense): get_model_status(probes), " +
	"gen_model_config + handle_reload_config_request per reload, model managers drained"

// removeConfig replays the scenario. The fake servers listen on the ports the config chose, at
// MY_HOST_IP (a loopback address in the cases), and move no model by themselves: after each
// reload their queues are drained, as the recording drained the reference's.
func removeConfig(c *harness.Ctx, in harness.Input) (any, error) {
	raw, err := in.Raw("conf_kwargs")
	if err != nil {
		return nil, err
	}
	conf, err := utils.AgentConfigFromKwargs(c, raw)
	if err != nil {
		return nil, err
	}
	probes, err := publishMetas(in, "probes")
	if err != nil {
		return nil, err
	}
	var reloadsRaw []json.RawMessage
	if err := in.Decode("reloads", &reloadsRaw); err != nil {
		return nil, err
	}
	fix := false
	if in.Has("fix_dense_version") {
		if fix, err = in.Bool("fix_dense_version"); err != nil {
			return nil, err
		}
	}
	host := c.Env["MY_HOST_IP"]
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, &harness.InputError{Key: "env.MY_HOST_IP", Msg: "want a loopback address for the fake TF Servings"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	servers := map[string]*faketfs.Server{}
	defer func() {
		for _, s := range servers {
			s.Stop(context.Background())
		}
	}()
	for st, port := range map[string]*int{"entry": conf.TFSEntryPort, "ps": conf.TFSPSPort, "dense": conf.TFSDensePort} {
		if port == nil {
			continue
		}
		s, err := faketfs.New(&servingconfig.ModelServerConfig{}, faketfs.Options{Addr: net.JoinHostPort(host, strconv.Itoa(*port))})
		if err != nil {
			return nil, fmt.Errorf("fake %s TF Serving: %w", st, err)
		}
		servers[st] = s
		if err := s.Start(); err != nil {
			return nil, err
		}
	}
	mon := tfs.NewMonitor(conf)
	if err := mon.Connect(); err != nil {
		return nil, err
	}
	defer mon.Close()

	probe := func() (map[string]any, error) {
		out := map[string]any{}
		for _, pm := range probes {
			st, err := mon.PublishStatus(ctx, pm, fix)
			if err != nil {
				return nil, err
			}
			for name, s := range st {
				out[name] = []any{s.VersionPath, pytext.Format(s.Status)}
			}
		}
		return out, nil
	}
	initial, err := probe()
	if err != nil {
		return nil, err
	}
	var reloads []any
	for i, r := range reloadsRaw {
		pms, err := publishMetas(harness.Input{"pms": r}, "pms")
		if err != nil {
			return nil, fmt.Errorf("reloads[%d]: %w", i, err)
		}
		configs, err := mon.GenModelConfig(pms, fix)
		if err != nil {
			return nil, err
		}
		statuses, sent := map[string]any{}, map[string]any{}
		for st, cfg := range configs {
			if len(cfg.GetModelConfigList().GetConfig()) == 0 {
				continue // as tfs_monitor_test: an empty config is not sent
			}
			status, err := mon.Reload(ctx, st, cfg)
			if err != nil {
				return nil, err
			}
			statuses[st] = pytext.Format(status)
			sent[st] = pytext.Format(mon.AppliedConfig(st))
		}
		before, err := probe()
		if err != nil {
			return nil, err
		}
		alive := map[string]any{}
		for st, s := range servers {
			s.Drain()
			alive[st] = orEmpty(s.Mgr().AliveModelNames())
		}
		after, err := probe()
		if err != nil {
			return nil, err
		}
		reloads = append(reloads, map[string]any{"statuses": statuses, "configs_sent": sent,
			"probes_before_drain": before, "probes_after_drain": after, "alive_models": alive})
	}
	return map[string]any{"probes_initial": initial, "reloads": orEmpty(reloads)}, nil
}

func publishMetas(in harness.Input, key string) ([]ddef.PublishMeta, error) {
	var raws []json.RawMessage
	if err := in.Decode(key, &raws); err != nil {
		return nil, err
	}
	var pms []ddef.PublishMeta
	for _, raw := range raws {
		pm, err := datadef.PublishMetaFromKwargs(raw)
		if err != nil {
			return nil, err
		}
		pms = append(pms, pm)
	}
	return pms, nil
}

// orEmpty makes a nil slice empty: the goldens write [] where Go would write null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
