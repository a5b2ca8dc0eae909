package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// Remotes: where the server listens and connects, as ovsdb-server's
// --remote options say.
//
// A remote is passive (punix:PATH, ptcp:PORT[:IP], pssl:PORT[:IP]: listen
// and serve whoever connects), active (unix:PATH, tcp:IP:PORT,
// ssl:IP:PORT: connect out, serve that session, reconnect when it ends) or
// a database reference db:DB,TABLE,COLUMN. A reference stands for the
// targets the column holds in every row of the table: either strings, or
// references to rows with a "target" column and optionally
// "inactivity_probe" and "max_backoff" (milliseconds), like OVN's
// Connection table. The references are re-read as the database changes;
// listeners whose targets disappear are closed and new ones opened, with
// no restart.
//
// OVN Southbound's Connection.read_only is enforced as ovsdb-server does:
// its sessions may read and monitor, and every operation that writes is
// refused ("not allowed"). Its role column is enforced as ovsdb-server's
// role-based access control: the writes of such a connection's sessions
// are checked against the RBAC_Role and RBAC_Permission rows, with the
// client's TLS certificate common name as its identity (see rbac.go).

// RemoteOptions configure StartRemotes.
type RemoteOptions struct {
	// Remotes lists the --remote values.
	Remotes []string
	// TLS names the files that pssl: and ssl: remotes use.
	TLS TLSOptions
	// Poll is how often db: references are re-read; 0 means 200ms.
	Poll time.Duration
}

// remoteSpec is one target and its connection parameters; it is
// comparable, and a change of any field replaces the connection.
type remoteSpec struct {
	target string
	// probe is the inactivity probe; negative means the server's default.
	probe time.Duration
	// maxBackoff bounds the wait between attempts; 0 means 8s.
	maxBackoff time.Duration
	// readOnly and role are a Connection row's read_only and role
	// columns; role selects the RBAC rules the sessions obey.
	readOnly bool
	role     string
}

// dbRef is a parsed db:DB,TABLE,COLUMN.
type dbRef struct{ db, table, column string }

func (r dbRef) String() string { return "db:" + r.db + "," + r.table + "," + r.column }

func parseDBRef(s string) (dbRef, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 || slices.Contains(parts, "") {
		return dbRef{}, fmt.Errorf("bad database reference db:%s: want db:DB,TABLE,COLUMN", s)
	}
	return dbRef{parts[0], parts[1], parts[2]}, nil
}

// Remotes runs a server's listeners and outgoing connections.
type Remotes struct {
	srv    *Server
	log    *slog.Logger
	tls    *tlsSource
	static []remoteSpec
	refs   []dbRef
	poll   time.Duration
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[remoteSpec]*remoteRun
	lastErr string // the last db: reading error logged, to log it once
}

// remoteRun is one running remote.
type remoteRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the remote has stopped
	addr   net.Addr      // a passive remote's address once listening
}

// StartRemotes opens the remotes in opts and keeps them up until ctx ends;
// Wait then waits for them to close. The fixed passive remotes are opened
// before it returns: an error says one of them could not be, or that a
// remote or TLS option is malformed.
func (s *Server) StartRemotes(ctx context.Context, opts RemoteOptions) (*Remotes, error) {
	r := &Remotes{srv: s, log: s.log, poll: opts.Poll, running: map[remoteSpec]*remoteRun{}}
	if r.poll <= 0 {
		r.poll = 200 * time.Millisecond
	}
	src, err := newTLSSource(s, opts.TLS)
	if err != nil {
		return nil, err
	}
	r.tls = src
	for _, v := range opts.Remotes {
		if ref, ok := strings.CutPrefix(v, "db:"); ok {
			dr, err := parseDBRef(ref)
			if err != nil {
				return nil, err
			}
			if _, err := s.readRemotes(dr); err != nil {
				return nil, fmt.Errorf("remote %s: %w", v, err)
			}
			r.refs = append(r.refs, dr)
			continue
		}
		if err := checkTarget(v); err != nil {
			return nil, err
		}
		if isSSL(v) && !opts.TLS.configured() {
			return nil, fmt.Errorf("remote %s: --private-key, --certificate and --ca-cert are needed for SSL", v)
		}
		r.static = append(r.static, remoteSpec{target: v, probe: -1})
	}
	var opened []net.Listener
	listeners := map[remoteSpec]net.Listener{}
	for _, spec := range r.static {
		if !isPassive(spec.target) {
			continue
		}
		l, err := r.listen(ctx, spec.target)
		if err != nil {
			for _, l := range opened {
				l.Close()
			}
			return nil, err
		}
		opened = append(opened, l)
		listeners[spec] = l
	}
	r.mu.Lock()
	for _, spec := range r.static {
		r.startLocked(ctx, spec, listeners[spec])
	}
	r.mu.Unlock()
	if len(r.refs) > 0 {
		r.reconcile(ctx)
		r.wg.Add(1)
		go r.watch(ctx)
	}
	return r, nil
}

// Wait waits until every remote has stopped after the context of
// StartRemotes ended.
func (r *Remotes) Wait() { r.wg.Wait() }

// Listening returns the address of each passive remote now listening, by
// target.
func (r *Remotes) Listening() map[string]net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]net.Addr{}
	for spec, run := range r.running {
		if run.addr != nil {
			out[spec.target] = run.addr
		}
	}
	return out
}

// watch re-reads the database references until ctx ends.
func (r *Remotes) watch(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.reconcile(ctx)
		}
	}
}

// reconcile makes the running remotes those of the options and the
// database now.
func (r *Remotes) reconcile(ctx context.Context) {
	// One remote per target: the fixed ones win over the database's, and
	// a target whose parameters change is restarted with the new ones.
	want := map[string]remoteSpec{}
	var errs []string
	for _, ref := range r.refs {
		specs, err := r.srv.readRemotes(ref)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for _, spec := range specs {
			if err := checkTarget(spec.target); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			want[spec.target] = spec
		}
	}
	for _, spec := range r.static {
		want[spec.target] = spec
	}
	r.mu.Lock()
	if e := strings.Join(errs, "; "); e != r.lastErr {
		r.lastErr = e
		if e != "" {
			r.log.Warn("reading remotes from the database", "err", e)
		}
	}
	var stopped []*remoteRun
	for spec, run := range r.running {
		if w, ok := want[spec.target]; !ok || w != spec {
			r.log.Info("closing remote", "remote", spec.target)
			run.cancel()
			stopped = append(stopped, run)
			delete(r.running, spec)
		}
	}
	r.mu.Unlock()
	// A replaced listener must have let go of its port before its
	// successor binds it. (The runs take r.mu as they stop.)
	for _, run := range stopped {
		<-run.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, spec := range want {
		if r.running[spec] == nil {
			r.startLocked(ctx, spec, nil)
		}
	}
}

// startLocked starts running spec, on l if it is already listening.
// Callers hold r.mu.
func (r *Remotes) startLocked(ctx context.Context, spec remoteSpec, l net.Listener) {
	ctx, cancel := context.WithCancel(ctx)
	run := &remoteRun{cancel: cancel, done: make(chan struct{})}
	if l != nil {
		run.addr = l.Addr()
	}
	r.running[spec] = run
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(run.done)
		defer cancel()
		if isPassive(spec.target) {
			r.runPassive(ctx, spec, run, l)
		} else {
			r.runActive(ctx, spec)
		}
	}()
}

// connOptions returns the options of the sessions spec's remote serves.
func (r *Remotes) connOptions(spec remoteSpec) connOptions {
	probe := spec.probe
	if probe < 0 {
		probe = r.srv.opts.ProbeInterval
		if strings.HasPrefix(spec.target, "punix:") || strings.HasPrefix(spec.target, "unix:") {
			// As in ovsdb-server, sessions over unix sockets are not
			// probed unless their Connection row says so: the peer is
			// on this machine, and a busy one (a northd parsing the
			// update of its cold start's transaction) must not be cut
			// off for answering an echo late.
			probe = 0
		}
	}
	return connOptions{probe: probe, readOnly: spec.readOnly, role: spec.role}
}

// backoff returns the next wait after cur, bounded by spec's maximum.
func backoff(cur time.Duration, spec remoteSpec) time.Duration {
	limit := spec.maxBackoff
	if limit <= 0 {
		limit = 8 * time.Second
	}
	return min(max(2*cur, time.Second), limit)
}

// sleep waits d or until ctx ends, reporting whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runPassive listens on spec (retrying while it cannot) and serves the
// listener until ctx ends.
func (r *Remotes) runPassive(ctx context.Context, spec remoteSpec, run *remoteRun, l net.Listener) {
	wait := time.Duration(0)
	for {
		if l == nil {
			var err error
			l, err = r.listen(ctx, spec.target)
			if err != nil {
				r.log.Warn("cannot listen; retrying", "remote", spec.target, "err", err)
				wait = backoff(wait, spec)
				if !sleep(ctx, wait) {
					return
				}
				continue
			}
		}
		r.mu.Lock()
		run.addr = l.Addr()
		r.mu.Unlock()
		r.log.Info("listening", "remote", spec.target, "addr", l.Addr().String())
		err := r.srv.serveListener(ctx, l, r.connOptions(spec))
		r.mu.Lock()
		run.addr = nil
		r.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("listener failed; reopening", "remote", spec.target, "err", err)
		l = nil
		wait = backoff(wait, spec)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// listen opens a passive remote; pssl: ones answer with TLS.
func (r *Remotes) listen(ctx context.Context, target string) (net.Listener, error) {
	port, ok := strings.CutPrefix(target, "pssl:")
	if !ok {
		return Listen(ctx, target)
	}
	l, err := Listen(ctx, "ptcp:"+port)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(l, &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return r.tls.serverConfig()
	}}), nil
}

// runActive connects to spec, serves the session until it ends, and
// connects again, until ctx ends.
func (r *Remotes) runActive(ctx context.Context, spec remoteSpec) {
	wait := time.Duration(0)
	for {
		c, err := r.dial(ctx, spec.target)
		if err != nil {
			r.log.Debug("connecting out failed", "remote", spec.target, "err", err)
		} else {
			r.log.Info("connected", "remote", spec.target)
			wait = 0
			select {
			case <-r.srv.serveConn(ctx, c, r.connOptions(spec)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return
		}
		wait = backoff(wait, spec)
		if !sleep(ctx, wait) {
			return
		}
	}
}

// dial connects to an active remote.
func (r *Remotes) dial(ctx context.Context, target string) (net.Conn, error) {
	addr, ok := strings.CutPrefix(target, "ssl:")
	if !ok {
		return jsonrpc.Dial(ctx, target)
	}
	cfg, err := r.tls.clientConfig()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, err := jsonrpc.Dial(ctx, "tcp:"+addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("SSL handshake with %s: %w", target, err)
	}
	return tc, nil
}

func isPassive(target string) bool { return strings.HasPrefix(target, "p") }

func isSSL(target string) bool {
	return strings.HasPrefix(target, "ssl:") || strings.HasPrefix(target, "pssl:")
}

// checkTarget reports whether target is a remote this server can run.
func checkTarget(target string) error {
	kind, rest, _ := strings.Cut(target, ":")
	var err error
	switch kind {
	case "punix", "ptcp":
		_, _, err = jsonrpc.ParseListen(target)
	case "pssl":
		_, _, err = jsonrpc.ParseListen("ptcp:" + rest)
	case "unix", "tcp":
		_, _, err = jsonrpc.ParseTarget(target)
	case "ssl":
		_, _, err = jsonrpc.ParseTarget("tcp:" + rest)
	default:
		err = errors.New("want punix:, ptcp:, pssl:, unix:, tcp:, ssl: or db:")
	}
	if err != nil {
		return fmt.Errorf("bad remote %q: %w", target, err)
	}
	return nil
}

// withColumn calls fn with ref's database and column, holding the
// database's lock (the schema may change under a conversion otherwise).
func (s *Server) withColumn(ref dbRef, fn func(db *ovsdb.Database, c *ovsdb.ColumnSchema) error) error {
	d := s.database(ref.db)
	if d == nil {
		return fmt.Errorf("%s: no database %s", ref, ref.db)
	}
	d.mu.Lock()
	defer d.unlock()
	ts := d.db.Schema.Table(ref.table)
	if ts == nil {
		return fmt.Errorf("%s: no table %s", ref, ref.table)
	}
	c := ts.Column(ref.column)
	if c == nil || c.Index < 0 {
		return fmt.Errorf("%s: no column %s", ref, ref.column)
	}
	return fn(d.db, c)
}

// sortedRows returns a table's rows in UUID order, so that "the first
// row" is the same every time. Callers hold d.mu.
func sortedRows(t *ovsdb.Table) []*ovsdb.Row {
	rows := make([]*ovsdb.Row, 0, len(t.Rows))
	for _, row := range t.Rows {
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b *ovsdb.Row) int {
		return ovsdb.UUIDAtom(a.UUID).Compare(ovsdb.UUIDAtom(b.UUID))
	})
	return rows
}

// readStrings returns the strings in ref's column, row by row.
func (s *Server) readStrings(ref dbRef) ([]string, error) {
	var out []string
	err := s.withColumn(ref, func(db *ovsdb.Database, c *ovsdb.ColumnSchema) error {
		if c.Type.Key.Type != ovsdb.TypeString || c.Type.IsMap() {
			return fmt.Errorf("%s: not a string column", ref)
		}
		for _, row := range sortedRows(db.Table(ref.table)) {
			for _, a := range row.Data[c.Index].Keys {
				out = append(out, a.Str())
			}
		}
		return nil
	})
	return out, err
}

// readRemotes returns the remotes that ref's column names now.
func (s *Server) readRemotes(ref dbRef) ([]remoteSpec, error) {
	var out []remoteSpec
	err := s.withColumn(ref, func(db *ovsdb.Database, c *ovsdb.ColumnSchema) error {
		if c.Type.IsMap() {
			return fmt.Errorf("%s: not a string or reference column", ref)
		}
		switch {
		case c.Type.Key.Type == ovsdb.TypeString:
			for _, row := range sortedRows(db.Table(ref.table)) {
				for _, a := range row.Data[c.Index].Keys {
					out = append(out, remoteSpec{target: a.Str(), probe: -1})
				}
			}
			return nil
		case c.Type.Key.Type == ovsdb.TypeUUID && c.Type.Key.RefTable != "":
			rt := db.Table(c.Type.Key.RefTable)
			if rt == nil {
				return fmt.Errorf("%s: referenced table %s missing", ref, c.Type.Key.RefTable)
			}
			cols, err := connectionColumns(rt.Schema)
			if err != nil {
				return fmt.Errorf("%s: %w", ref, err)
			}
			for _, row := range sortedRows(db.Table(ref.table)) {
				for _, a := range row.Data[c.Index].Keys {
					if conn := rt.Rows[a.UUID()]; conn != nil {
						if spec, ok := cols.spec(conn); ok {
							out = append(out, spec)
						}
					}
				}
			}
			return nil
		}
		return fmt.Errorf("%s: not a string or reference column", ref)
	})
	return out, err
}

// connCols are the columns of a Connection-like table; all but target
// may be missing (nil).
type connCols struct {
	target, probe, maxBackoff, readOnly, role *ovsdb.ColumnSchema
}

func connectionColumns(t *ovsdb.TableSchema) (connCols, error) {
	cc := connCols{
		target:     typedColumn(t, "target", ovsdb.TypeString),
		probe:      typedColumn(t, "inactivity_probe", ovsdb.TypeInteger),
		maxBackoff: typedColumn(t, "max_backoff", ovsdb.TypeInteger),
		readOnly:   typedColumn(t, "read_only", ovsdb.TypeBoolean),
		role:       typedColumn(t, "role", ovsdb.TypeString),
	}
	if cc.target == nil {
		return cc, fmt.Errorf("table %s has no string column target", t.Name)
	}
	return cc, nil
}

// spec reads one Connection row; ok is false when it names no target.
func (cc connCols) spec(row *ovsdb.Row) (remoteSpec, bool) {
	first := func(c *ovsdb.ColumnSchema) (ovsdb.Atom, bool) {
		if c == nil || row.Data[c.Index].Len() == 0 {
			return ovsdb.Atom{}, false
		}
		return row.Data[c.Index].Keys[0], true
	}
	target, ok := first(cc.target)
	if !ok {
		return remoteSpec{}, false
	}
	spec := remoteSpec{target: target.Str(), probe: -1}
	if a, ok := first(cc.probe); ok {
		spec.probe = time.Duration(max(a.Int(), 0)) * time.Millisecond
	}
	if a, ok := first(cc.maxBackoff); ok {
		spec.maxBackoff = time.Duration(max(a.Int(), 0)) * time.Millisecond
	}
	if a, ok := first(cc.readOnly); ok {
		spec.readOnly = a.Bool()
	}
	if a, ok := first(cc.role); ok {
		spec.role = a.Str()
	}
	return spec, true
}

// typedColumn returns table t's column name if it holds atoms of type
// at (not a map), or nil.
func typedColumn(t *ovsdb.TableSchema, name string, at ovsdb.AtomicType) *ovsdb.ColumnSchema {
	c := t.Column(name)
	if c == nil || c.Index < 0 || c.Type.Key.Type != at || c.Type.IsMap() {
		return nil
	}
	return c
}
