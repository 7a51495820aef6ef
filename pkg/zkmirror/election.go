package zkmirror

import (
	"context"
	"errors"
	"time"

	"github.com/monolith-go/monolith/pkg/agentconf"
	"github.com/monolith-go/monolith/pkg/errkind"
	"github.com/monolith-go/monolith/pkg/zk"
)

// Election runs for leader under /{bzid}/election in the background and calls leader while this
// mirror leads (IsLeader is true meanwhile). leader's context ends when leadership is lost or
// the mirror stops; leader must then return. An entry deployment never leads: Election does
// nothing for it. identifier ("" for MY_POD_NAME) is stored in the contender's node.
//
// When the election fails (the session expired: the contender's node is gone), it runs again
// after ElectionRetryDelay, once the client is usable; the reference restarted the whole mirror
// instead, which the watches' resync makes unnecessary here. It ends with the mirror (Stop) or
// when the client is closed.
func (m *Mirror) Election(identifier string, leader func(ctx context.Context)) error {
	if leader == nil {
		return errkind.New(errkind.Value, "zkmirror: election: nil leader function")
	}
	if m.deployType == agentconf.ServerEntry {
		m.log.Info("entry cannot be leader!")
		return nil
	}
	if identifier == "" {
		identifier, _ = m.env("MY_POD_NAME")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return ErrStopped
	}
	el := m.zk.Election(m.electionPath, identifier)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.runElection(el, leader)
	}()
	return nil
}

func (m *Mirror) runElection(el zk.Election, leader func(ctx context.Context)) {
	for {
		err := el.Run(m.ctx, func(ctx context.Context) {
			m.isLeader.Store(true)
			defer m.isLeader.Store(false)
			leader(ctx)
		})
		switch {
		case m.ctx.Err() != nil:
			return
		case err == nil:
			return // the leader function returned: the reference's election ends there too
		case errors.Is(err, zk.ErrClosed):
			m.log.Info("election: the client is closed")
			return
		}
		m.log.Info("election failed, running again", "err", err)
		t := time.NewTimer(m.retryDelay)
		select {
		case <-t.C:
		case <-m.ctx.Done():
			t.Stop()
			return
		}
	}
}
