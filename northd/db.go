package northd

import (
	"fmt"
	"sync"

	"github.com/govn/govn/ovsdb"
)

// Event is one row's change in the Northbound or the Southbound, as the
// daemon hands it to State.Apply: Old is nil for an insert, New is nil for
// a delete.
type Event struct {
	DB    DB
	Table string
	Old   *ovsdb.Row
	New   *ovsdb.Row
}

// DB names one of the two databases northd reads.
type DB uint8

// The databases.
const (
	NB DB = iota
	SB
)

func (d DB) String() string {
	if d == SB {
		return "SB"
	}
	return "NB"
}

// refKey names the rows of one table that refer to one row through one
// column.
type refKey struct {
	table  string // the referring table
	column string
	target ovsdb.UUID
}

// rowDB is northd's own copy of the monitored rows of one database: the
// snapshot that matches the changes it has been told about, which the
// client's cache may already be ahead of. Besides the rows it keeps the
// indexes that generators look rows up by: names, and the reverse of every
// reference column.
type rowDB struct {
	which  DB
	schema *ovsdb.Schema
	rows   map[string]map[ovsdb.UUID]*ovsdb.Row
	// names indexes the rows of tables that have a name-like column
	// (nameColumns) by its value.
	names map[string]map[string][]ovsdb.UUID
	// referrers indexes every reference column in reverse.
	referrers map[refKey]map[ovsdb.UUID]struct{}
	// models holds, for the Northbound, the typed model (Read) of each
	// row version read since it arrived, keyed by the row: a switch's
	// generators and memos read all its ports, and a pod add would
	// otherwise decode every port of the switch again, several times.
	// A row's entry goes when the row is replaced or deleted. The
	// Southbound's rows (tens of thousands, read rarely) are decoded
	// per batch only.
	models *sync.Map
}

// nameColumns lists, per database and table, the column that names a row
// for lookups by name (Logical_Switch_Port.name, Port_Binding.logical_port).
func nameColumn(which DB, t *ovsdb.TableSchema) string {
	if which == SB {
		switch t.Name {
		case "Port_Binding", "MAC_Binding":
			return "logical_port"
		case "Chassis", "Chassis_Private":
			return "name"
		}
		return ""
	}
	if t.Name == "BFD" {
		// A router port's BFD sessions are found by its name.
		return "logical_port"
	}
	if c := t.Column("name"); c != nil && c.Type.IsScalar() && c.Type.Key.Type == ovsdb.TypeString {
		return "name"
	}
	return ""
}

func newRowDB(which DB, s *ovsdb.Schema) *rowDB {
	d := &rowDB{
		which:     which,
		schema:    s,
		rows:      make(map[string]map[ovsdb.UUID]*ovsdb.Row),
		names:     make(map[string]map[string][]ovsdb.UUID),
		referrers: make(map[refKey]map[ovsdb.UUID]struct{}),
	}
	if which == NB {
		d.models = new(sync.Map)
	}
	return d
}

func (d *rowDB) table(name string) *ovsdb.TableSchema {
	if d.schema == nil {
		return nil
	}
	return d.schema.Tables[name]
}

func (d *rowDB) row(table string, id ovsdb.UUID) *ovsdb.Row { return d.rows[table][id] }

// column returns column col of r, a row of table.
func (d *rowDB) column(table string, r *ovsdb.Row, col string) (ovsdb.Datum, bool) {
	t := d.table(table)
	if t == nil || r == nil {
		return ovsdb.Datum{}, false
	}
	c := t.Column(col)
	if c == nil {
		return ovsdb.Datum{}, false
	}
	return r.Get(c), true
}

// rowName returns r's name in table t's name column, if t has one.
// Southbound Service_Monitor rows are named by their record key.
func (d *rowDB) rowName(t *ovsdb.TableSchema, r *ovsdb.Row) (string, bool) {
	if d.which == SB && t.Name == "Service_Monitor" && r != nil {
		str := func(c string) string { return stringColumn(d, t.Name, r, c) }
		return fmt.Sprintf("%s/%s/%d/%s", str("logical_port"), str("ip"), intColumn(d, t.Name, r, "port"), str("protocol")), true
	}
	nc := nameColumn(d.which, t)
	if nc == "" || r == nil {
		return "", false
	}
	v := r.Get(t.Column(nc))
	if len(v.Keys) != 1 {
		return "", false
	}
	return v.Keys[0].Str(), true
}

// lspRouterPortIndex is the pseudo-table under which the names index finds
// Logical_Switch_Ports by options:router-port (the router port they peer
// with).
const lspRouterPortIndex = "Logical_Switch_Port/router-port"

// extraName returns the key of r in the extra name indexes (for now only
// lspRouterPortIndex).
func (d *rowDB) extraName(t *ovsdb.TableSchema, r *ovsdb.Row) (string, bool) {
	if d.which != NB || t.Name != "Logical_Switch_Port" || r == nil {
		return "", false
	}
	opts := r.Get(t.Column("options"))
	v, ok := opts.Lookup(ovsdb.String("router-port"))
	if !ok {
		return "", false
	}
	return v.Str(), true
}

// apply installs one change and reports, through touch, every dependency
// it invalidates.
func (d *rowDB) apply(table string, old, new *ovsdb.Row, touch func(depKey)) {
	t := d.table(table)
	if t == nil {
		return
	}
	id := ovsdb.UUID{}
	switch {
	case new != nil:
		id = new.UUID
	case old != nil:
		id = old.UUID
	default:
		return
	}
	rows := d.rows[table]
	if rows == nil {
		rows = make(map[ovsdb.UUID]*ovsdb.Row)
		d.rows[table] = rows
	}
	if d.models != nil {
		if prev := rows[id]; prev != nil {
			d.models.Delete(prev)
		}
		if new != nil {
			d.models.Delete(new) // a row object used again, should one be
		}
	}
	if new != nil {
		rows[id] = new
	} else {
		delete(rows, id)
	}

	// Names.
	oldName, hadName := d.rowName(t, old)
	newName, hasName := d.rowName(t, new)
	if hadName != hasName || oldName != newName {
		if hadName {
			d.unname(table, oldName, id)
			touch(depKey{db: d.which, kind: depName, table: table, name: oldName})
		}
		if hasName {
			if d.names[table] == nil {
				d.names[table] = make(map[string][]ovsdb.UUID)
			}
			d.names[table][newName] = append(d.names[table][newName], id)
			touch(depKey{db: d.which, kind: depName, table: table, name: newName})
		}
	}

	oldExtra, hadExtra := d.extraName(t, old)
	newExtra, hasExtra := d.extraName(t, new)
	if hadExtra != hasExtra || oldExtra != newExtra {
		if hadExtra {
			d.unname(lspRouterPortIndex, oldExtra, id)
			touch(depKey{db: d.which, kind: depName, table: lspRouterPortIndex, name: oldExtra})
		}
		if hasExtra {
			if d.names[lspRouterPortIndex] == nil {
				d.names[lspRouterPortIndex] = make(map[string][]ovsdb.UUID)
			}
			d.names[lspRouterPortIndex][newExtra] = append(d.names[lspRouterPortIndex][newExtra], id)
			touch(depKey{db: d.which, kind: depName, table: lspRouterPortIndex, name: newExtra})
		}
	}

	// Columns and references.
	rowChanged := false
	for i, c := range t.Columns {
		var ov, nv ovsdb.Datum
		if old != nil && i < len(old.Data) {
			ov = old.Data[i]
		}
		if new != nil && i < len(new.Data) {
			nv = new.Data[i]
		}
		same := (old != nil) == (new != nil) && ov.Equal(nv)
		if same {
			continue
		}
		if isMembership(table, c) {
			touch(depKey{db: d.which, kind: depColumn, table: table, id: id, name: c.Name})
		} else {
			rowChanged = true
		}
		if refTable(c) != "" && d.indexesRefs(table) {
			d.reindexRefs(table, c, id, ov, nv, touch)
		}
	}
	if rowChanged || old == nil || new == nil {
		touch(depKey{db: d.which, kind: depRow, table: table, id: id})
	}
	if old == nil || new == nil {
		touch(depKey{db: d.which, kind: depTable, table: table})
	}
}

// indexesRefs says whether the references of table's rows are indexed in
// reverse. Logical flows and datapath groups are northd's own output, the
// most numerous Southbound rows, and nothing looks them up by what they
// refer to.
func (d *rowDB) indexesRefs(table string) bool {
	return d.which != SB || (table != "Logical_Flow" && table != "Logical_DP_Group")
}

func (d *rowDB) unname(table, name string, id ovsdb.UUID) {
	ids := d.names[table][name]
	for i, x := range ids {
		if x == id {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(d.names[table], name)
	} else {
		d.names[table][name] = ids
	}
}

// reindexRefs updates the reverse index of reference column c of row id
// from ov to nv.
func (d *rowDB) reindexRefs(table string, c *ovsdb.ColumnSchema, id ovsdb.UUID, ov, nv ovsdb.Datum, touch func(depKey)) {
	targets := func(v ovsdb.Datum) []ovsdb.UUID {
		var out []ovsdb.UUID
		add := func(as []ovsdb.Atom) {
			for _, a := range as {
				if a.Type() == ovsdb.TypeUUID {
					out = append(out, a.UUID())
				}
			}
		}
		if c.Type.Key.RefTable != "" {
			add(v.Keys)
		}
		if c.Type.Value != nil && c.Type.Value.RefTable != "" {
			add(v.Values)
		}
		return out
	}
	oldT, newT := targets(ov), targets(nv)
	in := func(set []ovsdb.UUID, u ovsdb.UUID) bool {
		for _, x := range set {
			if x == u {
				return true
			}
		}
		return false
	}
	for _, u := range oldT {
		if in(newT, u) {
			continue
		}
		k := refKey{table, c.Name, u}
		delete(d.referrers[k], id)
		if len(d.referrers[k]) == 0 {
			delete(d.referrers, k)
		}
		touch(depKey{db: d.which, kind: depReferrers, table: table, name: c.Name, id: u})
	}
	for _, u := range newT {
		if in(oldT, u) {
			continue
		}
		k := refKey{table, c.Name, u}
		if d.referrers[k] == nil {
			d.referrers[k] = make(map[ovsdb.UUID]struct{})
		}
		d.referrers[k][id] = struct{}{}
		touch(depKey{db: d.which, kind: depReferrers, table: table, name: c.Name, id: u})
	}
}

// refTable returns the table column c refers to, or "".
func refTable(c *ovsdb.ColumnSchema) string {
	if c.Type.Key.RefTable != "" {
		return c.Type.Key.RefTable
	}
	if c.Type.Value != nil {
		return c.Type.Value.RefTable
	}
	return ""
}

// isMembership says whether column c of table lists the members of a
// row (Logical_Switch.ports, Port_Group.acls): a generator that reads the
// row but not its members, and reads the members only through
// gen.Members, should not be rerun when a member comes or goes. Other
// reference columns (Logical_Router_Port.gateway_chassis, Meter.bands,
// Load_Balancer.health_check) are part of the row: Read returns them, so a
// change of them is a change of the row.
func isMembership(table string, c *ovsdb.ColumnSchema) bool {
	if c.Type.Key.RefTable == "" || c.Type.Value != nil || c.Type.Max <= 1 {
		return false
	}
	switch table {
	case "Logical_Switch":
		switch c.Name {
		case "ports", "acls", "qos_rules", "load_balancer", "load_balancer_group", "dns_records", "forwarding_groups":
			return true
		}
	case "Logical_Router":
		switch c.Name {
		case "ports", "nat", "policies", "static_routes", "load_balancer", "load_balancer_group":
			return true
		}
	case "Port_Group":
		return c.Name == "ports" || c.Name == "acls"
	case "Load_Balancer_Group":
		return c.Name == "load_balancer"
	}
	return false
}
