package server

import (
	"fmt"

	"github.com/govn/govn/ovsdb"
)

// serverDBName is the name of the database describing the server's
// databases (ovsdb-server(5)).
const serverDBName = "_Server"

// serverSchemaJSON is govn's _Server schema: the Database table with the
// columns ovsdb-server(5) documents. The cksum is the one ovsdb-server
// reports for its _Server schema, so get-schema output is the same.
const serverSchemaJSON = `{
  "name": "_Server",
  "cksum": "3009684573 744",
  "version": "1.2.0",
  "tables": {
    "Database": {
      "isRoot": true,
      "columns": {
        "name": {"type": "string"},
        "model": {"type": {"key": {"type": "string", "enum": ["set", ["clustered", "relay", "standalone"]]}}},
        "connected": {"type": "boolean"},
        "leader": {"type": "boolean"},
        "schema": {"type": {"key": "string", "min": 0, "max": 1}},
        "cid": {"type": {"key": "uuid", "min": 0, "max": 1}},
        "sid": {"type": {"key": "uuid", "min": 0, "max": 1}},
        "index": {"type": {"key": "integer", "min": 0, "max": 1}}
      }
    }
  }
}`

// addServerRow describes d in _Server.Database. Every database served here
// is standalone, connected and its own leader.
func (s *Server) addServerRow(d *dbState) error {
	ts := s.server.db.Schema.Table("Database")
	row := ovsdb.NewRow(ts, ovsdb.NewUUID())
	set := func(col string, v ovsdb.Datum) { row.Data[ts.Column(col).Index] = v }
	set("name", ovsdb.Scalar(ovsdb.String(d.name)))
	set("model", ovsdb.Scalar(ovsdb.String("standalone")))
	set("connected", ovsdb.Scalar(ovsdb.Boolean(true)))
	set("leader", ovsdb.Scalar(ovsdb.Boolean(true)))
	set("schema", ovsdb.Scalar(ovsdb.String(string(d.db.Schema.JSON()))))
	row.Version = ovsdb.NewUUID()
	cs := &ovsdb.ChangeSet{Tables: map[string]map[ovsdb.UUID]*ovsdb.RowChange{"Database": {row.UUID: {New: row}}}}
	srv := s.server
	srv.mu.Lock()
	defer srv.unlock()
	if _, err := srv.commitLocked(cs); err != nil {
		return fmt.Errorf("describing %s in _Server: %w", d.name, err)
	}
	return nil
}
