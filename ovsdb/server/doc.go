// Package server serves OVSDB databases over JSON-RPC (RFC 7047 and the
// extensions of ovsdb-server(7)) to real OVSDB clients: ovsdb-client, the
// *ctl tools, ovn-northd and anything built on the OVS IDL.
//
// # Structure
//
// A Server holds databases, each a [dbState]: the committed
// [ovsdb.Database], its monitors, a bounded history of recent commits for
// monitor_cond_since, transactions blocked in "wait", and optionally a
// storage log. One mutex per database orders everything that touches it:
// executing a transaction, applying it, queueing the resulting update
// notifications, and submitting its record to the log all happen under it,
// so every client sees commits in one order, and a client's own updates are
// queued before its transact reply (ovsdb-server(7) §4.1.5). Waiting for
// the record to reach the disk happens outside the lock, so concurrent
// commits share fsyncs (group commit); the reply is sent only after.
//
// # Durability and monitors
//
// A transact reply is sent only once its commit is durable (written and
// fdatasynced by the log). Monitors are not held back that long: a
// commit's updates are queued to every monitoring session as soon as it is
// applied in memory and its record submitted to the log, before the fsync
// completes, which is what ovsdb-server does (it does not fsync at all
// unless asked). A crash may therefore lose a commit that monitors have
// seen but whose writer never got a reply. The monitors converge after the
// restart: the transaction ids of the lost commits are unknown to the new
// server, so a client resuming with monitor_cond_since gets found=false
// and a full dump of the current contents, and older clients re-monitor
// from scratch anyway.
//
// Each connection is a session running on a [jsonrpc.Conn]: requests are
// handled in arrival order on the connection's reader goroutine and never
// wait on the network, because sends only queue. The updates a commit
// queues are written without a goroutine per session: with few monitors by
// the committing goroutine once the lock is released (dbState.unlock);
// with many, a helper goroutine starts writing while the commit is still
// queueing, and the committer joins it after releasing the lock. Each write
// is non-blocking (jsonrpc's inline writes); only what a slow peer's socket
// does not take waits for that session's writer goroutine. A commit to 200
// monitors thus costs 200 system calls and no goroutine hand-offs.
//
// # Monitors
//
// A monitor keeps, per table, the columns, conditions and select flags the
// client asked for. On commit the server walks only the rows the
// transaction changed; monitors whose request is the same (or that have
// the same conditions) share one encoding of the update, interned per
// database while they are watched. Initial contents and
// monitor_cond_change use the tables' condition indexes, so a conditional
// monitor costs work in proportion to the rows it selects. The initial
// reply is encoded outside the database's lock from the rows captured
// under it (rows are immutable), so a large dump does not stall commits;
// the new monitor's updates are held meanwhile and sent after the reply.
//
// Every commit gets a transaction id. The last commits (bounded in number
// and in changed rows, Options.HistoryLength and HistoryRows) are kept so
// that monitor_cond_since from a client that knows a recent id gets only
// what changed since, merged per row, with found=true.
//
// # Sessions
//
// A session answers "echo" and sends its own when the peer has been
// silent for Options.ProbeInterval, closing the connection when no answer
// comes (ovsdb-server's inactivity probe). Locks are advisory and
// server-wide; a session's locks, monitors and blocked transactions go
// away with it.
//
// # Access control
//
// A session inherits its remote's restrictions (remote.go): a read-only
// Connection refuses every write, and a Connection with a role has each
// insert, update, mutate and delete checked, as ovsdb-server's RBAC does,
// against the RBAC_Role and RBAC_Permission rows of the database written
// (rbac.go), with the common name of the client's TLS certificate as its
// identity. The core calls the check (ovsdb.TxnOptions.Checker) once per
// write operation with the rows it touches, before applying it; a refusal
// is the operation's "permission error" and aborts the transaction.
//
// # _Server
//
// Like ovsdb-server, the server serves a read-only "_Server" database whose
// Database table describes every database (model "standalone", connected,
// leader), which the OVS IDL monitors before anything else.
package server
