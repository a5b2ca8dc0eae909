package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// Replicator is the replicated log of a clustered database (package
// ovsdb/cluster implements it). The server executes a transaction only
// where the replicator says it may write (the leader), applies it at once
// and proposes it; the reply waits until the log has committed it. A
// follower executes reads itself and forwards transactions that write.
type Replicator interface {
	// Writable reports whether transactions may commit here now. It is
	// called under the database's lock, and what it reports changes
	// only under that lock (see Replica.Do).
	Writable() bool
	// Propose hands over a transaction just applied here, under the
	// database's lock and in commit order. The Durable completes once
	// a majority of the cluster holds it.
	Propose(id ovsdb.UUID, cs *ovsdb.ChangeSet) (Durable, error)
	// Forward has the leader execute a transact request (its params as
	// received) and returns the result to reply with, once this server
	// has applied the commit too.
	Forward(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}

// ClusterStatus is what _Server.Database says of a clustered database.
type ClusterStatus struct {
	CID, SID  ovsdb.UUID
	Leader    bool
	Connected bool
	Index     int64
}

// Replica is the server's side of a clustered database, for its
// Replicator: the replicated log applies what the cluster committed
// through it.
type Replica struct {
	d *dbState
}

// AddClusteredDatabase starts serving db, a clustered database whose
// commits go through r; lastTxn is the id of the last transaction db
// holds (so that a client up to date resumes monitor_cond_since here
// without a dump), or zero.
func (s *Server) AddClusteredDatabase(db *ovsdb.Database, r Replicator, st ClusterStatus, lastTxn ovsdb.UUID) (*Replica, error) {
	name := db.Schema.Name
	if err := s.AddDatabase(db, nil); err != nil {
		return nil, err
	}
	d := s.database(name)
	d.mu.Lock()
	d.repl = r
	if !lastTxn.IsZero() {
		d.lastTxn = lastTxn
	}
	d.unlock()
	rep := &Replica{d: d}
	if err := rep.SetStatus(st); err != nil {
		return nil, err
	}
	return rep, nil
}

// Do runs fn with the database locked. The Locked methods may be called
// only from fn.
func (r *Replica) Do(fn func()) {
	r.d.mu.Lock()
	defer r.d.unlock()
	fn()
}

// DatabaseLocked returns the database as served.
func (r *Replica) DatabaseLocked() *ovsdb.Database { return r.d.db }

// LastTxnLocked returns the id of the last commit.
func (r *Replica) LastTxnLocked() ovsdb.UUID { return r.d.lastTxn }

// ApplyLocked commits cs, a change another member made (or a snapshot
// or rollback the replicated log computed), with transaction id id:
// monitors hear of it as of any commit, and it is not proposed again.
func (r *Replica) ApplyLocked(id ovsdb.UUID, cs *ovsdb.ChangeSet) {
	d := r.d
	d.db.Apply(cs)
	d.lastTxn = id
	d.appendHistoryLocked(commitEntry{id: id, cs: cs, rows: cs.Len()})
	d.notifyLocked(cs, id)
	d.retryBlockedLocked()
}

// ForgetHistoryLocked drops the commits kept for monitor_cond_since, as
// after a rollback of commits that monitors saw but the cluster did not
// keep: a client resuming from one of them gets a full dump.
func (r *Replica) ForgetHistoryLocked() {
	clear(r.d.history)
	r.d.history, r.d.historyRows = nil, 0
}

// Transact executes a transaction that a follower forwarded (params as
// its client sent them), as a session without locks would. The reply is
// to be sent once the Durable completes; a nil Durable means there was
// nothing to commit.
func (r *Replica) Transact(params json.RawMessage) (json.RawMessage, Durable, error) {
	v, err := ovsdb.DecodeJSON(params)
	if err != nil {
		return nil, nil, fmt.Errorf("forwarded transaction: %w", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 1 {
		return nil, nil, errors.New("forwarded transaction: params must be an array beginning with the database name")
	}
	d := r.d
	d.mu.Lock()
	defer d.unlock()
	if !d.repl.Writable() {
		return nil, nil, ErrNotLeader
	}
	// A forwarded "wait" does not block: it is executed as if its
	// timeout had expired.
	res := d.db.Transact(arr[1:], ovsdb.TxnOptions{HasLock: func(string) bool { return false }})
	if res.Blocked {
		res = d.db.Transact(arr[1:], ovsdb.TxnOptions{HasLock: func(string) bool { return false }, WaitExpired: true})
	}
	if res.Changes == nil {
		return json.RawMessage(res.Reply), nil, nil
	}
	dur, err := d.commitDeferLocked(res.Changes, false)
	if err != nil {
		return json.RawMessage(ioErrorReply(len(arr)-1, err)), nil, nil
	}
	return json.RawMessage(res.Reply), dur, nil
}

// ErrNotLeader says a clustered database's transaction came to a member
// that cannot commit it now.
var ErrNotLeader = errors.New("not the cluster's leader")

// forward has the leader run a follower's transaction and answers it.
func (d *dbState) forward(conn *jsonrpc.Conn, id, params json.RawMessage, nOps int) {
	reply, err := d.repl.Forward(conn.Context(), params)
	if err != nil {
		if conn.Context().Err() != nil {
			return
		}
		d.srv.log.Debug("forwarding a transaction to the leader failed", "db", d.name, "err", err)
		conn.Reply(id, json.RawMessage(ioErrorReply(nOps, err)))
		return
	}
	conn.Reply(id, reply)
}

// SetStatus updates the database's _Server.Database row.
func (r *Replica) SetStatus(st ClusterStatus) error {
	s := r.d.srv
	srv := s.server
	ts := srv.db.Schema.Table("Database")
	col := func(name string) int { return ts.Column(name).Index }
	srv.mu.Lock()
	defer srv.unlock()
	for u, row := range srv.db.Table("Database").Rows {
		if !row.Get(ts.Column("name")).Equal(ovsdb.Scalar(ovsdb.String(r.d.name))) {
			continue
		}
		nr := row.Clone()
		nr.Data[col("model")] = ovsdb.Scalar(ovsdb.String("clustered"))
		nr.Data[col("leader")] = ovsdb.Scalar(ovsdb.Boolean(st.Leader))
		nr.Data[col("connected")] = ovsdb.Scalar(ovsdb.Boolean(st.Connected))
		nr.Data[col("cid")] = optionalUUID(st.CID)
		nr.Data[col("sid")] = optionalUUID(st.SID)
		nr.Data[col("index")] = ovsdb.Scalar(ovsdb.Integer(st.Index))
		if nr.SameData(row) {
			return nil
		}
		nr.Version = ovsdb.NewUUID()
		cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{"Database": {u: {Old: row, New: nr}}}}
		_, err := srv.commitLocked(cs)
		return err
	}
	return fmt.Errorf("no _Server.Database row for %s", r.d.name)
}

func optionalUUID(u ovsdb.UUID) ovsdb.Datum {
	if u == (ovsdb.UUID{}) {
		return ovsdb.Datum{}
	}
	return ovsdb.Scalar(ovsdb.UUIDAtom(u))
}
