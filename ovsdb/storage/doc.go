// Package storage keeps an OVSDB database on disk in the standalone file
// format of ovsdb(5), so the real ovsdb-tool reads govn's files and govn
// reads files ovsdb-server wrote.
//
// # File format
//
// A file is a series of records. Each record is a header line
//
//	OVSDB JSON <length> <sha1>
//
// followed by <length> bytes: one line of JSON text and its LF, whose SHA-1
// (40 hex digits) is <sha1>. The first record is the database schema; each
// later record is one committed transaction: an object mapping table names
// to {row UUID: new column values, or null for a deleted row}, plus "_date"
// (milliseconds since the epoch) and an optional "_comment". Records carry
// column values as json.RawMessage in RFC 7047 notation, so this package
// knows nothing of OVSDB's types: the caller (package ovsdb) encodes and
// decodes them, and leaves out ephemeral columns, which files never hold.
//
// # Contract for a server
//
//	l, err := storage.Open(path, storage.Options{})   // locks ".FILE.~lock~"
//	schema := l.Schema()                              // build the database
//	err = l.Replay(func(r storage.Record) error {...}) // apply each transaction
//	...
//	// commit path, in commit order (under the server's commit lock):
//	c, err := l.Submit(rec)
//	// after releasing the lock, before replying to the client:
//	err = c.Wait(ctx)
//	...
//	if l.ShouldCompact() {
//	        cp, _ := l.StartCompaction()  // under the commit lock, with a snapshot
//	        err = cp.Finish(ctx, snapshotRecord) // outside it; commits go on
//	}
//	l.Close()
//
// Durability: Wait returns nil only after the record is written and
// fsynced. Submit calls that arrive while a write is in progress share the
// next write and fsync (group commit), so throughput grows with the number
// of concurrent committers rather than being bounded by one fsync each.
// A committer may instead call SubmitDeferred under its lock and FlushNow
// after it: when no write is under way, its own goroutine then writes and
// fsyncs, which spares a lone client two thread hand-offs per commit.
// After a failed write or fsync the Log refuses further records: what the
// disk holds is then unknown, and only a restart (which re-reads the file)
// can tell.
//
// Recovery: Replay stops at the first record that is cut short, has a
// malformed header, a SHA-1 mismatch or text that is not a JSON object —
// the torn tail a crash leaves — logs a warning and truncates the file
// there. No acknowledged record is lost, because a record is acknowledged
// only after it and everything before it is on disk. A file whose schema
// record is unreadable is refused, as is a clustered database file.
//
// Compaction: when ShouldCompact says the file has grown enough (by
// default past 10 MiB and 4x its size after the last compaction), the
// server writes a snapshot: schema plus one record inserting every row.
// Finish writes it to FILE.tmp, appends the records submitted since
// StartCompaction, fsyncs, renames over FILE and fsyncs the directory.
//
// Locking: Open and Create take the same lock file as ovsdb-server and
// ovsdb-tool (".FILE.~lock~" beside FILE), so neither two govn servers nor a
// govn server and a real one share a file. ReadFile reads without locking.
//
// govn writes only whole new column values. Files from ovsdb-server 2.15
// and later may hold diff records ("_is_diff": true), which Record.IsDiff
// reports so the caller can apply them as diffs.
package storage
