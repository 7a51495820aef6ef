// Package agentctl holds the operations of the reference's agent_controller.py, the operator's
// tool that declares exported saved models in ZooKeeper and publishes them into layouts:
//
//	decl       DeclareSavedModel: one SavedModelDeployConfig per sub-graph of an export
//	pub/unpub  MapModelToLayout: add / remove the sub-graphs matching "model:pattern" to a layout
//	bzid_info  PrintBzidInfo: the bzid's saved models, containers and layouts as JSON
//
// Run dispatches a command line's options to them. The command itself (flags, connecting to
// ZooKeeper) is cmd/agentctl.
package agentctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	tfprotobuf "github.com/monolith-go/monolith/gen/pb/tensorflow/core/protobuf"
	"github.com/monolith-go/monolith/pkg/agentctl/fnmatch"
	"github.com/monolith-go/monolith/pkg/backend"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/modelconfig"
	"github.com/monolith-go/monolith/pkg/pathutil"
)

// SupportedCmds are the commands, as the reference's help lists them.
const SupportedCmds = "decl|pub|unpub|bzid_info"

// ArchEntryPS is the only serving architecture DeclareSavedModel supports.
const ArchEntryPS = "entry_ps"

// RemotePredictOp is the op of the entry graph's nodes that call the PS sub-graphs; its
// "model_name" attribute names the model ("name" or "name:..." ).
const RemotePredictOp = "TfServingRemotePredict"

// Actions of MapModelToLayout.
const (
	ActionPub   = "pub"
	ActionUnpub = "unpub"
)

// FindModelName returns the model name the exported entry graph calls its PS sub-graphs by: the
// "model_name" attribute (up to the first ":") of the first TfServingRemotePredict node of the
// first meta graph of {exportBase}/entry/{version}/saved_model.pb. found is false when there is no
// such node.
//
// {version} is the newest version directory (the greatest number), as TF Serving would serve; the
// reference took sorted(listdir(entry))[0], the oldest entry of any kind, though it named it
// latest. Only local paths are read (the reference read HDFS too, through tf.io.gfile).
func FindModelName(exportBase string) (name string, found bool, err error) {
	entry := pathutil.Join(exportBase, "entry")
	version, err := latestVersion(entry)
	if err != nil {
		return "", false, err
	}
	file := pathutil.Join(entry, version, "saved_model.pb")
	slog.Info("loading the exported entry graph", "file", file)
	data, err := os.ReadFile(file)
	if err != nil {
		return "", false, fileErr("read saved model", err)
	}
	var sm tfprotobuf.SavedModel
	if err := proto.Unmarshal(data, &sm); err != nil {
		return "", false, errkind.New(errkind.Value, "agentctl: parse %s: %w", file, err)
	}
	if len(sm.GetMetaGraphs()) == 0 {
		return "", false, errkind.New(errkind.Value, "agentctl: %s has no meta graph", file)
	}
	for _, node := range sm.GetMetaGraphs()[0].GetGraphDef().GetNode() {
		if node.GetOp() == RemotePredictOp {
			attr := string(node.GetAttr()["model_name"].GetS())
			name, _, _ := strings.Cut(attr, ":")
			return name, true, nil
		}
	}
	return "", false, nil
}

// latestVersion returns the name of the greatest version directory of dir (modelconfig's
// reading of versions, the one the agent uses for latest_once).
func latestVersion(dir string) (string, error) {
	v, err := modelconfig.LatestVersion(dir)
	switch {
	case errors.Is(err, modelconfig.ErrNoVersion):
		return "", errkind.Wrap(errkind.NotFound, fmt.Errorf("agentctl: %w", err))
	case err != nil:
		return "", fileErr("read versions", err)
	}
	return v.Name, nil
}

func isDir(dir string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	st, err := os.Stat(pathutil.Join(dir, e.Name())) // follows a symbolic link
	return err == nil && st.IsDir()
}

// DeclareSavedModel declares every sub-graph (subdirectory) of exportBase as a saved model of
// modelName, with version policy "latest" for the entry and "latest_once" for the others, and
// returns the model name. An empty modelName takes the one FindModelName finds (a different one
// is logged); without either it is a Precondition error, as are an arch other than entry_ps and
// an already declared model without overwrite (the reference asserts).
//
// Only directories are sub-graphs (the reference declared files in exportBase too).
func DeclareSavedModel(ctx context.Context, bd backend.CtrlBackend, exportBase, modelName string, overwrite bool, arch string) (string, error) {
	if arch != ArchEntryPS {
		return "", errkind.New(errkind.Precondition, "agentctl: only entry + ps architecture supported, not %q", arch)
	}
	fromExport, found, err := FindModelName(exportBase)
	if err != nil {
		return "", err
	}
	if modelName == "" {
		modelName = fromExport
	}
	if modelName != fromExport {
		exported := "None"
		if found {
			exported = fromExport
		}
		slog.Error("the model name given differs from the exported one", "model_name", modelName, "exported_model_name", exported)
	}
	if modelName == "" {
		return "", errkind.New(errkind.Precondition, "agentctl: Model name is None: none given and no %s node in %s", RemotePredictOp, exportBase)
	}
	existing, err := bd.ListSavedModels(ctx, modelName)
	if err != nil {
		return "", err
	}
	if len(existing) > 0 && !overwrite {
		return "", errkind.New(errkind.Precondition, "agentctl: %s exists and not in overwrite mode", modelName)
	}
	subGraphs, err := subDirs(exportBase)
	if err != nil {
		return "", err
	}
	for _, sg := range subGraphs {
		policy := "latest_once"
		if sg == "entry" {
			policy = "latest"
		}
		base := pathutil.Join(exportBase, sg)
		cfg := backend.SavedModelDeployConfig{ModelBasePath: &base, VersionPolicy: &policy}
		if err := bd.DeclSavedModel(ctx, backend.SavedModel{ModelName: modelName, SubGraph: sg}, cfg); err != nil {
			return "", err
		}
	}
	slog.Info("saved models declared", "model", modelName, "export_base", exportBase)
	return modelName, nil
}

// subDirs lists the subdirectories of dir, sorted.
func subDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fileErr("list sub-graphs", err)
	}
	var out []string
	for _, e := range entries {
		if isDir(dir, e) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// MapModelToLayout adds (ActionPub) or removes (ActionUnpub) the declared sub-graphs of a model
// that match a pattern to or from layoutPath. modelPattern is "model:pattern", pattern a shell
// pattern as Python's fnmatch reads it ("ps_*"). A pattern without ":" and an unknown action are
// Value errors (the reference raised for the first and did nothing for the second).
func MapModelToLayout(ctx context.Context, bd backend.CtrlBackend, modelPattern, layoutPath, action string) error {
	if action != ActionPub && action != ActionUnpub {
		return errkind.New(errkind.Value, "agentctl: unknown action %q (want %s or %s)", action, ActionPub, ActionUnpub)
	}
	model, pattern, ok := strings.Cut(modelPattern, ":")
	if !ok {
		return errkind.New(errkind.Value, "agentctl: model pattern %q: want model_name:sub_graph_pattern", modelPattern)
	}
	sms, err := bd.ListSavedModels(ctx, model)
	if err != nil {
		return err
	}
	subs := make([]string, len(sms))
	for i, sm := range sms {
		subs[i] = sm.SubGraph
	}
	matched, err := fnmatch.Filter(subs, pattern)
	if err != nil {
		return errkind.Wrap(errkind.Value, err)
	}
	for _, sg := range matched {
		sm := backend.SavedModel{ModelName: model, SubGraph: sg}
		if action == ActionPub {
			slog.Info("publishing", "saved_model", sm.String(), "layout", layoutPath)
			err = bd.AddToLayout(ctx, layoutPath, sm)
		} else {
			slog.Info("unpublishing", "saved_model", sm.String(), "layout", layoutPath)
			err = bd.RemoveFromLayout(ctx, layoutPath, sm)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// PrintBzidInfo writes the bzid's overview as the reference prints it
// (print(json.dumps(bd.bzid_info(), indent=2))).
func PrintBzidInfo(ctx context.Context, bd backend.CtrlBackend, w io.Writer) error {
	info, err := bd.BzidInfo(ctx)
	if err != nil {
		return err
	}
	raw, err := info.MarshalJSON()
	if err != nil {
		return fmt.Errorf("agentctl: bzid info: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return fmt.Errorf("agentctl: bzid info: %w", err)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// Options are agent_controller.py's flags.
type Options struct {
	Cmd        string // decl, pub, unpub or bzid_info
	Bzid       string // the namespace
	ExportBase string // decl: the exported model's base path
	Overwrite  bool   // decl: overwrite existing saved model configs
	ModelName  string // pub/unpub: "model:sub_graph_pattern"
	Layout     string // pub/unpub: the layout under /{bzid}/layouts
	Arch       string // decl: the serving architecture
}

// DefaultOptions are the reference's flag defaults.
func DefaultOptions() Options {
	return Options{Cmd: "bzid_info", Bzid: "test", Arch: ArchEntryPS}
}

// Run carries out one command on bd, as the reference's main does once its backend is started:
// decl declares the export under ExportBase (with the model name found in it; main passes no
// name), pub/unpub map ModelName to /{Bzid}/layouts/{Layout}, bzid_info prints to stdout. An
// unknown command is a Value error, a missing option a Precondition error (the reference asserts).
func Run(ctx context.Context, bd backend.CtrlBackend, o Options, stdout io.Writer) error {
	switch o.Cmd {
	case "decl":
		if o.ExportBase == "" {
			return errkind.New(errkind.Precondition, "agentctl: decl needs export_base")
		}
		_, err := DeclareSavedModel(ctx, bd, o.ExportBase, "", o.Overwrite, o.Arch)
		return err
	case ActionPub, ActionUnpub:
		if o.Layout == "" || o.ModelName == "" {
			return errkind.New(errkind.Precondition, "agentctl: %s needs layout and model_name", o.Cmd)
		}
		return MapModelToLayout(ctx, bd, o.ModelName, "/"+o.Bzid+"/layouts/"+o.Layout, o.Cmd)
	case "bzid_info":
		return PrintBzidInfo(ctx, bd, stdout)
	}
	return errkind.New(errkind.Value, "unsupported cmd %s, options are %s", o.Cmd, SupportedCmds)
}

func fileErr(op string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errkind.New(errkind.NotFound, "agentctl: %s: %w", op, err)
	}
	return fmt.Errorf("agentctl: %s: %w", op, err)
}
