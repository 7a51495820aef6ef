package zk

// Stat is a node's metadata, ZooKeeper's Stat structure (kazoo's ZnodeStat). Times are
// milliseconds since the Unix epoch, as the server reports them.
type Stat struct {
	Czxid          int64 // zxid of the change that created the node
	Mzxid          int64 // zxid of the last data change
	Ctime          int64 // creation time, ms
	Mtime          int64 // last data change time, ms
	Version        int32 // number of data changes
	CVersion       int32 // number of child changes (a child created or deleted)
	AVersion       int32 // number of ACL changes
	EphemeralOwner int64 // session id of the owner of an ephemeral node, 0 otherwise
	DataLength     int32 // len(data)
	NumChildren    int32 // number of children
	Pzxid          int64 // zxid of the last child change
}
