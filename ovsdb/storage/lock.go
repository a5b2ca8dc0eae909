package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockPath returns the lock file ovsdb-server and ovsdb-tool use for a
// database file: ".NAME.~lock~" in the same directory.
func lockPath(path string) string {
	dir, name := filepath.Split(path)
	return filepath.Join(dir, "."+name+".~lock~")
}

// lockFile takes an exclusive lock on path's lock file, the same lock the
// real ovsdb-server and ovsdb-tool take (a POSIX record lock over the whole
// lock file). It uses an open-file-description lock, which conflicts with
// theirs and also with a second Log in this process.
func lockFile(path string) (*os.File, error) {
	lp := lockPath(path)
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%s is in use by another process (lock %s is held)", path, lp)
		}
		return nil, fmt.Errorf("lock %s: %w", lp, err)
	}
	return f, nil
}

// unlockFile releases a lock that lockFile took and closes its file. The
// lock is released explicitly, not by the close alone: a child process
// forked meanwhile (by an exec elsewhere in the program) holds a copy of
// the descriptor until it execs, and the lock of an open file description
// lives as long as any copy of it, so a close alone could leave the file
// locked for a moment after the Log is gone.
func unlockFile(f *os.File) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: 0, Len: 0}
	uerr := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
	if err := f.Close(); err != nil {
		return err
	}
	return uerr
}

// Lock takes the lock that Open takes for path (".FILE.~lock~" beside
// it), for another kind of file kept there, such as a clustered
// database's (package ovsdb/cluster). The returned function releases it.
func Lock(path string) (unlock func() error, err error) {
	f, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	return func() error { return unlockFile(f) }, nil
}
