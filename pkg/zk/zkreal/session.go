package zkreal

import "sync"

// credentials are the session id and password of the current session, read off the wire: the
// library keeps the password private, and fault tests (and operators' tooling) need both to
// address the session.
type credentials struct {
	mu     sync.Mutex
	id     int64
	passwd []byte
}

func (c *credentials) set(id int64, passwd []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id, c.passwd = id, append([]byte(nil), passwd...)
}

func (c *credentials) get() (int64, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id, append([]byte(nil), c.passwd...)
}
