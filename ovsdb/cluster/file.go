package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/govn/govn/ovsdb/storage"
)

// magic begins every record of a clustered database file.
const magic = "GOVN RAFT "

// IsClusterFile reports whether the file at path is a clustered database
// file of govn's (one that create-cluster or join-cluster wrote).
func IsClusterFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(magic))
	_, err = io.ReadFull(f, b)
	return err == nil && string(b) == magic
}

// record is one record of the file. Type says which fields are set:
//
//	hdr   the first: Name, SID, Local, Remotes (join-cluster), CID (create-cluster)
//	set   a stable key (raft's term and vote, the cluster id): Key, Val
//	log   log entries, appended with one write and fsync: Entries
//	trunc log entries from From on deleted (a leader overwrote them)
//	snap  a snapshot, replacing the one before: Snap
type record struct {
	Type    string      `json:"t"`
	Name    string      `json:"name,omitempty"`
	SID     string      `json:"sid,omitempty"`
	CID     string      `json:"cid,omitempty"`
	Local   string      `json:"local,omitempty"`
	Remotes []string    `json:"remotes,omitempty"`
	Key     string      `json:"k,omitempty"`
	Val     []byte      `json:"v,omitempty"`
	Entries []entry     `json:"e,omitempty"`
	Commit  uint64      `json:"c,omitempty"` // log: raft's commit index when written
	From    uint64      `json:"from,omitempty"`
	Snap    *snapRecord `json:"snap,omitempty"`
}

// entry is a raft log entry as stored.
type entry struct {
	Index uint64    `json:"i"`
	Term  uint64    `json:"t"`
	Type  uint8     `json:"y"`
	Data  []byte    `json:"d,omitempty"`
	Ext   []byte    `json:"x,omitempty"`
	At    time.Time `json:"a"`
}

type snapRecord struct {
	Index     uint64    `json:"index"`
	Term      uint64    `json:"term"`
	Version   int       `json:"version"`
	Servers   []member  `json:"servers"`
	ConfIndex uint64    `json:"conf_index"`
	Data      []byte    `json:"data"`
	Created   time.Time `json:"created"`
}

type member struct {
	ID       string `json:"id"`
	Address  string `json:"addr"`
	Suffrage int    `json:"suffrage"`
}

func toServers(c raft.Configuration) []member {
	var out []member
	for _, s := range c.Servers {
		out = append(out, member{ID: string(s.ID), Address: string(s.Address), Suffrage: int(s.Suffrage)})
	}
	return out
}

func fromServers(ss []member) raft.Configuration {
	var c raft.Configuration
	for _, s := range ss {
		c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.Address), Suffrage: raft.ServerSuffrage(s.Suffrage)})
	}
	return c
}

func encodeRecord(b []byte, r *record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding %s record: %w", r.Type, err)
	}
	return frameRecord(b, body), nil
}

// appendLogBody appends the body of a log record of logs with commit
// index commit, as json.Marshal encodes record{Type: "log", Entries:
// toEntries(logs), Commit: commit} but without reflection: each write of
// raft's log is one.
func appendLogBody(b []byte, logs []raft.Log, commit uint64) ([]byte, error) {
	b = append(b, `{"t":"log","e":[`...)
	for i := range logs {
		l := &logs[i]
		if y := l.AppendedAt.Year(); y < 0 || y > 9999 {
			return nil, fmt.Errorf("encoding log record: entry %d appended in year %d", l.Index, y)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"i":`...)
		b = strconv.AppendUint(b, l.Index, 10)
		b = append(b, `,"t":`...)
		b = strconv.AppendUint(b, l.Term, 10)
		b = append(b, `,"y":`...)
		b = strconv.AppendUint(b, uint64(l.Type), 10)
		if len(l.Data) > 0 {
			b = append(b, `,"d":"`...)
			b = base64.StdEncoding.AppendEncode(b, l.Data)
			b = append(b, '"')
		}
		if len(l.Extensions) > 0 {
			b = append(b, `,"x":"`...)
			b = base64.StdEncoding.AppendEncode(b, l.Extensions)
			b = append(b, '"')
		}
		b = append(b, `,"a":"`...)
		b = l.AppendedAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `"}`...)
	}
	b = append(b, ']')
	if commit != 0 {
		b = append(b, `,"c":`...)
		b = strconv.AppendUint(b, commit, 10)
	}
	return append(b, '}'), nil
}

// frameRecord appends a record with body.
func frameRecord(b, body []byte) []byte {
	b = append(b, magic...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(crc32.Checksum(body, castagnoli)), 16)
	b = append(b, '\n')
	b = append(b, body...)
	return append(b, '\n')
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn marks a record cut short or damaged: the end of what a crash
// left intact.
var errTorn = errors.New("torn record")

// readRecord reads one record; io.EOF at a clean end.
func readRecord(r *bufio.Reader) (*record, int64, error) {
	line, err := r.ReadBytes('\n')
	if err == io.EOF && len(line) == 0 {
		return nil, 0, io.EOF
	}
	if err != nil {
		return nil, 0, errTorn
	}
	rest, ok := bytes.CutPrefix(line[:len(line)-1], []byte(magic))
	if !ok {
		return nil, 0, errTorn
	}
	f := bytes.Fields(rest)
	if len(f) != 2 {
		return nil, 0, errTorn
	}
	n, err1 := strconv.ParseUint(string(f[0]), 10, 31)
	sum, err2 := strconv.ParseUint(string(f[1]), 16, 32)
	if err1 != nil || err2 != nil {
		return nil, 0, errTorn
	}
	body := make([]byte, n+1)
	if _, err := io.ReadFull(r, body); err != nil || body[n] != '\n' {
		return nil, 0, errTorn
	}
	body = body[:n]
	if uint64(crc32.Checksum(body, castagnoli)) != sum {
		return nil, 0, errTorn
	}
	var rec record
	if err := json.Unmarshal(body, &rec); err != nil {
		return nil, 0, errTorn
	}
	return &rec, int64(len(line)) + int64(n) + 1, nil
}

// store is a clustered database file: raft's log, stable and snapshot
// stores in one append-only file, read whole at start and kept in memory.
// Each change is one record, written and fdatasynced before the call returns
// (StoreLogs writes all its entries as one record: one fsync for what the
// leader batched). Deleting the log's head after a snapshot rewrites the
// file with only what is still needed (compaction).
type store struct {
	path   string
	log    *slog.Logger
	unlock func() error

	mu      sync.Mutex
	f       *os.File
	hdr     record
	stable  map[string][]byte
	entries []raft.Log // contiguous, entries[i].Index == first+i
	snap    *snapRecord
	// size is where the next record goes; alloc is the file's size,
	// the space after size allocated ahead and zero (preallocChunk).
	size, alloc int64
	noPrealloc  bool // fallocate failed once: appends only
	failed      error
	// commit is the commit index last written, staged the one to write
	// with the next entries (raft's CommitTrackingLogStore).
	commit, staged uint64

	// deferSync, when it says so, lets StoreLogs return once its entries
	// are written, before they are fsynced: the leader's own entries,
	// whose fsync then overlaps their replication (see Node.complete
	// and durableTransport). syncLoop fsyncs them.
	deferSync func() bool
	// written is the last log index written to the file, durable the
	// last one known fsynced; durableCh is closed and replaced when
	// durable grows. gen changes when the file is truncated or replaced,
	// so that an fsync begun before does not count.
	written, durable uint64
	durableCh        chan struct{}
	gen              uint64
	syncReq          chan struct{}
	closed           bool
	// body and frame are StoreLogs' buffers, reused.
	body, frame []byte
}

// createFile writes a new file holding hdr and, when snap is not nil, a
// first snapshot.
func createFile(path string, hdr record, snap *snapRecord) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s already exists", path)
	}
	unlock, err := storage.Lock(path)
	if err != nil {
		return err
	}
	defer unlock()
	hdr.Type = "hdr"
	b, err := encodeRecord(nil, &hdr)
	if err != nil {
		return err
	}
	if snap != nil {
		// The snapshot's term is the current term.
		if b, err = encodeRecord(b, &record{Type: "set", Key: "CurrentTerm", Val: []byte(strconv.FormatUint(snap.Term, 10))}); err != nil {
			return err
		}
		if b, err = encodeRecord(b, &record{Type: "snap", Snap: snap}); err != nil {
			return err
		}
	}
	return writeAtomic(path, b)
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// openStore reads the file at path, truncating a torn tail.
func openStore(path string, logger *slog.Logger) (*store, error) {
	unlock, err := storage.Lock(path)
	if err != nil {
		return nil, err
	}
	s := &store{path: path, log: logger, unlock: unlock, stable: map[string][]byte{},
		durableCh: make(chan struct{}), syncReq: make(chan struct{}, 1)}
	if err := s.load(); err != nil {
		unlock()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n := len(s.entries); n > 0 {
		s.written = s.entries[n-1].Index
	}
	s.durable = s.written
	go s.syncLoop()
	return s, nil
}

func (s *store) load() error {
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	for n := 0; ; n++ {
		rec, size, err := readRecord(r)
		if err == io.EOF {
			if n == 0 {
				f.Close()
				return errors.New("empty file: not a clustered database file")
			}
			break
		}
		if err != nil {
			if n == 0 {
				f.Close()
				return errors.New("not a clustered database file (no header record)")
			}
			if zero, zerr := zeroTail(f, off); zerr != nil {
				f.Close()
				return zerr
			} else if zero {
				break // space allocated ahead (store.alloc)
			}
			s.log.Warn("truncating a torn record at the end of the clustered database file", "file", s.path, "offset", off)
			if err := f.Truncate(off); err != nil {
				f.Close()
				return fmt.Errorf("truncating torn tail: %w", err)
			}
			break
		}
		if n == 0 && rec.Type != "hdr" {
			f.Close()
			return errors.New("not a clustered database file (no header record)")
		}
		if err := s.replay(rec); err != nil {
			f.Close()
			return fmt.Errorf("record %d: %w", n, err)
		}
		off += size
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.size, s.alloc = f, off, max(off, fi.Size())
	return nil
}

// zeroTail reports whether the file holds only zero bytes from off on:
// space allocated ahead that no record reached yet, not a torn record.
func zeroTail(f *os.File, off int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(buf, off)
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(n)
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading the file's tail: %w", err)
		}
	}
}

// preallocChunk is how much file space the store allocates ahead of its
// records. Writing into allocated space leaves the file's size alone, so
// an fdatasync after it has only the data (and the extents' state) to
// flush, not the size too: measured here, append+fsync 240-290 us,
// write into allocated space+fdatasync 160-185 us.
const preallocChunk = 4 << 20

// fdatasync flushes f's data and what reading it back needs (its
// extents, its size): what a record's durability needs, without its
// times. The file is not closed under it.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Fdatasync(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// replay applies one record to the in-memory state.
func (s *store) replay(rec *record) error {
	switch rec.Type {
	case "hdr":
		s.hdr = *rec
	case "set":
		s.stable[rec.Key] = rec.Val
	case "log":
		s.commit = max(s.commit, rec.Commit)
		for _, e := range rec.Entries {
			l := raft.Log{Index: e.Index, Term: e.Term, Type: raft.LogType(e.Type), Data: e.Data, Extensions: e.Ext, AppendedAt: e.At}
			if err := s.appendMem(l); err != nil {
				return err
			}
		}
	case "trunc":
		s.truncMem(rec.From)
	case "snap":
		if rec.Snap == nil {
			return errors.New("snapshot record without a snapshot")
		}
		s.snap = rec.Snap
	default:
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	return nil
}

func (s *store) first() uint64 {
	if len(s.entries) == 0 {
		return 0
	}
	return s.entries[0].Index
}

func (s *store) appendMem(l raft.Log) error {
	if n := len(s.entries); n > 0 && l.Index != s.entries[n-1].Index+1 {
		if l.Index <= s.entries[n-1].Index {
			s.truncMem(l.Index)
		} else {
			s.entries = nil // a gap: a snapshot was installed
		}
	}
	s.entries = append(s.entries, l)
	return nil
}

func (s *store) truncMem(from uint64) {
	if f := s.first(); len(s.entries) > 0 && from >= f {
		if from-f < uint64(len(s.entries)) {
			clear(s.entries[from-f:])
			s.entries = s.entries[:from-f]
		}
	} else if from < f || from == 0 {
		s.entries = nil
	}
}

// dropHeadMem forgets entries up to and including index.
func (s *store) dropHeadMem(index uint64) {
	f := s.first()
	if len(s.entries) == 0 || index < f {
		return
	}
	k := index - f + 1
	if k >= uint64(len(s.entries)) {
		s.entries = nil
		return
	}
	s.entries = append([]raft.Log(nil), s.entries[k:]...)
}

// writeLocked appends records and fsyncs. Callers hold s.mu.
func (s *store) writeLocked(recs ...*record) error {
	b, err := encodeRecords(recs)
	if err != nil {
		return err
	}
	return s.writeBytesLocked(b)
}

// writeBytesLocked appends framed records and fsyncs. Callers hold s.mu.
func (s *store) writeBytesLocked(b []byte) error {
	if err := s.appendBytesLocked(b); err != nil {
		return err
	}
	if err := fdatasync(s.f); err != nil {
		s.failed = fmt.Errorf("syncing %s: %w", s.path, err)
		return s.failed
	}
	s.setDurableLocked(s.written)
	return nil
}

// appendLocked appends framed records without fsync; syncLoop fsyncs
// them. Callers hold s.mu.
func (s *store) appendLocked(b []byte) error {
	if err := s.appendBytesLocked(b); err != nil {
		return err
	}
	select {
	case s.syncReq <- struct{}{}:
	default: // a request is pending: it covers these too
	}
	return nil
}

func encodeRecords(recs []*record) ([]byte, error) {
	var b []byte
	var err error
	for _, r := range recs {
		if b, err = encodeRecord(b, r); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendBytesLocked writes framed records to the file, without fsync. A
// failed write fails the store. Callers hold s.mu.
func (s *store) appendBytesLocked(b []byte) error {
	if s.failed != nil {
		return s.failed
	}
	if end := s.size + int64(len(b)); end > s.alloc && !s.noPrealloc {
		// Allocated ahead with the size (mode 0), so that the
		// records' fdatasyncs leave the size alone. A file system
		// without fallocate gets appends.
		n := max(preallocChunk, end-s.alloc)
		if err := unix.Fallocate(int(s.f.Fd()), 0, s.alloc, n); err != nil {
			s.log.Info("the clustered database file's space is not allocated ahead", "file", s.path, "err", err)
			s.noPrealloc = true
		} else {
			s.alloc += n
		}
	}
	if _, err := s.f.WriteAt(b, s.size); err != nil {
		s.failed = fmt.Errorf("writing %s: %w", s.path, err)
		return s.failed
	}
	s.size += int64(len(b))
	s.alloc = max(s.alloc, s.size)
	return nil
}

// syncLoop fsyncs what appendLocked wrote, each fsync covering every
// write before it, until the store closes.
func (s *store) syncLoop() {
	for range s.syncReq {
		s.mu.Lock()
		f, upTo, gen := s.f, s.written, s.gen
		if s.closed || s.failed != nil || s.durable >= upTo {
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		err := fdatasync(f)
		s.mu.Lock()
		if gen == s.gen && !s.closed {
			if err != nil {
				s.failed = fmt.Errorf("syncing %s: %w", s.path, err)
				s.log.Error("the clustered database file cannot be synced", "err", err)
				close(s.durableCh) // waiters see s.failed
				s.durableCh = make(chan struct{})
			} else {
				s.setDurableLocked(upTo)
			}
		}
		s.mu.Unlock()
	}
}

func (s *store) setDurableLocked(idx uint64) {
	if idx > s.durable {
		s.durable = idx
		close(s.durableCh)
		s.durableCh = make(chan struct{})
	}
}

// durableIndex is the last log index known to be on this member's disk.
func (s *store) durableIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}

// waitDurable waits until log entry idx is on this member's disk.
func (s *store) waitDurable(ctx context.Context, idx uint64) error {
	for {
		s.mu.Lock()
		d, ch, failed, closed := s.durable, s.durableCh, s.failed, s.closed
		s.mu.Unlock()
		switch {
		case d >= idx:
			return nil
		case failed != nil:
			return failed
		case closed:
			return errors.New("the clustered database file is closed")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// rewriteLocked writes the file anew with what is still needed.
func (s *store) rewriteLocked() error {
	hdr := s.hdr
	b, err := encodeRecord(nil, &hdr)
	if err != nil {
		return err
	}
	for k, v := range s.stable {
		if b, err = encodeRecord(b, &record{Type: "set", Key: k, Val: v}); err != nil {
			return err
		}
	}
	if s.snap != nil {
		if b, err = encodeRecord(b, &record{Type: "snap", Snap: s.snap}); err != nil {
			return err
		}
	}
	if len(s.entries) > 0 {
		if b, err = encodeRecord(b, &record{Type: "log", Entries: toEntries(s.entries), Commit: s.commit}); err != nil {
			return err
		}
	}
	if err := writeAtomic(s.path, b); err != nil {
		s.failed = err
		return err
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		s.failed = err
		return err
	}
	s.f.Close()
	s.f, s.size, s.alloc = f, int64(len(b)), int64(len(b))
	s.gen++
	s.setDurableLocked(s.written)
	return nil
}

func toEntries(logs []raft.Log) []entry {
	out := make([]entry, len(logs))
	for i, l := range logs {
		out[i] = entry{Index: l.Index, Term: l.Term, Type: uint8(l.Type), Data: l.Data, Ext: l.Extensions, At: l.AppendedAt}
	}
	return out
}

func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.syncReq)
	close(s.durableCh)
	s.durableCh = make(chan struct{})
	err := s.f.Close()
	if uerr := s.unlock(); err == nil {
		err = uerr
	}
	return err
}

// header returns the file's header record.
func (s *store) header() record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hdr
}

// FirstIndex, LastIndex, GetLog, StoreLog, StoreLogs and DeleteRange make
// store a raft.LogStore.

func (s *store) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first(), nil
}

func (s *store) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) == 0 {
		return 0, nil
	}
	return s.entries[len(s.entries)-1].Index, nil
}

func (s *store) GetLog(index uint64, l *raft.Log) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.first()
	if len(s.entries) == 0 || index < f || index-f >= uint64(len(s.entries)) {
		return raft.ErrLogNotFound
	}
	*l = s.entries[index-f]
	return nil
}

func (s *store) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := make([]raft.Log, len(logs))
	for i, l := range logs {
		vals[i] = *l
	}
	commit := max(s.commit, s.staged)
	body, err := appendLogBody(s.body[:0], vals, commit)
	if err != nil {
		return err
	}
	s.body = body
	s.frame = frameRecord(s.frame[:0], body)
	// Truncating entries is never deferred: a later fsync would count
	// for the entries the truncation replaced.
	last := vals[len(vals)-1].Index
	overwrite := vals[0].Index <= s.written
	deferred := s.deferSync != nil && s.deferSync() && !overwrite
	if overwrite {
		// An fsync under way counts for the entries replaced, not for
		// these.
		s.gen++
		s.durable = min(s.durable, vals[0].Index-1)
	}
	// written moves before the write: writeLocked counts everything
	// written as durable once it has synced.
	s.written = last
	if deferred {
		err = s.appendLocked(s.frame)
	} else {
		err = s.writeBytesLocked(s.frame)
	}
	if err != nil {
		return err
	}
	if cap(s.frame) > maxKeptBuffer {
		s.body, s.frame = nil, nil // a large batch's: not kept
	}
	s.commit = commit
	for _, l := range vals {
		if err := s.appendMem(l); err != nil {
			return err
		}
	}
	return nil
}

func (s *store) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) == 0 {
		return nil
	}
	first, last := s.first(), s.entries[len(s.entries)-1].Index
	if min > first && max >= last {
		s.gen++
		s.written = min - 1
		if s.durable > s.written {
			s.durable = s.written
		}
		if err := s.writeLocked(&record{Type: "trunc", From: min}); err != nil {
			return err
		}
		s.truncMem(min)
		return nil
	}
	if min <= first {
		s.dropHeadMem(max)
		return s.rewriteLocked()
	}
	return fmt.Errorf("deleting log entries %d-%d from the middle of %d-%d", min, max, first, last)
}

// maxKeptBuffer bounds the buffers StoreLogs keeps for the next write.
const maxKeptBuffer = 1 << 20

// StageCommitIndex and GetCommitIndex make store a
// raft.CommitTrackingLogStore: the commit index goes to the file with the
// next entries, so that at start the entries known committed can be
// applied before a leader is heard from (Node.replayCommitted).
func (s *store) StageCommitIndex(idx uint64) error {
	s.mu.Lock()
	s.staged = max(s.staged, idx)
	s.mu.Unlock()
	return nil
}

func (s *store) GetCommitIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) == 0 {
		return 0, nil
	}
	return min(s.commit, s.entries[len(s.entries)-1].Index), nil
}

// IsMonotonic makes raft delete the whole log after installing a
// snapshot rather than leave a gap in it.
func (s *store) IsMonotonic() bool { return true }

// Set, Get, SetUint64 and GetUint64 make store a raft.StableStore.

func (s *store) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writeLocked(&record{Type: "set", Key: string(key), Val: val}); err != nil {
		return err
	}
	s.stable[string(key)] = append([]byte(nil), val...)
	return nil
}

// errNotFound is what raft expects of a missing stable key.
var errNotFound = errors.New("not found")

func (s *store) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.stable[string(key)]
	if !ok {
		return nil, errNotFound
	}
	return v, nil
}

func (s *store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, strconv.AppendUint(nil, val, 10))
}

func (s *store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(v), 10, 64)
}

// Create, List and Open make store a raft.SnapshotStore that keeps the
// latest snapshot only.

func (s *store) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration, confIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	return &sink{s: s, meta: snapRecord{Index: index, Term: term, Version: int(version), Servers: toServers(conf), ConfIndex: confIndex, Created: time.Now()}}, nil
}

func snapID(r *snapRecord) string { return fmt.Sprintf("%d-%d", r.Term, r.Index) }

func (s *store) List() ([]*raft.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return nil, nil
	}
	return []*raft.SnapshotMeta{metaOf(s.snap)}, nil
}

func metaOf(r *snapRecord) *raft.SnapshotMeta {
	return &raft.SnapshotMeta{Version: raft.SnapshotVersion(r.Version), ID: snapID(r), Index: r.Index, Term: r.Term,
		Configuration: fromServers(r.Servers), ConfigurationIndex: r.ConfIndex, Size: int64(len(r.Data))}
}

func (s *store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil || snapID(s.snap) != id {
		return nil, nil, fmt.Errorf("no snapshot %s", id)
	}
	return metaOf(s.snap), io.NopCloser(bytes.NewReader(s.snap.Data)), nil
}

// sink collects a snapshot and writes it to the file on Close.
type sink struct {
	s    *store
	meta snapRecord
	buf  bytes.Buffer
	done bool
}

func (k *sink) Write(p []byte) (int, error) { return k.buf.Write(p) }
func (k *sink) ID() string                  { return snapID(&k.meta) }
func (k *sink) Cancel() error               { k.done = true; return nil }

func (k *sink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	k.meta.Data = k.buf.Bytes()
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	meta := k.meta
	if s.snap != nil && s.snap.Index > meta.Index {
		return nil // an older snapshot than the one kept
	}
	s.snap = &meta
	// The file is rewritten with the snapshot (and without what it
	// covers, once raft deletes those entries); until then, it is
	// appended.
	return s.writeLocked(&record{Type: "snap", Snap: &meta})
}

// Info is what a clustered database file says of itself, read without
// running it (govn db db-cid, db-sid, db-name, db-local-address).
type Info struct {
	Name  string
	SID   string
	CID   string // "" until a joining server has joined
	Local string
}

// ReadInfo reads the header (and a joined server's cluster id) of the
// clustered database file at path, without locking it.
func ReadInfo(path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	var info Info
	for n := 0; ; n++ {
		rec, _, err := readRecord(r)
		if err != nil {
			if n == 0 {
				return Info{}, fmt.Errorf("%s: not a clustered database file", path)
			}
			return info, nil // the end, or a torn tail
		}
		switch {
		case n == 0 && rec.Type != "hdr":
			return Info{}, fmt.Errorf("%s: not a clustered database file", path)
		case n == 0:
			info = Info{Name: rec.Name, SID: rec.SID, CID: rec.CID, Local: rec.Local}
		case rec.Type == "set" && rec.Key == cidKey:
			info.CID = string(rec.Val)
		}
	}
}
