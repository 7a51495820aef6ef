package agentv3

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	agentstatus "github.com/monolith-go/monolith/pkg/agent/status"
	"github.com/monolith-go/monolith/pkg/tfs"
)

// superviseTFS restarts TF Serving each time its process exits, until ctx ends
// (Options.TFSRestart): it waits the backoff, makes and starts a new process, which reads the
// model config file, and sends it the current config again.
func (a *Agent) superviseTFS(ctx context.Context) {
	backoff := time.Duration(0)
	started := time.Now()
	for {
		proc := a.TFS()
		exited, waitPoller := a.exitChan(ctx, proc)
		select {
		case <-ctx.Done():
			waitPoller()
			return
		case <-exited:
		}
		waitPoller()
		_, code := proc.Exited()
		if time.Since(started) >= a.opts.TFSRestartBackoffMax {
			backoff = 0 // it ran a good while: not a crash loop
		}
		backoff = a.nextRestartBackoff(backoff)
		exit := fmt.Sprintf("exited with code %d", code)
		if code < 0 {
			exit += " (killed by a signal)"
		}
		a.procMu.Lock()
		a.tfsInfo.Running, a.tfsInfo.LastExit, a.tfsInfo.LastExitAt = false, exit, time.Now()
		a.tfsInfo.NextRestartAt = time.Now().Add(backoff)
		restarts := a.tfsInfo.Restarts
		a.procMu.Unlock()
		a.log.Error("tf serving "+exit+"; restarting it", "restarts", restarts, "restart_in", backoff)
		// What the process that exited holds (its channel, an in-process server) is released.
		if err := proc.Stop(a.opts.TFSStopGrace); err != nil {
			a.log.Warn("release the tf serving process that exited", "err", err)
		}
		for {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			err := a.restartTFS(ctx)
			a.metrics.TFSRestart(err)
			if err == nil {
				break
			}
			backoff = a.nextRestartBackoff(backoff)
			a.procMu.Lock()
			a.tfsInfo.RestartFailures++
			a.tfsInfo.NextRestartAt = time.Now().Add(backoff)
			a.procMu.Unlock()
			a.log.Error("tf serving restart failed; trying again", "err", err, "restart_in", backoff)
		}
		started = time.Now()
		a.procMu.Lock()
		a.tfsInfo.Restarts++
		a.tfsInfo.Running, a.tfsInfo.NextRestartAt = true, time.Time{}
		restarts = a.tfsInfo.Restarts
		a.procMu.Unlock()
		a.log.Info("tf serving restarted", "restarts", restarts)
		if a.reloader != nil {
			a.reloader.resend()
		}
		a.wakeSync()
	}
}

func (a *Agent) nextRestartBackoff(d time.Duration) time.Duration {
	return min(max(2*d, a.opts.TFSRestartBackoff), a.opts.TFSRestartBackoffMax)
}

// restartTFS makes and starts a new TF Serving process and makes it the agent's.
func (a *Agent) restartTFS(ctx context.Context) error {
	p, err := a.newTFS(true)
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		p.Stop(a.opts.TFSStopGrace) // releases what it made
		return fmt.Errorf("agent v3: start tf serving: %w", err)
	}
	a.procMu.Lock()
	a.proc = p
	a.procMu.Unlock()
	return nil
}

// tfsSummary is TF Serving's process for Status.
func (a *Agent) tfsSummary() *agentstatus.TFSSummary {
	a.procMu.Lock()
	defer a.procMu.Unlock()
	s := a.tfsInfo
	return &s
}

// restartPending says why TF Serving is not there while a restart is pending ("" when it runs).
func (a *Agent) restartPending(proc tfs.Process) string {
	if !a.opts.TFSRestart {
		return ""
	}
	exited, code := proc.Exited()
	if !exited {
		return ""
	}
	s := a.tfsSummary()
	msg := fmt.Sprintf("tf serving exited with code %d; restarting it", code)
	if !s.NextRestartAt.IsZero() {
		msg += fmt.Sprintf(" (restart %d due in %v)", s.Restarts+1, max(time.Until(s.NextRestartAt), 0).Round(time.Millisecond))
	}
	return msg
}

// keepPreviousLog renames TF Serving's log file to file+".prev" before a restart (the new process
// truncates file): the log of the process that exited says why. Only a regular file is renamed
// (not /dev/stdout).
func keepPreviousLog(file string, log *slog.Logger) {
	if file == "" {
		return
	}
	if st, err := os.Lstat(file); err != nil || !st.Mode().IsRegular() {
		return
	}
	if err := os.Rename(file, file+".prev"); err != nil {
		log.Warn("keep the log of the tf serving process that exited", "err", err)
	}
}

// resend sends the newest config again (to a restarted TF Serving); nothing before the first.
func (rl *reloader) resend() {
	rl.mu.Lock()
	if rl.pending == nil {
		rl.mu.Unlock()
		return
	}
	rl.gen++
	rl.attempts = 0
	rl.mu.Unlock()
	select {
	case rl.wake <- struct{}{}:
	default:
	}
}
