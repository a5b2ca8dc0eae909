package server

import (
	"crypto/tls"
	"io"
	"strings"

	"github.com/govn/govn/ovsdb"
)

// rbac enforces OVN's role-based access control on the writes of one
// session, as ovsdb-server does for a connection with a role (OVN
// Southbound's Connection.role).
//
// The rules live in the database being written: the RBAC_Role row named
// after the role maps table names to RBAC_Permission rows. A write to a
// table without a permission row is refused. Otherwise each row written
// (an insert's new row, the rows an update, mutate or delete matches, as
// they were) must authorize the client: one of the permission's
// "authorization" entries names a string column (or COLUMN:KEY of a
// string map) whose value is the client's identity, or is "" (anyone).
// Inserts and deletes also need "insert_delete"; updates and mutates
// may write only the columns listed in "update". A client without an
// identity (no TLS certificate) is refused everything. A database
// without an RBAC_Role table is not checked.
type rbac struct {
	role string
	// peerID returns the client's identity, the common name of its TLS
	// certificate; ok is false when it has none.
	peerID func() (id string, ok bool)
}

// newRBAC returns the checker for a session with role on rwc, or nil
// when role is "" (no checks).
func newRBAC(role string, rwc io.ReadWriteCloser) ovsdb.WriteChecker {
	if role == "" {
		return nil
	}
	return &rbac{role: role, peerID: func() (string, bool) { return peerCommonName(rwc) }}
}

// peerCommonName returns the CN of a TLS connection's peer certificate.
// By the time a request arrives the handshake is complete.
func peerCommonName(rwc io.ReadWriteCloser) (string, bool) {
	tc, ok := rwc.(*tls.Conn)
	if !ok {
		return "", false
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 || certs[0].Subject.CommonName == "" {
		return "", false
	}
	return certs[0].Subject.CommonName, true
}

// CheckWrite implements ovsdb.WriteChecker.
func (c *rbac) CheckWrite(db *ovsdb.Database, w ovsdb.Write) error {
	if db.Table("RBAC_Role") == nil {
		return nil
	}
	id, hasID := c.peerID()
	if !hasID || !c.permitted(db, id, w) {
		if !hasID {
			id = "(null)" // what ovsdb-server prints for no identity
		}
		return ovsdb.Errorf(ovsdb.ErrPermission, `RBAC rules for client "%s" role "%s" prohibit %s table "%s".`, id, c.role, refusal(w.Op), w.Table.Name)
	}
	return nil
}

// refusal words the refused operation as ovsdb-server does.
func refusal(op string) string {
	switch op {
	case "insert":
		return "row insertion into"
	case "delete":
		return "row deletion from"
	case "mutate":
		return "mutate operation on"
	}
	return "modification of"
}

func (c *rbac) permitted(db *ovsdb.Database, id string, w ovsdb.Write) bool {
	perm, ok := permission(db, c.role, w.Table.Name)
	if !ok {
		return false
	}
	for _, r := range w.Rows {
		if !authorizes(perm, id, r, w.Table) {
			return false
		}
		switch w.Op {
		case "insert", "delete":
			if !boolColumn(perm, "insert_delete") {
				return false
			}
		default:
			updatable := stringsColumn(perm, "update")
			for _, col := range w.Columns {
				if !updatable[col.Name] {
					return false
				}
			}
		}
	}
	return true
}

// permRow is an RBAC_Permission row with its table's schema.
type permRow struct {
	ts  *ovsdb.TableSchema
	row *ovsdb.Row
}

// permission returns the RBAC_Permission row that role has for table.
func permission(db *ovsdb.Database, role, table string) (permRow, bool) {
	roles, permTable := db.Table("RBAC_Role"), db.Table("RBAC_Permission")
	if permTable == nil {
		return permRow{}, false
	}
	name, perms := roles.Schema.Column("name"), roles.Schema.Column("permissions")
	if name == nil || perms == nil || perms.Type.Value == nil || perms.Type.Value.Type != ovsdb.TypeUUID {
		return permRow{}, false
	}
	for _, r := range roles.Rows {
		if d := r.Get(name); d.Len() != 1 || d.Keys[0].Str() != role {
			continue
		}
		u, ok := r.Get(perms).Lookup(ovsdb.String(table))
		if !ok {
			return permRow{}, false
		}
		p := permTable.Rows[u.UUID()]
		return permRow{permTable.Schema, p}, p != nil
	}
	return permRow{}, false
}

// authorizes reports whether permission row perm lets client id write
// row r of table ts.
func authorizes(perm permRow, id string, r *ovsdb.Row, ts *ovsdb.TableSchema) bool {
	for _, auth := range stringsOf(perm, "authorization") {
		if auth == "" {
			return true
		}
		if v, ok := authValue(auth, r, ts); ok && v == id {
			return true
		}
	}
	return false
}

// authValue reads what an authorization entry names in r: a string
// column, or COLUMN:KEY in a string-to-string map.
func authValue(auth string, r *ovsdb.Row, ts *ovsdb.TableSchema) (string, bool) {
	if strings.Contains(auth, ":") {
		parts := strings.FieldsFunc(auth, func(c rune) bool { return c == ':' })
		if len(parts) < 2 {
			return "", false
		}
		col := ts.Column(parts[0])
		if col == nil || col.Type.Key.Type != ovsdb.TypeString || col.Type.Value == nil || col.Type.Value.Type != ovsdb.TypeString {
			return "", false
		}
		v, ok := r.Get(col).Lookup(ovsdb.String(parts[1]))
		return v.Str(), ok
	}
	col := ts.Column(auth)
	if col == nil || col.Type.Key.Type != ovsdb.TypeString || col.Type.Value != nil {
		return "", false
	}
	d := r.Get(col)
	if d.Len() != 1 {
		return "", false
	}
	return d.Keys[0].Str(), true
}

// boolColumn reads a boolean column of r (false when absent).
func boolColumn(r permRow, name string) bool {
	d, ok := column(r, name, ovsdb.TypeBoolean)
	return ok && d.Len() == 1 && d.Keys[0].Bool()
}

// stringsColumn reads a set-of-strings column of r as a set.
func stringsColumn(r permRow, name string) map[string]bool {
	out := map[string]bool{}
	for _, s := range stringsOf(r, name) {
		out[s] = true
	}
	return out
}

// stringsOf returns the strings of a string (set) column of r.
func stringsOf(r permRow, name string) []string {
	d, ok := column(r, name, ovsdb.TypeString)
	if !ok {
		return nil
	}
	out := make([]string, d.Len())
	for i, k := range d.Keys {
		out[i] = k.Str()
	}
	return out
}

// column returns the datum of r's column name if its keys have type t and
// it has no values.
func column(r permRow, name string, t ovsdb.AtomicType) (ovsdb.Datum, bool) {
	c := r.ts.Column(name)
	if c == nil || c.Type.Key.Type != t || c.Type.Value != nil {
		return ovsdb.Datum{}, false
	}
	return r.row.Get(c), true
}
