package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/storage"
)

// This file implements online schema conversion, the "convert" method of
// ovsdb-server(7) §4.1.19 that "ovsdb-client convert" (and so ovn-ctl on an
// upgrade) sends. A successful conversion
//
//   - replaces the database's contents and schema at once (under the
//     database's lock, so no transaction sees a mix),
//   - rewrites the database file as the new schema and a snapshot of the
//     converted rows, so a restart and the real ovsdb-tool see it,
//   - cancels the database's monitors (db_change_aware sessions get a
//     "monitor_canceled" notification) and its transactions blocked in
//     "wait" (they get a "canceled" error),
//   - changes the database's schema in _Server.Database,
//   - replies {} and then disconnects every session that did not ask for
//     set_db_change_aware, as ovsdb-server does after a conversion, so
//     that they learn the new schema when they reconnect.

// convert serves the "convert" request: params [db-name, schema].
func (s *session) convert(id json.RawMessage, params []any) {
	if len(params) != 2 {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "convert takes 2 parameters: database name and schema"))
		return
	}
	name, ok := params[0].(string)
	if !ok {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "database name must be a string"))
		return
	}
	text, err := json.Marshal(params[1])
	if err != nil {
		s.replyError(id, errorJSON(ovsdb.ErrSyntax, "schema: %v", err))
		return
	}
	if err := s.srv.ConvertDatabase(s.conn.Context(), name, text); err != nil {
		s.replyError(id, toErrJSON(err))
		return
	}
	s.conn.Reply(id, json.RawMessage("{}"))
	s.srv.disconnectUnaware()
}

// setDBChangeAware serves "set_db_change_aware": params [boolean].
func (s *session) setDBChangeAware(id json.RawMessage, params []any) {
	var aware, ok bool
	if len(params) == 1 {
		aware, ok = params[0].(bool)
	}
	if !ok {
		s.replyError(id, errorAtJSON(params, ovsdb.ErrSyntax, "set_db_change_aware: true or false parameter expected"))
		return
	}
	s.mu.Lock()
	s.changeAware = aware
	s.mu.Unlock()
	s.conn.Reply(id, json.RawMessage("{}"))
}

// ConvertDatabase converts the served database name to the schema text
// (see ovsdb.Database.Convert), rewrites its file when it has one, and
// cancels its monitors and waiting transactions. It does not disconnect
// sessions; the "convert" method does that after replying. On error
// nothing has changed, except when the file was replaced but could not be
// reopened: then the database is converted and every later commit fails.
// Errors are *ovsdb.Error values fit for a reply.
func (s *Server) ConvertDatabase(ctx context.Context, name string, text []byte) error {
	d := s.database(name)
	if d == nil {
		return ovsdb.Errorf(ovsdb.ErrUnknownDatabase, "%s", name)
	}
	if d == s.server {
		return ovsdb.Errorf(ovsdb.ErrPermission, "the %s database cannot be converted", serverDBName)
	}
	d.mu.Lock()
	clustered := d.repl != nil
	d.unlock()
	if clustered {
		return ovsdb.Errorf("not supported", "converting the clustered database %s is not supported yet", name)
	}
	ns, err := ovsdb.ParseSchema(text)
	if err != nil {
		return ovsdb.Errorf(ovsdb.ErrSyntax, "%v", err)
	}
	if ns.Name != name {
		return ovsdb.Errorf("invalid parameters", "new schema name (%s) does not match database name (%s)", ns.Name, name)
	}

	d.mu.Lock()
	// No compaction may run meanwhile: it would write the old rows under
	// the old schema over the converted file. Holding the compaction slot
	// keeps new ones from starting.
	slot, err := d.holdCompactionLocked(ctx)
	if err != nil {
		d.unlock()
		return ovsdb.Errorf(ovsdb.ErrIOError, "%v", err)
	}
	if slot != nil {
		defer slot.Abort()
	}
	nd, err := d.db.Convert(ns)
	if err != nil {
		d.unlock()
		var oe *ovsdb.Error
		if errors.As(err, &oe) {
			return ovsdb.Errorf(oe.Tag, "%v", err)
		}
		return ovsdb.Errorf(ovsdb.ErrConstraintViolation, "%v", err)
	}
	if d.log != nil {
		nl, converted, err := rewriteLog(ctx, d.log, nd)
		if nl != nil {
			d.log = nl
		}
		if !converted {
			d.unlock()
			return ovsdb.Errorf(ovsdb.ErrIOError, "%v", err)
		}
		if err != nil {
			s.log.Error("converted database file could not be reopened; commits will fail", "db", name, "err", err)
		}
	}
	canceled := d.replaceLocked(nd)
	d.unlock()
	for _, c := range canceled {
		c.sess.conn.Notify("monitor_canceled", []json.RawMessage{c.id})
	}
	if err := s.setServerSchema(name, ns); err != nil {
		s.log.Error("updating _Server after conversion", "db", name, "err", err)
	}
	s.log.Info("converted database", "db", name, "version", ns.Version)
	return nil
}

// canceledMonitor is a monitor a conversion canceled, to tell its session.
type canceledMonitor struct {
	sess *session
	id   json.RawMessage
}

// replaceLocked makes nd the database's contents: it cancels monitors
// (returning those whose sessions are db_change_aware, to be notified
// outside the lock) and blocked transactions, and forgets the history,
// whose changes belong to the old schema. Callers hold d.mu.
func (d *dbState) replaceLocked(nd *ovsdb.Database) []canceledMonitor {
	var canceled []canceledMonitor
	for m := range d.monitors {
		delete(d.monitors, m)
		d.monitorsChangedLocked()
		d.unwatchLocked(m)
		if m.sess == nil {
			continue
		}
		m.sess.mu.Lock()
		key := string(m.id)
		if m.sess.monitors[key] == m {
			delete(m.sess.monitors, key)
		}
		aware := m.sess.changeAware
		m.sess.mu.Unlock()
		if aware {
			canceled = append(canceled, canceledMonitor{m.sess, m.id})
		}
	}
	for _, b := range d.blocked {
		if b.done {
			continue
		}
		b.done = true
		if b.timer != nil {
			b.timer.Stop()
		}
		b.sess.mu.Lock()
		b.sess.removePendingLocked(b)
		b.sess.mu.Unlock()
		b.sess.conn.ReplyError(b.id, errorJSON(ovsdb.ErrCanceled, "database %s was converted to a new schema", d.name))
	}
	d.blocked = nil
	d.db = nd
	clear(d.history)
	d.history = nil
	d.historyRows = 0
	d.lastTxn = d.uuids.New()
	return canceled
}

// holdCompactionLocked takes the database log's compaction slot, waiting
// (with d.mu released) while a compaction runs, for up to a minute. It
// returns nil when the log does not compact. Callers hold d.mu, and hold
// it again on return.
func (d *dbState) holdCompactionLocked(ctx context.Context) (*storage.Compaction, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		cp, ok := d.log.(Compactor)
		if !ok {
			return nil, nil
		}
		c, err := cp.StartCompaction()
		if err == nil {
			return c, nil
		}
		// Only a running compaction passes; storage says so in words
		// alone (closed or failed logs fail the conversion at once).
		if !strings.Contains(err.Error(), "already running") || time.Now().After(deadline) {
			return nil, fmt.Errorf("database log: %w", err)
		}
		d.unlock()
		select {
		case <-ctx.Done():
			d.mu.Lock()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		d.mu.Lock()
	}
}

// failedLog refuses every commit: it stands in for a database file that
// could not be reopened after a conversion closed it.
type failedLog struct{ err error }

func (f failedLog) Submit(storage.Record) (*storage.Commit, error) { return nil, f.err }

// rewriteLog replaces the file behind old with the new schema and a
// snapshot of db. It returns the Log to commit to from now on (nil: keep
// old) and whether the file now holds the converted database. The new file
// is written and synced beside the old one first, so most failures leave
// everything as it was; a file that cannot be reopened afterwards leaves a
// failedLog.
func rewriteLog(ctx context.Context, old Log, db *ovsdb.Database) (Log, bool, error) {
	ol, ok := old.(*storage.Log)
	if !ok {
		return nil, false, fmt.Errorf("database log %T cannot change its schema", old)
	}
	path := ol.Path()
	tmp := path + ".convert"
	if err := writeDatabaseFile(ctx, tmp, db); err != nil {
		return nil, false, err
	}
	// Closing waits until every earlier commit is on disk in the old file.
	// (The caller's compaction slot on ol is released by Close.)
	cerr := ol.Close()
	if cerr == nil {
		cerr = os.Rename(tmp, path)
	}
	if cerr != nil {
		os.Remove(tmp)
		if l, err := reopen(path); err == nil {
			return l, false, fmt.Errorf("replacing %s: %w", path, cerr)
		}
		return failedLog{cerr}, false, fmt.Errorf("replacing %s: %w", path, cerr)
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		dir.Sync()
		dir.Close()
	}
	nl, err := reopen(path)
	if err != nil {
		return failedLog{err}, true, err
	}
	return nl, true, nil
}

// reopen opens the database file at path for appending, skipping its
// records (their contents are already in memory).
func reopen(path string) (*storage.Log, error) {
	l, err := storage.Open(path, storage.Options{})
	if err != nil {
		return nil, err
	}
	if err := l.Replay(func(storage.Record) error { return nil }); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// writeDatabaseFile writes a new standalone database file at path (which
// must not exist) holding db's schema and one record with all its rows,
// synced to disk.
func writeDatabaseFile(ctx context.Context, path string, db *ovsdb.Database) error {
	os.Remove(path)
	if err := storage.Create(path, db.Schema.JSON()); err != nil {
		return err
	}
	l, err := reopen(path)
	if err != nil {
		os.Remove(path)
		return err
	}
	err = l.Append(ctx, snapshotRecord(db))
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	removeLockFile(path)
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// removeLockFile removes the lock file storage leaves beside a database
// file (".NAME.~lock~", as ovsdb-server names it).
func removeLockFile(path string) {
	dir, name := filepath.Split(path)
	os.Remove(filepath.Join(dir, "."+name+".~lock~"))
}

// snapshotRecord is a storage record inserting every row of db.
func snapshotRecord(db *ovsdb.Database) storage.Record {
	cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{}}
	for _, tn := range db.Schema.TableNames {
		rows := map[ovsdb.UUID]*ovsdb.RowChange{}
		for u, r := range db.Table(tn).Rows {
			rows[u] = &ovsdb.RowChange{New: r}
		}
		cs.Tables[tn] = rows
	}
	return storage.Record{Date: time.Now(), Tables: cs.Record(db.Schema)}
}

// setServerSchema records the new schema of database name in
// _Server.Database, which db_change_aware clients monitor.
func (s *Server) setServerSchema(name string, ns *ovsdb.Schema) error {
	srv := s.server
	ts := srv.db.Schema.Table("Database")
	nameCol, schemaCol := ts.Column("name"), ts.Column("schema")
	srv.mu.Lock()
	defer srv.unlock()
	for u, r := range srv.db.Table("Database").Rows {
		if !r.Get(nameCol).Equal(ovsdb.Scalar(ovsdb.String(name))) {
			continue
		}
		nr := r.Clone()
		nr.Data[schemaCol.Index] = ovsdb.Scalar(ovsdb.String(string(ns.JSON())))
		nr.Version = ovsdb.NewUUID()
		cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{"Database": {u: {Old: r, New: nr}}}}
		_, err := srv.commitLocked(cs)
		return err
	}
	return fmt.Errorf("no _Server.Database row for %s", name)
}

// disconnectUnaware closes every session that is not db_change_aware, as
// ovsdb-server does after a schema conversion. Closing flushes what was
// already queued, such as the reply to the "convert" request itself.
func (s *Server) disconnectUnaware() {
	s.sessMu.Lock()
	var unaware []*session
	for sess := range s.sessions {
		sess.mu.Lock()
		if !sess.changeAware {
			unaware = append(unaware, sess)
		}
		sess.mu.Unlock()
	}
	s.sessMu.Unlock()
	for _, sess := range unaware {
		// Close waits for the session's reader, which may be the caller.
		go sess.conn.Close()
	}
}

// DatabaseLog returns the Log the served database name commits to, or nil.
// A conversion replaces a database's log (the file is rewritten and
// reopened), so whoever closes logs at shutdown asks here for the current
// one.
func (s *Server) DatabaseLog(name string) Log {
	d := s.database(name)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.unlock()
	return d.log
}

// parsedAgainst reports whether monitor requests were parsed against db's
// current schema; a conversion between parsing (outside the lock) and
// registering would leave them pointing at columns that moved.
func parsedAgainst(tables map[string]*monTable, db *ovsdb.Database) bool {
	for name, mt := range tables {
		if db.Schema.Tables[name] != mt.ts {
			return false
		}
	}
	return true
}

// schemaJSON returns the database's schema document; under the lock, since
// a conversion replaces it.
func (d *dbState) schemaJSON() []byte {
	d.mu.Lock()
	defer d.unlock()
	return d.db.Schema.JSON()
}

// ConvertFile converts the standalone database file at path offline, as
// "ovsdb-tool convert" does: the database, replayed from the file, is
// converted to schema text (see ovsdb.Database.Convert) and written,
// compacted, to target, or over path when target is "". The file stays
// locked meanwhile; on error path is unchanged.
func ConvertFile(ctx context.Context, path, target string, text []byte) error {
	ns, err := ovsdb.ParseSchema(text)
	if err != nil {
		return err
	}
	db, log, err := OpenFile(path, nil)
	if err != nil {
		return err
	}
	defer log.Close()
	nd, err := db.Convert(ns)
	if err != nil {
		return fmt.Errorf("converting %s: %w", path, err)
	}
	if target == "" {
		target = path
	}
	tmp := target + ".convert"
	if err := writeDatabaseFile(ctx, tmp, nd); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replacing %s: %w", target, err)
	}
	if dir, err := os.Open(filepath.Dir(target)); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nil
}

// current returns the database as it is now, for reading its (immutable)
// schema outside the lock; a conversion may replace it at any time after.
func (d *dbState) current() *ovsdb.Database {
	d.mu.Lock()
	defer d.unlock()
	return d.db
}
