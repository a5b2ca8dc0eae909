package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Options tune a Log. The zero value is ready to use.
type Options struct {
	// Logger receives recovery warnings; nil means slog.Default().
	Logger *slog.Logger
	// CompactMinSize is the file size below which ShouldCompact is always
	// false; 0 means 10 MiB.
	CompactMinSize int64
	// CompactGrowth is how many times larger than just after the last
	// compaction (or than the schema alone, for a file never compacted by
	// this Log) the file must be before ShouldCompact says yes; 0 means 4.
	CompactGrowth int64

	// noSync skips fsync, for tests that open thousands of files and check
	// recovery logic rather than the disk.
	noSync bool
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CompactMinSize == 0 {
		o.CompactMinSize = 10 << 20
	}
	if o.CompactGrowth == 0 {
		o.CompactGrowth = 4
	}
	return o
}

// Log is an open standalone database file. See the package documentation
// for the order of calls.
type Log struct {
	path   string
	opts   Options
	lock   *os.File
	schema json.RawMessage
	reader *recordReader // non-nil until Replay has run
	ready  bool          // Replay succeeded and flushLoop runs; set before Submit can see it

	// ioMu is held while bytes go to the file, and while compaction swaps
	// the file, so a write never straddles the swap. Order: ioMu, then mu.
	ioMu sync.Mutex
	file *os.File

	mu       sync.Mutex
	work     *sync.Cond // signalled when pending grows or the log closes
	pending  []byte     // encoded records submitted but not yet written
	batch    *Commit    // the commit all of pending's records share
	spare    []byte     // a recycled buffer for pending
	capture  []byte     // records submitted since a compaction began, or nil
	closed   bool
	failed   error // sticky: once a write or fsync failed, the file is suspect
	size     int64 // bytes in the file, as far as writes completed
	baseSize int64 // size just after the last compaction
	done     chan struct{}
}

// Commit is the durability of one or more submitted records, which share
// one write and fsync (group commit).
type Commit struct {
	done chan struct{}
	err  error
}

// Done is closed once Wait would return without waiting.
func (c *Commit) Done() <-chan struct{} { return c.done }

// Wait returns nil once the record is on disk (written and fsynced), or the
// error that kept it from getting there. If ctx ends first, Wait returns
// ctx's error, and the record may or may not become durable.
func (c *Commit) Wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Create writes a new database file at path that holds only schema (an
// RFC 7047 <database-schema>): an empty database. It fails if path exists.
// The file appears atomically, complete or not at all.
func Create(path string, schema json.RawMessage) error {
	body, err := compactSchema(schema)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("create %s: file exists", path)
	}
	lock, err := lockFile(path)
	if err != nil {
		return err
	}
	defer unlockFile(lock)
	if err := writeFileAtomic(path, encodeRecord(nil, body)); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// compactSchema checks that schema is a JSON object with a name and returns
// it on one line.
func compactSchema(schema json.RawMessage) ([]byte, error) {
	var s struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("schema is not a JSON object: %w", err)
	}
	if s.Name == "" {
		return nil, errors.New(`schema has no "name"`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, schema); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return buf.Bytes(), nil
}

// writeFileAtomic writes data to path through a temporary file, fsyncs it,
// renames it into place and fsyncs the directory, so after a crash path
// holds either its old content or data.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	return commitTemp(f, tmp, path)
}

// commitTemp fsyncs and closes f (the file tmp), renames it to path and
// fsyncs the directory. It removes tmp on failure.
func commitTemp(f *os.File, tmp, path string) error {
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// Open locks the database file at path and reads its schema record. The
// caller then calls Replay once, which reads the transaction records and
// readies the log for Submit. Close releases the lock.
func Open(path string, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		unlockFile(lock)
		return nil, fmt.Errorf("open database: %w", err)
	}
	fail := func(err error) (*Log, error) {
		f.Close()
		unlockFile(lock)
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	rr := newRecordReader(f, st.Size())
	schema, err := rr.next()
	if err == io.EOF {
		return fail(errors.New("empty file, not an OVSDB database"))
	}
	if err != nil {
		return fail(fmt.Errorf("schema record: %w", err))
	}
	l := &Log{
		path:     path,
		opts:     opts,
		lock:     lock,
		schema:   schema,
		reader:   rr,
		file:     f,
		baseSize: rr.offset,
		done:     make(chan struct{}),
	}
	l.work = sync.NewCond(&l.mu)
	return l, nil
}

// Schema returns the database schema, the file's first record.
func (l *Log) Schema() json.RawMessage { return l.schema }

// Path returns the database file's path.
func (l *Log) Path() string { return l.path }

// Replay calls apply with each transaction record in file order. A torn or
// corrupt tail (a record cut short, with a bad header or checksum, or not a
// JSON object) ends the good part of the file: Replay logs a warning and
// truncates the file there. An error from apply, or a record that is
// well-formed on disk but not a transaction record, stops Replay and is
// returned; the Log is then unusable and should be closed.
func (l *Log) Replay(apply func(Record) error) error {
	if l.reader == nil {
		return errors.New("replay: already replayed")
	}
	rr := l.reader
	l.reader = nil
	for n := 1; ; n++ {
		body, err := rr.next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, ErrCorrupt) {
			removed := rr.remain
			l.opts.Logger.Warn("database file has a torn or corrupt tail; truncating it",
				"file", l.path, "record", n, "offset", rr.offset, "bytes_removed", removed, "reason", err)
			if err := l.file.Truncate(rr.offset); err != nil {
				return fmt.Errorf("replay %s: truncate torn tail: %w", l.path, err)
			}
			if err := l.sync(l.file); err != nil {
				return fmt.Errorf("replay %s: fsync after truncation: %w", l.path, err)
			}
			break
		}
		if err != nil {
			return fmt.Errorf("replay %s: record %d at offset %d: %w", l.path, n, rr.offset, err)
		}
		rec, err := unmarshalRecord(body)
		if err != nil {
			return fmt.Errorf("replay %s: record %d at offset %d: %w", l.path, n, rr.offset-int64(len(body)), err)
		}
		if err := apply(rec); err != nil {
			return fmt.Errorf("replay %s: record %d: %w", l.path, n, err)
		}
	}
	l.mu.Lock()
	l.size = rr.offset
	l.ready = true
	l.mu.Unlock()
	go l.flushLoop()
	return nil
}

// Submit queues rec for the file and returns its Commit, on which the
// caller waits for durability. Records reach the file in the order of their
// Submit calls, so call Submit in commit order (for example while still
// holding the lock that orders transactions) and Wait outside that lock:
// concurrent waiters then share one write and fsync.
func (l *Log) Submit(rec Record) (*Commit, error) {
	return l.submit(rec, true)
}

// SubmitDeferred is Submit for a caller that calls FlushNow next, outside
// its lock: the log's own writer is not woken for the record, so that with
// one committer at a time the committer's goroutine writes, fsyncs and
// replies without handing the work to another thread and back (two
// wake-ups, which cost more than the fsync's own CPU time).
func (l *Log) SubmitDeferred(rec Record) (*Commit, error) {
	return l.submit(rec, false)
}

// FlushNow writes and fsyncs the pending records on the caller's
// goroutine, unless a write is already under way, in which case the log's
// writer takes them. Call it after SubmitDeferred.
func (l *Log) FlushNow() {
	if !l.ioMu.TryLock() {
		l.mu.Lock()
		l.work.Signal()
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	l.flushLocked()
	if len(l.pending) > 0 {
		// Submitted while this flush wrote: the writer takes them.
		l.work.Signal()
	}
	l.mu.Unlock()
	l.ioMu.Unlock()
}

func (l *Log) submit(rec Record, wake bool) (*Commit, error) {
	body, err := marshalRecord(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return nil, errors.New("database log is closed")
	case l.failed != nil:
		return nil, fmt.Errorf("database log failed earlier: %w", l.failed)
	case !l.ready:
		return nil, errors.New("database log: Submit before a successful Replay")
	}
	start := len(l.pending)
	l.pending = encodeRecord(l.pending, body)
	if l.capture != nil {
		l.capture = append(l.capture, l.pending[start:]...)
	}
	if l.batch == nil {
		l.batch = &Commit{done: make(chan struct{})}
		if wake {
			l.work.Signal()
		}
	}
	return l.batch, nil
}

// Append submits rec and waits until it is durable: Submit then Wait.
func (l *Log) Append(ctx context.Context, rec Record) error {
	c, err := l.Submit(rec)
	if err != nil {
		return err
	}
	return c.Wait(ctx)
}

// flushLoop writes pending records, one write and fsync per batch, until
// the log closes.
func (l *Log) flushLoop() {
	defer close(l.done)
	for {
		l.mu.Lock()
		for len(l.pending) == 0 && !l.closed {
			l.work.Wait()
		}
		stop := l.closed && len(l.pending) == 0
		l.mu.Unlock()
		if stop {
			return
		}
		l.ioMu.Lock()
		l.mu.Lock()
		l.flushLocked()
		l.mu.Unlock()
		l.ioMu.Unlock()
	}
}

// flushLocked writes and fsyncs pending and resolves its Commit. Callers
// hold ioMu and mu; mu is released during the write and fsync, so Submit
// goes on filling the next batch meanwhile.
func (l *Log) flushLocked() {
	if len(l.pending) == 0 {
		return
	}
	buf, c := l.pending, l.batch
	l.pending, l.batch = l.spare[:0], nil
	l.mu.Unlock()
	err := l.failed
	if err == nil {
		err = l.writeSync(l.file, buf)
	}
	l.mu.Lock()
	if err != nil && l.failed == nil {
		l.failed = err
		l.opts.Logger.Error("database write failed; refusing further transactions", "file", l.path, "err", err)
	}
	if err == nil {
		l.size += int64(len(buf))
	}
	l.spare = buf
	c.err = err
	close(c.done)
}

func (l *Log) writeSync(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := l.sync(f); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

// sync makes f's appended data durable. fdatasync suffices: it also
// flushes the file size, which reading the data back needs, and skips
// timestamps, which nothing needs.
func (l *Log) sync(f *os.File) error {
	if l.opts.noSync {
		return nil
	}
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// Size returns the bytes in the file, counting completed writes.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// ShouldCompact reports whether the file has grown enough that compacting
// it is worthwhile: larger than Options.CompactMinSize and
// Options.CompactGrowth times its size after the last compaction.
func (l *Log) ShouldCompact() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.capture == nil && l.size > l.opts.CompactMinSize && l.size > l.opts.CompactGrowth*l.baseSize
}

// Close waits for submitted records to be written, then closes the file
// and releases the lock.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errors.New("database log already closed")
	}
	l.closed = true
	started := l.ready
	l.work.Broadcast()
	l.mu.Unlock()
	if started {
		<-l.done
	}
	err := l.file.Close()
	if lerr := unlockFile(l.lock); err == nil {
		err = lerr
	}
	if err == nil {
		err = l.failed
	}
	return err
}
