package zkfake

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monolith-go/monolith/pkg/zk"
)

// firstSession is the id of the first session a Server hands out; ids are never 0 (0 is
// "persistent" in Stat.EphemeralOwner).
const firstSession int64 = 0x1000

// Server is one in-memory ZooKeeper tree. Clients made by Client share it, so a test can model
// several agents (each with its own session, ephemeral nodes and watches). A Server has no
// goroutines and needs no shutdown.
type Server struct {
	mu          sync.Mutex
	root        *node
	zxid        int64
	lastSession int64
	// Watches per watched path, in registration order (which is also their call order).
	dataWatches  map[string][]*watch
	childWatches map[string][]*watch
}

// NewServer returns an empty tree holding only the root "/".
func NewServer() *Server {
	s := &Server{
		lastSession:  firstSession - 1,
		dataWatches:  map[string][]*watch{},
		childWatches: map[string][]*watch{},
	}
	s.root = newNode("/", nil, 0, 0, time.Now().UnixMilli())
	return s
}

// Client opens a new session on the server.
func (s *Server) Client() *Fake {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Fake{server: s, session: s.newSessionLocked(), state: zk.StateConnected, elections: map[int]func(){}}
}

// New returns a client of a new, empty Server: the reference's FakeKazooClient().start().
func New() *Fake { return NewServer().Client() }

func (s *Server) newSessionLocked() int64 {
	s.lastSession++
	return s.lastSession
}

func (s *Server) nextZxidLocked() int64 {
	s.zxid++
	return s.zxid
}

// node is one znode. Its stat is kept up to date on every change.
type node struct {
	path     string
	data     []byte
	stat     zk.Stat
	children map[string]*node
}

func newNode(path string, data []byte, zxid, owner, now int64) *node {
	n := &node{
		path:     path,
		data:     clone(data),
		children: map[string]*node{},
		stat: zk.Stat{
			Czxid: zxid, Mzxid: zxid, Pzxid: zxid,
			Ctime: now, Mtime: now,
			EphemeralOwner: owner,
		},
	}
	n.stat.DataLength = int32(len(n.data))
	return n
}

func (n *node) ephemeral() bool { return n.stat.EphemeralOwner != 0 }

// childNames returns the children's names sorted: a real server lists them in no set order,
// the fake picks one so tests are deterministic.
func (n *node) childNames() []string {
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (n *node) statCopy() *zk.Stat {
	st := n.stat
	return &st
}

// clone copies b, giving a non-nil slice even for empty data: nil means "no node" to watches.
func clone(b []byte) []byte {
	return append([]byte{}, b...)
}

// lookupLocked returns the node at path p (a valid path), or nil.
func (s *Server) lookupLocked(p string) *node {
	n := s.root
	if p == "/" {
		return n
	}
	for _, seg := range splitPath(p) {
		if n = n.children[seg]; n == nil {
			return nil
		}
	}
	return n
}

// splitPath returns the segments of a valid path ("/" has none).
func splitPath(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func childPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
