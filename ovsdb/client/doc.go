// Package client is govn's OVSDB client: it keeps a session to an OVSDB
// server (govn db or ovsdb-server), mirrors the monitored part of one
// database in an in-memory cache, reports every change to that cache as
// ordered events, and runs transactions against the server.
//
// # Sessions
//
// A [Client] connects to one of its endpoints ("unix:PATH", "tcp:IP:PORT"),
// monitors the database's row in the server's _Server database for the
// whole session, and uses the server only while that row says the server
// serves the database and is connected to its cluster (and, with
// LeaderOnly, is the leader): when it stops, the client moves on to the
// next endpoint, as the OVS IDL does. It fetches the schema with
// get_schema and starts one monitor over the tables it was asked for. It
// prefers monitor_cond_since, remembering the id of the last transaction it
// has seen, so that after a reconnection the server can
// send only what changed meanwhile; a server that answers "unknown method"
// gets monitor_cond, and then plain monitor. When a session ends the client
// reconnects with exponential backoff (with jitter), re-establishes its
// monitor with the current conditions and takes again the locks it wanted.
// It answers the server's "echo" probes and can probe the server itself.
//
// # Cache and events
//
// The [Cache] holds the monitored rows as immutable [ovsdb.Row] values, so
// a row read from it never changes under the reader. Each update the server
// sends (one per committed transaction) is applied atomically and then
// handed to Options.OnChange as a [ChangeSet]: per-table insert, update and
// delete events with the old and new rows, in the order the server committed
// them. When the server cannot resume (a new session without usable history)
// the client replaces the cache with the server's full contents and reports
// the difference to the old cache as ordinary events, so incremental
// processors never have to start over.
//
// # Typed rows
//
// The models that ovsdb/modelgen generates from govn's schemas
// (schema/nb, schema/sb, schema/vswitch) read rows of the cache as Go
// structs: Get[nb.LogicalSwitch](cache, id), List[nb.LogicalSwitch](cache),
// Load[nb.LogicalSwitch](cache, event.New); Txn.InsertModel and
// Txn.UpdateModel write them. Each model lists its fields' columns; the
// conversions themselves are package ovsdb/model.
//
// # Transactions
//
// [Client.Transact] sends raw operations; [Txn] builds them the way OVSDB
// clients usually do: rows inserted under a placeholder UUID that becomes a
// "named-uuid" on the wire, updates and mutations of rows by UUID, and
// Verify, which adds a "wait" with "until": "==" on columns read from the
// cache so that the transaction fails with [ErrConflict], instead of
// overwriting, when another client changed them first. Because the server
// sends the updates of a transaction before its reply, the cache already
// holds a transaction's effects when Commit returns. A transaction whose
// context ends before its reply returns the context's error, and the
// client sends the server the RFC 7047 "cancel" for it, so that a
// transaction blocked in a "wait" is dropped rather than committed later.
package client
