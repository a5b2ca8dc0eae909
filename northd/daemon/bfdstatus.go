package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/govn/govn/northd"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
)

// BFD status: the chassis that runs a BFD session writes its state into
// the Southbound BFD row's status; northd copies it to the Northbound BFD
// row, where the CMS reads it and where a static route checked by the
// session (Logical_Router_Static_Route.bfd) learns whether its next hop
// is alive. The rules are ovn-northd 23.03's, as it behaves (checked by
// TestBFDStatusDifferential against it):
//
//   - a Northbound row without a status gets admin_down;
//   - when the rows differ and either says admin_down, the Northbound
//     wins (the CMS turned the session off, or on again): the Southbound
//     row takes its status; otherwise the Southbound wins (the chassis
//     saw the session change): the Northbound row takes its status;
//   - a session that some static route uses is never admin_down: it
//     becomes down (both rows) until the chassis says otherwise; one that
//     no route uses is admin_down (both rows).
//
// bfdStatus does it incrementally: each iteration it looks only at the
// sessions whose rows changed (either database's BFD row, or a route
// that names it), and writes only the rows whose status differs.
type bfdStatus struct {
	// all asks for every session to be looked at: at the start, after a
	// failed transaction, after another northd was active.
	all bool
	// dirty are the sessions (bfdKey) to look at.
	dirty map[string]bool
	// routes are, for each Northbound BFD row, the static routes whose
	// bfd column names it; built with all, kept up to date from the
	// route changes.
	routes map[ovsdb.UUID]map[ovsdb.UUID]bool
}

// bfdTable and routeTable are the tables status depends on.
const (
	bfdTable   = "BFD"
	routeTable = "Logical_Router_Static_Route"
)

const bfdAdminDown = "admin_down"

func newBFDStatus() *bfdStatus {
	return &bfdStatus{all: true, dirty: map[string]bool{}}
}

// resync makes the next sync look at every session.
func (b *bfdStatus) resync() { b.all = true }

// bfdKey names a session in both databases: its router port and peer.
func bfdKey(port, dstIP string) string { return port + "|" + dstIP }

// rows is what bfdStatus reads of a database: a client's cache.
type rows interface {
	Schema() *ovsdb.Schema
	Row(table string, id ovsdb.UUID) *ovsdb.Row
	Rows(table string) []*ovsdb.Row
	Lookup(table, column string, value ovsdb.Datum) []*ovsdb.Row
}

// str returns a string column of r ("" if it is empty or not there).
func str(s *ovsdb.Schema, table string, r *ovsdb.Row, column string) string {
	t := s.Tables[table]
	if t == nil || r == nil {
		return ""
	}
	col := t.Column(column)
	if col == nil {
		return ""
	}
	if d := r.Get(col); len(d.Keys) == 1 {
		return d.Keys[0].Str()
	}
	return ""
}

// ref returns the UUID in an optional reference column of r.
func ref(s *ovsdb.Schema, table string, r *ovsdb.Row, column string) (ovsdb.UUID, bool) {
	t := s.Tables[table]
	if t == nil || r == nil {
		return ovsdb.UUID{}, false
	}
	col := t.Column(column)
	if col == nil {
		return ovsdb.UUID{}, false
	}
	if d := r.Get(col); len(d.Keys) == 1 {
		return d.Keys[0].UUID(), true
	}
	return ovsdb.UUID{}, false
}

// note marks the sessions that the changes in c (not yet applied to the
// state) may concern; nbc and sbc are the databases as they are now.
func (b *bfdStatus) note(c changes, nbc, sbc rows) {
	if b.all {
		return // everything is looked at anyway
	}
	nbs := nbc.Schema()
	for k, evs := range c {
		switch {
		case k.table == bfdTable:
			// Either database's row: the session is named the same.
			s := nbs
			if k.db == northd.SB {
				s = sbc.Schema()
			}
			for _, e := range evs {
				for _, r := range []*ovsdb.Row{e.Old, e.New} {
					if r != nil {
						b.dirty[bfdKey(str(s, bfdTable, r, "logical_port"), str(s, bfdTable, r, "dst_ip"))] = true
					}
				}
			}
		case k.db == northd.NB && k.table == routeTable:
			for _, e := range evs {
				b.noteRoute(e.Old, e.New, nbc)
			}
		}
	}
}

// noteRoute follows a static route from old to new: the sessions it
// stopped or started using are to be looked at.
func (b *bfdStatus) noteRoute(old, new *ovsdb.Row, nbc rows) {
	nbs := nbc.Schema()
	for _, r := range []*ovsdb.Row{old, new} {
		id, ok := ref(nbs, routeTable, r, "bfd")
		if !ok {
			continue
		}
		if b.routes != nil {
			if r == old {
				delete(b.routes[id], r.UUID)
			}
		}
		if bfd := nbc.Row(bfdTable, id); bfd != nil {
			b.dirty[bfdKey(str(nbs, bfdTable, bfd, "logical_port"), str(nbs, bfdTable, bfd, "dst_ip"))] = true
		}
	}
	if id, ok := ref(nbs, routeTable, new, "bfd"); ok && b.routes != nil {
		if b.routes[id] == nil {
			b.routes[id] = map[ovsdb.UUID]bool{}
		}
		b.routes[id][new.UUID] = true
	}
}

// statusUpdate is one row whose status is to be written.
type statusUpdate struct {
	db     northd.DB
	id     ovsdb.UUID
	status string
}

// bfdWant returns the statuses ovn-northd leaves in a session's rows:
// nb the Northbound row's (empty if unset), sb the Southbound row's
// (haveSB false if there is none yet: northd inserts it), referenced
// whether a static route uses the session.
func bfdWant(nb, sb string, haveSB, referenced bool) (wantNB, wantSB string) {
	if nb == "" {
		nb = bfdAdminDown
	}
	if haveSB && sb != nb {
		if nb == bfdAdminDown || sb == bfdAdminDown {
			sb = nb
		} else {
			nb = sb
		}
	}
	switch {
	case referenced && nb == bfdAdminDown:
		nb, sb = "down", "down"
	case !referenced && nb != bfdAdminDown:
		nb, sb = bfdAdminDown, bfdAdminDown
	}
	if !haveSB {
		sb = ""
	}
	return nb, sb
}

// plan returns the status writes the sessions to look at need, and
// forgets them.
func (b *bfdStatus) plan(nbc, sbc rows) []statusUpdate {
	nbs, sbs := nbc.Schema(), sbc.Schema()
	if nbs == nil || sbs == nil || nbs.Tables[bfdTable] == nil || sbs.Tables[bfdTable] == nil {
		return nil
	}
	if b.all {
		b.routes = map[ovsdb.UUID]map[ovsdb.UUID]bool{}
		for _, r := range nbc.Rows(routeTable) {
			if id, ok := ref(nbs, routeTable, r, "bfd"); ok {
				if b.routes[id] == nil {
					b.routes[id] = map[ovsdb.UUID]bool{}
				}
				b.routes[id][r.UUID] = true
			}
		}
	}
	// The Northbound rows to look at.
	var sessions []*ovsdb.Row
	if b.all {
		sessions = nbc.Rows(bfdTable)
	} else {
		keys := make([]string, 0, len(b.dirty))
		for k := range b.dirty {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		seen := map[ovsdb.UUID]bool{}
		for _, k := range keys {
			port, dst := splitBFDKey(k)
			for _, r := range nbc.Lookup(bfdTable, "logical_port", ovsdb.Scalar(ovsdb.String(port))) {
				if str(nbs, bfdTable, r, "dst_ip") == dst && !seen[r.UUID] {
					seen[r.UUID] = true
					sessions = append(sessions, r)
				}
			}
		}
	}
	b.all = false
	clear(b.dirty)
	var out []statusUpdate
	for _, r := range sessions {
		port, dst := str(nbs, bfdTable, r, "logical_port"), str(nbs, bfdTable, r, "dst_ip")
		var sbRow *ovsdb.Row
		for _, s := range sbc.Lookup(bfdTable, "logical_port", ovsdb.Scalar(ovsdb.String(port))) {
			if str(sbs, bfdTable, s, "dst_ip") == dst {
				sbRow = s
				break
			}
		}
		nbStatus, sbStatus := str(nbs, bfdTable, r, "status"), str(sbs, bfdTable, sbRow, "status")
		wantNB, wantSB := bfdWant(nbStatus, sbStatus, sbRow != nil, len(b.routes[r.UUID]) > 0)
		if wantNB != nbStatus {
			out = append(out, statusUpdate{northd.NB, r.UUID, wantNB})
		}
		if sbRow != nil && wantSB != sbStatus {
			out = append(out, statusUpdate{northd.SB, sbRow.UUID, wantSB})
		}
	}
	return out
}

func splitBFDKey(k string) (port, dstIP string) {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '|' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}

// sync writes the statuses the sessions changed since the last call
// need: the Northbound rows in one transaction, the Southbound rows in
// another that asserts the lock. A failed transaction makes the next
// sync look at every session.
func (b *bfdStatus) sync(ctx context.Context, nbc, sbc *client.Client) (int, error) {
	ups := b.plan(nbc.Cache(), sbc.Cache())
	if len(ups) == 0 {
		return 0, nil
	}
	nbTxn, sbTxn := nbc.Txn(), sbc.Txn()
	sbTxn.Add(client.Operation{Op: "assert", Lock: LockName})
	var nNB, nSB int
	for _, u := range ups {
		row := map[string]ovsdb.Datum{"status": ovsdb.Scalar(ovsdb.String(u.status))}
		if u.db == northd.NB {
			nbTxn.Update(bfdTable, u.id, row)
			nNB++
		} else {
			sbTxn.Update(bfdTable, u.id, row)
			nSB++
		}
	}
	for _, t := range []struct {
		txn  *client.Txn
		n    int
		name string
	}{{nbTxn, nNB, "northbound"}, {sbTxn, nSB, "southbound"}} {
		if t.n == 0 {
			continue
		}
		if _, err := t.txn.Commit(ctx); err != nil {
			b.resync()
			return 0, fmt.Errorf("%s BFD status: %w", t.name, err)
		}
	}
	return len(ups), nil
}
