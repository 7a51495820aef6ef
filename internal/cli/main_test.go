package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mainEnv makes the test binary a command run by Main (TestMain): its value says how.
const mainEnv = "CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if mode := os.Getenv(mainEnv); mode != "" {
		childMain(mode)
		return // not reached: Main exits
	}
	os.Exit(m.Run())
}

// childMain is the command of TestMainProcess: "exit" prints its arguments and stops with status 5;
// "ignore" and "kill" wait for the signal, then wind down until stdin gives a line, and stop with
// status 3.
func childMain(mode string) {
	second := IgnoreSecondSignal
	if mode == "kill" {
		second = KillOnSecondSignal
	}
	Main(second, func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		if mode == "exit" {
			fmt.Fprintln(stdout, "args", strings.Join(args, " "))
			fmt.Fprintln(stderr, "on stderr")
			return 5
		}
		fmt.Fprintln(stdout, "ready")
		<-ctx.Done()
		fmt.Fprintln(stdout, "stopping")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return 3
	})
}

// Main passes the arguments, streams and exit status; a first SIGINT or SIGTERM cancels the
// context, and a second one is ignored or kills the process, as asked.
func TestMainProcess(t *testing.T) {
	const bound = 20 * time.Second // generous: a loaded machine
	for _, tc := range []struct {
		name           string
		mode           string
		first, second  syscall.Signal
		code           int
		killedBy       syscall.Signal
		stdout, stderr string
	}{
		{name: "arguments, streams, status", mode: "exit", code: 5, stdout: "args a --b=c\n", stderr: "on stderr\n"},
		{name: "SIGTERM, a second signal ignored", mode: "ignore", first: syscall.SIGTERM, second: syscall.SIGINT, code: 3,
			stdout: "ready\nstopping\n"},
		{name: "SIGINT, a second signal ignored", mode: "ignore", first: syscall.SIGINT, second: syscall.SIGTERM, code: 3,
			stdout: "ready\nstopping\n"},
		// SIGTERM kills: a shell may start a background job with SIGINT ignored.
		{name: "SIGINT, a second signal kills", mode: "kill", first: syscall.SIGINT, second: syscall.SIGTERM, killedBy: syscall.SIGTERM,
			stdout: "ready\nstopping\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "a", "--b=c")
			cmd.Env = append(os.Environ(), mainEnv+"="+tc.mode)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			pr, pw := io.Pipe()
			var stdout, stderr bytes.Buffer
			cmd.Stdout = io.MultiWriter(&stdout, pw)
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := make(chan string, 16)
			go func() {
				defer close(lines)
				s := bufio.NewScanner(pr)
				for s.Scan() {
					lines <- s.Text()
				}
			}()
			// exited is closed once the command has ended and waitErr is its Wait's error.
			exited := make(chan struct{})
			var waitErr error
			go func() {
				waitErr = cmd.Wait()
				pw.Close()
				close(exited)
			}()
			defer func() {
				select {
				case <-exited:
				default:
					cmd.Process.Kill()
					<-exited
				}
			}()
			await := func(want string) {
				t.Helper()
				select {
				case got := <-lines:
					if got != want {
						t.Fatalf("line %q, want %q", got, want)
					}
				case <-time.After(bound):
					t.Fatalf("no %q after %v", want, bound)
				}
			}
			signal := func(s syscall.Signal) {
				t.Helper()
				if err := cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
			}

			switch tc.mode {
			case "exit":
				wait(t, exited, bound)
			case "ignore":
				await("ready")
				signal(tc.first)
				await("stopping")
				// Signal for a while: a Main that let a second signal kill would have done so by
				// the end (it restores the default action right after the first).
				for range 10 {
					if cmd.Process.Signal(tc.second) != nil {
						break // ended: the status says how
					}
					time.Sleep(30 * time.Millisecond)
				}
				io.WriteString(stdin, "done\n")
				wait(t, exited, bound)
			case "kill":
				await("ready")
				signal(tc.first)
				await("stopping")
				// Main restores the default action right after the first signal, concurrently
				// with the command's wind-down: signal until that has happened.
				deadline := time.After(bound)
			loop:
				for {
					signal(tc.second)
					select {
					case <-exited:
						break loop
					case <-deadline:
						t.Fatalf("still running %v after the second signal", bound)
					case <-time.After(50 * time.Millisecond):
					}
				}
			}

			var exit *exec.ExitError
			if !errors.As(waitErr, &exit) && waitErr != nil {
				t.Fatal(waitErr)
			}
			status := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tc.killedBy != 0 {
				if !status.Signaled() || status.Signal() != tc.killedBy {
					t.Errorf("status %v, want killed by %v", cmd.ProcessState, tc.killedBy)
				}
			} else if status.Signaled() || status.ExitStatus() != tc.code {
				t.Errorf("status %v, want exit status %d", cmd.ProcessState, tc.code)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
		})
	}
}

// wait waits for the command's end, within bound.
func wait(t *testing.T, exited <-chan struct{}, bound time.Duration) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(bound):
		t.Fatalf("the command did not stop within %v", bound)
	}
}
