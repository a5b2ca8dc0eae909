package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Compaction is a compaction in progress: it has marked a point in the
// sequence of submitted records, and Finish replaces the file with the
// schema, a snapshot of the database at that point, and the records
// submitted since.
type Compaction struct {
	l    *Log
	done bool
}

// StartCompaction marks the point the snapshot will describe: the state
// after every record submitted before this call and none after. Call it in
// commit order, like Submit (for example while holding the lock that
// orders transactions, taking an immutable snapshot of the rows at the same
// time), then build the snapshot record and call Finish outside that lock.
// Only one compaction runs at a time.
func (l *Log) StartCompaction() (*Compaction, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, errors.New("database log is closed")
	case l.failed != nil:
		return nil, fmt.Errorf("database log failed earlier: %w", l.failed)
	case !l.ready:
		return nil, errors.New("database log: compaction before a successful Replay")
	case l.capture != nil:
		return nil, errors.New("database log: a compaction is already running")
	}
	l.capture = make([]byte, 0, 4096)
	return &Compaction{l: l}, nil
}

// Abort ends a compaction without changing the file.
func (c *Compaction) Abort() {
	if c.done {
		return
	}
	c.done = true
	c.l.mu.Lock()
	c.l.capture = nil
	c.l.mu.Unlock()
}

// Finish writes the schema and snapshot (a record inserting every row, as
// of StartCompaction) to a temporary file, appends the records submitted
// since StartCompaction, fsyncs it and renames it over the database file,
// then fsyncs the directory. A crash at any moment leaves either the old
// file or the new one, each complete. Records submitted during Finish wait
// for it only at the very end, for the time of one small write and rename.
func (c *Compaction) Finish(ctx context.Context, snapshot Record) error {
	if c.done {
		return errors.New("compaction already finished")
	}
	l := c.l
	defer c.Abort()
	if snapshot.IsDiff {
		return errors.New("compaction snapshot must hold whole rows, not diffs")
	}
	body, err := marshalRecord(snapshot)
	if err != nil {
		return fmt.Errorf("compact: encode snapshot: %w", err)
	}
	data := encodeRecord(nil, l.schema)
	data = encodeRecord(data, body)
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	abandon := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact %s: %w", l.path, err)
	}
	if _, err := f.Write(data); err != nil {
		return abandon(err)
	}
	if err := f.Sync(); err != nil {
		return abandon(err)
	}
	if err := ctx.Err(); err != nil {
		return abandon(err)
	}

	// Stop the flusher and Submit, bring the old file up to date so every
	// captured record is durable there, then move the capture over and swap.
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.pending) > 0 && l.failed == nil {
		l.flushLocked() // unlocks mu while writing; loop until nothing is left
	}
	if l.failed != nil {
		return abandon(fmt.Errorf("database log failed: %w", l.failed))
	}
	if _, err := f.Write(l.capture); err != nil {
		return abandon(err)
	}
	size := int64(len(data) + len(l.capture))
	// A new handle for the compacted file, opened before the rename so the
	// swap cannot fail halfway.
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return abandon(err)
	}
	if err := f.Sync(); err != nil {
		nf.Close()
		return abandon(err)
	}
	if err := f.Close(); err != nil {
		nf.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact %s: %w", l.path, err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		nf.Close()
		os.Remove(tmp)
		return fmt.Errorf("compact %s: %w", l.path, err)
	}
	// From here on the new file is the database, whatever else fails.
	old := l.file
	l.file = nf
	l.size = size
	l.baseSize = size
	old.Close()
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		l.failed = err
		return fmt.Errorf("compact %s: %w", l.path, err)
	}
	return nil
}

// Compact replaces the file with the schema and snapshot, which must
// describe the database after every record submitted so far; the caller
// submits nothing until Compact returns. StartCompaction and Finish allow
// commits to continue meanwhile.
func (l *Log) Compact(ctx context.Context, snapshot Record) error {
	c, err := l.StartCompaction()
	if err != nil {
		return err
	}
	return c.Finish(ctx, snapshot)
}
