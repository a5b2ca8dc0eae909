// Package daemon turns a foreground command into a background daemon the
// way Open vSwitch daemons do it with --detach, so that init scripts such as
// ovn-ctl can start govn in place of ovsdb-server.
//
// Go cannot fork a running process, so Detach re-executes the program with
// the same arguments in a new session, its standard streams on /dev/null,
// and a pipe inherited as file descriptor 3. The parent waits on that pipe:
// the child writes "ok" once it is ready to serve (listening, pidfile
// written) and the parent exits 0, or writes its startup error and the
// parent returns that error. A child that dies before either leaves the
// pipe at end of file, which the parent reports as a failure too. This is
// what lets a script run "ovsdb-server --detach ..." and use the database
// on the very next line.
//
// CreatePidfile writes and holds a pidfile the way Open vSwitch daemons do
// (an fcntl lock, which is what tells a live daemon from a stale file; see
// pidfile.go), and LookupUser and Credentials.Drop implement --user.
package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// childEnv marks a re-executed child and names its readiness pipe's fd.
const childEnv = "GOVN_DAEMON_READY_FD"

// readyFD is the descriptor the child inherits the pipe on (ExtraFiles[0]).
const readyFD = 3

// readyWord is what the child writes once it serves.
const readyWord = "ok"

// IsChild reports whether this process is a detached child started by
// Detach. env is the process environment (os.Environ()).
func IsChild(env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, childEnv+"=") {
			return true
		}
	}
	return false
}

// Detach starts exe with args as a detached child and waits until it says
// it is ready. It returns nil once the child serves, or the child's startup
// error. The caller (the parent) should then exit.
func Detach(exe string, args []string, env []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating readiness pipe: %w", err)
	}
	defer r.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	defer null.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(withoutChildEnv(env), fmt.Sprintf("%s=%d", childEnv, readyFD))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close() // only the child holds the write end now
	if err != nil {
		return fmt.Errorf("starting daemon %s: %w", exe, err)
	}
	pid := cmd.Process.Pid
	// The child outlives us; never wait for it, only release it.
	defer cmd.Process.Release()
	msg, _ := io.ReadAll(bufio.NewReader(io.LimitReader(r, 64<<10)))
	text := strings.TrimSpace(string(msg))
	switch {
	case text == readyWord:
		return nil
	case text == "":
		return fmt.Errorf("daemon (pid %d) exited before it was ready", pid)
	default:
		return errors.New(text)
	}
}

func withoutChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, childEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Notifier is the child's end of the readiness handshake. Its zero value
// (and a nil *Notifier) does nothing, for processes that did not detach.
type Notifier struct {
	w *os.File
}

// ChildNotifier returns the readiness notifier of a detached child, or nil
// when env does not mark this process as one.
func ChildNotifier(env []string) *Notifier {
	if !IsChild(env) {
		return nil
	}
	return &Notifier{w: os.NewFile(readyFD, "daemon-ready")}
}

// Ready tells the waiting parent that the daemon serves, so it may exit.
func (n *Notifier) Ready() {
	n.finish(readyWord)
}

// Fail tells the waiting parent the daemon could not start and why; the
// parent prints err and exits non-zero. After Ready it does nothing.
func (n *Notifier) Fail(err error) {
	if err == nil {
		err = errors.New("daemon stopped before it was ready")
	}
	n.finish(err.Error())
}

func (n *Notifier) finish(msg string) {
	if n == nil || n.w == nil {
		return
	}
	// A parent that is gone makes the write fail; nothing else to tell.
	_, _ = io.WriteString(n.w, msg+"\n")
	n.w.Close()
	n.w = nil
}
