package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A pidfile, as Open vSwitch daemons keep one, is more than a number in a
// file: the daemon holds an fcntl write lock on the whole file for as long
// as it runs. The lock, not the number, says whether the daemon lives, and
// ovs-appctl -t NAME (which reads $OVS_RUNDIR/NAME.pid to find the control
// socket NAME.PID.ctl) only trusts a pidfile whose lock is held by the
// process the file names. So the lock must be a traditional (per-process)
// fcntl record lock: an open-file-description lock reports no owner pid and
// ovs-appctl takes such a file for stale.
//
// Traditional locks have two properties callers must mind. The kernel drops
// them when the process closes any descriptor of the file, so a process
// must not open the pidfile it holds (ReadPidfile does); and they never
// conflict within one process, so one process cannot tell its own pidfile
// from a stale one. Neither matters to a daemon holding one pidfile.

// Pidfile is a pidfile this process created and holds locked.
type Pidfile struct {
	path string
	f    *os.File
}

// RunningError is CreatePidfile's error when the pidfile is held by a live
// process.
type RunningError struct {
	Path string
	PID  int
}

func (e *RunningError) Error() string {
	return fmt.Sprintf("%s: already running as pid %d, aborting", e.Path, e.PID)
}

// ErrStale is ReadPidfile's error for a pidfile that no live process holds.
var ErrStale = errors.New("pidfile is stale: no process holds its lock")

// CreatePidfile writes this process's id to path and locks it. A pidfile
// that a live process holds is a *RunningError, unless overwrite (OVS'
// --overwrite-pidfile) is set; a stale one is replaced.
//
// The new file is written and locked under a temporary name and then
// linked into place, so that a reader never sees it empty or unlocked.
func CreatePidfile(path string, overwrite bool) (*Pidfile, error) {
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pidfile: removing %s: %w", tmp, err)
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pidfile: %w", err)
	}
	p := &Pidfile{path: path, f: f}
	fail := func(err error) (*Pidfile, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if err := lockWrite(f, unix.F_SETLK); err != nil {
		return fail(fmt.Errorf("pidfile: locking %s: %w", tmp, err))
	}
	if _, err := fmt.Fprintf(f, "%d\n", os.Getpid()); err != nil {
		return fail(fmt.Errorf("pidfile: writing %s: %w", tmp, err))
	}
	if overwrite {
		if err := os.Rename(tmp, path); err != nil {
			return fail(fmt.Errorf("pidfile: %w", err))
		}
		return p, nil
	}
	// Each round either links the file into place or removes a stale
	// pidfile that was in the way; a racing daemon may take the place
	// in between, which the next round reports.
	for range 3 {
		err := os.Link(tmp, path)
		if err == nil {
			os.Remove(tmp)
			return p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fail(fmt.Errorf("pidfile: %w", err))
		}
		if err := removeIfStale(path); err != nil {
			return fail(err)
		}
	}
	return fail(fmt.Errorf("pidfile: %s: kept reappearing while replacing a stale pidfile", path))
}

// Path is the pidfile's name.
func (p *Pidfile) Path() string { return p.path }

// Remove deletes the pidfile and releases its lock, at a clean exit. It is
// safe to call more than once.
func (p *Pidfile) Remove() error {
	if p == nil || p.f == nil {
		return nil
	}
	defer func() { p.f.Close(); p.f = nil }()
	// Unlink while still locked, and only our own file: one that
	// --overwrite-pidfile put in its place belongs to another daemon.
	same, err := isFileAt(p.f, p.path)
	if err != nil || !same {
		return err
	}
	if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pidfile: %w", err)
	}
	return nil
}

// removeIfStale removes path if no live process holds it, and returns a
// *RunningError if one does.
func removeIfStale(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // gone already: link again
	}
	if err != nil {
		return fmt.Errorf("pidfile: %w", err)
	}
	defer f.Close()
	if err := lockWrite(f, unix.F_SETLK); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return runningError(path, f)
		}
		return fmt.Errorf("pidfile: locking %s: %w", path, err)
	}
	// Locked, so no daemon holds this file. Remove it only if it is
	// still the file at path: a daemon that removed it before we locked
	// it may have linked its own pidfile there since.
	same, err := isFileAt(f, path)
	if err != nil || !same {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pidfile: removing stale %s: %w", path, err)
	}
	return nil
}

// runningError names the process holding f's lock.
func runningError(path string, f *os.File) error {
	pid, err := lockHolder(f)
	if err != nil {
		return fmt.Errorf("pidfile: %s: %w", path, err)
	}
	if pid <= 0 {
		// An open-file-description lock has no owner; say what the
		// file says.
		pid, _ = readPID(f)
	}
	return &RunningError{Path: path, PID: pid}
}

// ReadPidfile returns the id of the live process that holds the pidfile at
// path, or ErrStale (wrapped) when none does. The process whose lock says
// it holds the file must be the one the file names, as ovs-appctl checks.
// A process must not read a pidfile it holds itself (see above).
func ReadPidfile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("pidfile: %w", err)
	}
	defer f.Close()
	holder, err := lockHolder(f)
	if err != nil {
		return 0, fmt.Errorf("pidfile: %s: %w", path, err)
	}
	if holder == 0 {
		return 0, fmt.Errorf("%s: %w", path, ErrStale)
	}
	pid, err := readPID(f)
	if err != nil {
		return 0, fmt.Errorf("pidfile: %s: %w", path, err)
	}
	if pid != holder {
		return 0, fmt.Errorf("%s: names pid %d but pid %d holds its lock: %w", path, pid, holder, ErrStale)
	}
	return pid, nil
}

// lockHolder returns the pid of a process holding a lock that conflicts
// with a write lock on all of f, 0 when there is none, or -1 for an
// open-file-description lock.
func lockHolder(f *os.File) (int, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return 0, fmt.Errorf("querying lock: %w", err)
	}
	if lk.Type == unix.F_UNLCK {
		return 0, nil
	}
	return int(lk.Pid), nil
}

// lockWrite takes a write lock on all of f (cmd F_SETLK: fail at once).
func lockWrite(f *os.File, cmd int) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	return unix.FcntlFlock(f.Fd(), cmd, &lk)
}

// readPID reads the decimal process id a pidfile holds.
func readPID(f *os.File) (int, error) {
	b := make([]byte, 32)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("reading: %w", err)
	}
	return parsePID(b[:n])
}

// parsePID parses a pidfile's contents: a positive decimal process id,
// with white space around it.
func parsePID(b []byte) (int, error) {
	text := strings.TrimSpace(string(b))
	pid, err := strconv.Atoi(text)
	if err != nil || pid <= 0 || strings.HasPrefix(text, "+") {
		return 0, fmt.Errorf("no process id in %q", text)
	}
	return pid, nil
}

// isFileAt reports whether path names the same file as f.
func isFileAt(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("pidfile: %w", err)
	}
	pi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfile: %w", err)
	}
	return os.SameFile(fi, pi), nil
}
