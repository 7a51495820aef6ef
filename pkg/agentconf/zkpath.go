package agentconf

import (
	"regexp"

	"github.com/monolith-go/monolith/pkg/errkind"
)

// zkPathPattern is the reference's ZKPath.PAT with Python's meaning kept where RE2's differs: in a
// Python str pattern \w is [\p{L}\p{N}_] and \d is \p{Nd} (RE2's are ASCII; checked over every
// code point with Python 3.11, Unicode 14), and $ also matches before a final "\n".
var zkPathPattern = regexp.MustCompile(`^/(?P<bzid>[-_0-9A-Za-z]+)/service/(?P<base_name>[-_0-9A-Za-z]+)(/(?P<idc>[-_0-9A-Za-z]+):(?P<cluster>[-_0-9A-Za-z]+))?/(?P<server_type>[\p{L}\p{N}_]+):(?P<index>\p{Nd}+)(/(?P<replica_id>\p{Nd}+))?\n?$`)

// ZKPath is a parsed service path /{bzid}/service/{base_name}[/{idc}:{cluster}]/{server_type}:{index}[/{replica_id}].
// Fields are nil when the path did not match or the optional part is absent.
type ZKPath struct {
	Path                                                     string
	Bzid, BaseName, IDC, Cluster, ServerType, Index, Replica *string
}

// ParseZKPath parses a service path; a path that does not match gives a ZKPath with no fields set.
func ParseZKPath(path string) ZKPath {
	z := ZKPath{Path: path}
	m := zkPathPattern.FindStringSubmatch(path)
	if m == nil {
		return z
	}
	get := func(name string) *string {
		i := zkPathPattern.SubexpIndex(name)
		if i < 0 || m[i] == "" {
			// Optional groups that did not take part are None in Python; required ones are never empty.
			return nil
		}
		v := m[i]
		return &v
	}
	z.Bzid, z.BaseName, z.IDC, z.Cluster = get("bzid"), get("base_name"), get("idc"), get("cluster")
	z.ServerType, z.Index, z.Replica = get("server_type"), get("index"), get("replica_id")
	return z
}

// Task is "{server_type}:{index}", or nil.
func (z ZKPath) Task() *string {
	if z.ServerType == nil || z.Index == nil {
		return nil
	}
	s := *z.ServerType + ":" + *z.Index
	return &s
}

// Location is "{idc}:{cluster}", or nil.
func (z ZKPath) Location() *string {
	if z.IDC == nil || z.Cluster == nil {
		return nil
	}
	s := *z.IDC + ":" + *z.Cluster
	return &s
}

// ShipIn reports whether the path belongs to idc:cluster; with either unset everything ships.
func (z ZKPath) ShipIn(idc, cluster *string) bool {
	if idc == nil || cluster == nil {
		return true
	}
	return z.IDC != nil && z.Cluster != nil && *idc == *z.IDC && *cluster == *z.Cluster
}

// Attr looks up a part by its reference attribute name (the regexp groups its __getattr__ serves,
// the task and location properties, and path): nil when unset. Any other name is an error of kind
// Precondition, as the reference asserts the name is one of its groups.
func (z ZKPath) Attr(name string) (*string, error) {
	switch name {
	case "bzid":
		return z.Bzid, nil
	case "base_name":
		return z.BaseName, nil
	case "idc":
		return z.IDC, nil
	case "cluster":
		return z.Cluster, nil
	case "server_type":
		return z.ServerType, nil
	case "index":
		return z.Index, nil
	case "replica_id":
		return z.Replica, nil
	case "task":
		return z.Task(), nil
	case "location":
		return z.Location(), nil
	case "path":
		p := z.Path
		return &p, nil
	}
	return nil, errkind.New(errkind.Precondition, "ZKPath has no attribute %q", name)
}
