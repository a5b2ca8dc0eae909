// Package cluster replicates a govn db database across a cluster of
// servers with Raft, as ovsdb-server's clustered service model does
// (ovsdb(7)): every committed transaction is on a majority of the members
// before its client hears of it, any member serves reads and monitors, and
// the leader executes writes (a follower forwards them to it).
//
// # Raft
//
// Consensus is github.com/hashicorp/raft (the library of Consul, Nomad
// and Vault): elections, replication, membership changes, snapshots and
// log compaction are its, not home-made. This package gives it storage
// (file.go), a transport (transport.go) and a state machine (node.go).
//
// # File
//
// A clustered database is one file, as ovsdb-tool's are, though not in
// ovsdb's clustered format: records "GOVN RAFT <length> <crc32c>\n" then
// JSON, written and fdatasynced one at a time into space allocated ahead
// (zeros, which a restart reads as the end: no torn tail), so that a
// record's sync need not change the file's size. The first is a header (name,
// server id, address; the cluster id, or the remotes to join). Later ones
// hold raft's term and vote, log entries (all the entries of one write in
// one record: one fsync), truncations and snapshots. The file is read
// whole at start; a torn tail is cut off. After a snapshot raft drops the
// log's head, and the file is rewritten with only what is still needed.
// Create and Join write new files (govn db create-cluster, join-cluster).
//
// # Transactions
//
// The leader executes a transaction as a standalone server does, applies
// it to its copy at once (so the next transaction sees it) and proposes
// it as one raft entry; the reply waits until raft has committed it and
// it is on the leader's disk too. The entries that queue while raft
// writes the previous ones go in one write, one fsync and one
// replication round (group commit); the leader fsyncs its entries while
// it replicates them, and the commit index it tells followers never
// passes what is on its disk, so that what any member applies or any
// client hears of is on a majority's disk. When commits pause, the
// leader tells the followers the commit index at once rather than with
// its next heartbeat-like append, so their monitors hear of a commit
// within about a millisecond. An entry holds each transaction's id and
// its changes as an ovsdb storage record with ephemeral columns;
// followers apply it and tell their monitors, under the same
// transaction id, so monitor_cond_since resumes on any member. A member that loses its leadership rolls back
// what it applied but raft did not commit (as one commit its monitors
// see); a new leader takes writes only after a barrier, once it has
// applied everything committed before.
//
// # Peers
//
// A member listens on its address (tcp:IP:PORT, or ssl:IP:PORT for TLS
// both ways with certificates the CA signed) for raft's RPCs and for
// govn's own requests. Each connection opens with a hello from the
// server that dialed (its id, address and cluster id), then the first
// byte tells raft's RPCs from govn's requests: join (a new server asks
// the leader to add it), remove (cluster/kick, cluster/leave), txn (a
// follower's forwarded transaction; the follower replies once it has
// applied the entry too) and timer (cluster/change-election-timer, a log
// entry every member applies). Only the servers of the raft
// configuration, at their address and dialing from its IP, are served;
// others may only join (peers.go).
//
// # Locks
//
// Locks are not replicated: as in ovsdb-server's clustered mode each
// member has its own, and leader-only clients (ovn-northd) all lock on
// the leader.
package cluster
