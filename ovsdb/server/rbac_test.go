package server

import (
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
)

// rbacSchema is the part of OVN Southbound that RBAC needs: the rule
// tables and tables authorized by a string column, by a map key and by
// anyone ("").
const rbacSchema = `{"name":"OVN_Southbound","version":"1.0.0","tables":{
 "Chassis":{"columns":{"name":{"type":"string"},"hostname":{"type":"string"},
   "nb_cfg":{"type":"integer"},"transport_zones":{"type":{"key":"string","min":0,"max":"unlimited"}}},"isRoot":true},
 "Encap":{"columns":{"chassis_name":{"type":"string"},"ip":{"type":"string"}},"isRoot":true},
 "Port_Binding":{"columns":{"logical_port":{"type":"string"},"up":{"type":"boolean"},"tag":{"type":"integer"}},"isRoot":true},
 "Datapath_Binding":{"columns":{"tunnel_key":{"type":"integer"},
   "external_ids":{"type":{"key":"string","value":"string","min":0,"max":"unlimited"}},
   "load_balancers":{"type":{"key":"string","min":0,"max":"unlimited"}}},"isRoot":true},
 "MAC_Binding":{"columns":{"mac":{"type":"string"}},"isRoot":true},
 "RBAC_Role":{"columns":{"name":{"type":"string"},
   "permissions":{"type":{"key":"string","value":{"type":"uuid","refTable":"RBAC_Permission","refType":"weak"},"min":0,"max":"unlimited"}}},"isRoot":true},
 "RBAC_Permission":{"columns":{"table":{"type":"string"},
   "authorization":{"type":{"key":"string","min":0,"max":"unlimited"}},
   "insert_delete":{"type":"boolean"},
   "update":{"type":{"key":"string","min":0,"max":"unlimited"}}},"isRoot":true}}}`

// rbacRules are rows like ovn-northd's (and those of the differential
// test, TestRealRBAC).
const rbacRules = `[
 {"op":"insert","table":"RBAC_Permission","uuid-name":"pch","row":{"table":"Chassis","authorization":"name","insert_delete":true,"update":["set",["nb_cfg","hostname"]]}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"pen","row":{"table":"Encap","authorization":"chassis_name","insert_delete":true,"update":["set",["ip"]]}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"ppb","row":{"table":"Port_Binding","authorization":"","insert_delete":false,"update":["set",["up"]]}},
 {"op":"insert","table":"RBAC_Permission","uuid-name":"pdp","row":{"table":"Datapath_Binding","authorization":"external_ids:chassis","insert_delete":false,"update":["set",["load_balancers"]]}},
 {"op":"insert","table":"RBAC_Role","row":{"name":"ovn-controller","permissions":["map",[["Chassis",["named-uuid","pch"]],["Encap",["named-uuid","pen"]],["Port_Binding",["named-uuid","ppb"]],["Datapath_Binding",["named-uuid","pdp"]]]]}},
 {"op":"insert","table":"Chassis","row":{"name":"hv2","hostname":"h2"}},
 {"op":"insert","table":"Port_Binding","row":{"logical_port":"lp1"}},
 {"op":"insert","table":"Datapath_Binding","row":{"tunnel_key":1,"external_ids":["map",[["chassis","hv1"]]]}}]`

func rbacDB(t testing.TB) *ovsdb.Database {
	t.Helper()
	s, err := ovsdb.ParseSchema([]byte(rbacSchema))
	if err != nil {
		t.Fatal(err)
	}
	db := ovsdb.NewDatabase(s)
	applyTxn(t, db, rbacRules, ovsdb.TxnOptions{})
	return db
}

// applyTxn runs a transaction, commits what it changed and returns its reply.
func applyTxn(t testing.TB, db *ovsdb.Database, ops string, opts ovsdb.TxnOptions) string {
	t.Helper()
	v, err := ovsdb.DecodeJSON([]byte(ops))
	if err != nil {
		t.Fatalf("%s: %v", ops, err)
	}
	res := db.Transact(v.([]any), opts)
	if res.Changes != nil {
		db.Apply(res.Changes)
	}
	return string(res.Reply)
}

func denied(id, what, table string) string {
	return `{"error":"permission error","details":"RBAC rules for client \"` + id + `\" role \"ovn-controller\" prohibit ` + what + ` table \"` + table + `\"."}`
}

// TestRBACChecker runs, as chassis hv1, the writes whose replies were
// recorded from ovsdb-server 3.1 with the same rules (see the report of
// TestRealRBAC, which compares them live).
func TestRBACChecker(t *testing.T) {
	db := rbacDB(t)
	hv1 := &rbac{role: "ovn-controller", peerID: func() (string, bool) { return "hv1", true }}
	steps := []struct {
		name, ops, want string
	}{
		{"insert own", `[{"op":"insert","table":"Encap","row":{"chassis_name":"hv1"}},{"op":"insert","table":"Chassis","uuid-name":"c","row":{"name":"hv1"}},{"op":"select","table":"Chassis","where":[["_uuid","==",["named-uuid","c"]]],"columns":["name"]}]`,
			`[{"uuid":"<u>"]},{"uuid":"<u>"]},{"rows":[{"name":"hv1"}]}]`},
		{"insert other's", `[{"op":"insert","table":"Encap","row":{"chassis_name":"hv3"}}]`, `[` + denied("hv1", "row insertion into", "Encap") + `]`},
		{"update allowed column", `[{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"hostname":"x"}}]`, `[{"count":1}]`},
		{"update other column", `[{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"name":"hv9"}}]`, `[` + denied("hv1", "modification of", "Chassis") + `]`},
		{"update to the same value", `[{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"name":"hv1"}}]`, `[` + denied("hv1", "modification of", "Chassis") + `]`},
		{"update other's row", `[{"op":"update","table":"Chassis","where":[["name","==","hv2"]],"row":{"hostname":"y"}}]`, `[` + denied("hv1", "modification of", "Chassis") + `]`},
		{"update other's row, nothing", `[{"op":"update","table":"Chassis","where":[["name","==","hv2"]],"row":{}}]`, `[` + denied("hv1", "modification of", "Chassis") + `]`},
		{"update matching nothing", `[{"op":"update","table":"Chassis","where":[["name","==","zz"]],"row":{"name":"q"}}]`, `[{"count":0}]`},
		{"anyone may update", `[{"op":"update","table":"Port_Binding","where":[],"row":{"up":true}}]`, `[{"count":1}]`},
		{"anyone, other column", `[{"op":"update","table":"Port_Binding","where":[],"row":{"tag":5}}]`, `[` + denied("hv1", "modification of", "Port_Binding") + `]`},
		{"no insert_delete", `[{"op":"insert","table":"Port_Binding","row":{"logical_port":"lp2"}}]`, `[` + denied("hv1", "row insertion into", "Port_Binding") + `]`},
		{"mutate allowed", `[{"op":"mutate","table":"Chassis","where":[["name","==","hv1"]],"mutations":[["nb_cfg","+=",1]]}]`, `[{"count":1}]`},
		{"mutate other column", `[{"op":"mutate","table":"Chassis","where":[["name","==","hv1"]],"mutations":[["transport_zones","insert","z"]]}]`, `[` + denied("hv1", "mutate operation on", "Chassis") + `]`},
		{"mutate other's row", `[{"op":"mutate","table":"Chassis","where":[],"mutations":[["nb_cfg","+=",1]]}]`, `[` + denied("hv1", "mutate operation on", "Chassis") + `]`},
		{"map key authorizes", `[{"op":"update","table":"Datapath_Binding","where":[],"row":{"load_balancers":["set",[]]}}]`, `[{"count":1}]`},
		{"table without permission", `[{"op":"insert","table":"MAC_Binding","row":{"mac":"m"}}]`, `[` + denied("hv1", "row insertion into", "MAC_Binding") + `]`},
		{"delete matching nothing, no permission", `[{"op":"delete","table":"MAC_Binding","where":[]}]`, `[` + denied("hv1", "row deletion from", "MAC_Binding") + `]`},
		{"delete other's", `[{"op":"delete","table":"Chassis","where":[["name","==","hv2"]]}]`, `[` + denied("hv1", "row deletion from", "Chassis") + `]`},
		{"delete matching nothing", `[{"op":"delete","table":"Chassis","where":[["name","==","nope"]]}]`, `[{"count":0}]`},
		{"refusal aborts the rest", `[{"op":"update","table":"Chassis","where":[["name","==","hv1"]],"row":{"name":"zz"}},{"op":"delete","table":"Chassis","where":[["name","==","hv1"]]}]`,
			`[` + denied("hv1", "modification of", "Chassis") + `,null]`},
		{"delete own", `[{"op":"delete","table":"Chassis","where":[["name","==","hv1"]]}]`, `[{"count":1}]`},
		{"select", `[{"op":"select","table":"Chassis","where":[],"columns":["name"]}]`, `[{"rows":[{"name":"hv2"}]}]`},
	}
	for _, s := range steps {
		got := uuidsMasked(applyTxn(t, db, s.ops, ovsdb.TxnOptions{Checker: hv1}))
		if got != s.want {
			t.Errorf("%s:\n got %s\nwant %s", s.name, got, s.want)
		}
	}
}

// TestRBACIdentityAndRole: no certificate, an unknown role, no role and a
// database without RBAC tables.
func TestRBACIdentityAndRole(t *testing.T) {
	insertOwn := `[{"op":"insert","table":"Chassis","row":{"name":"hv1"}}]`
	tests := []struct {
		name    string
		checker ovsdb.WriteChecker
		plain   bool // a database without RBAC tables
		want    string
	}{
		{"no identity", &rbac{role: "ovn-controller", peerID: func() (string, bool) { return "", false }}, false,
			`[` + denied("(null)", "row insertion into", "Chassis") + `]`},
		{"unknown role", &rbac{role: "other", peerID: func() (string, bool) { return "hv1", true }}, false,
			`[{"error":"permission error","details":"RBAC rules for client \"hv1\" role \"other\" prohibit row insertion into table \"Chassis\"."}]`},
		{"no role", newRBAC("", nil), false, `[{"uuid":"<u>"]}]`},
		{"no RBAC tables", &rbac{role: "ovn-controller", peerID: func() (string, bool) { return "", false }}, true, `[{"uuid":"<u>"]}]`},
	}
	for _, tc := range tests {
		db := rbacDB(t)
		if tc.plain {
			s, err := ovsdb.ParseSchema([]byte(`{"name":"X","tables":{"Chassis":{"columns":{"name":{"type":"string"}}}}}`))
			if err != nil {
				t.Fatal(err)
			}
			db = ovsdb.NewDatabase(s)
		}
		if got := uuidsMasked(applyTxn(t, db, insertOwn, ovsdb.TxnOptions{Checker: tc.checker})); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// uuidsMasked replaces each ["uuid","..."] of a reply with <u>.
func uuidsMasked(reply string) string {
	return uuidRE.ReplaceAllString(strings.ReplaceAll(reply, `["uuid","`, `"`), "<u>")
}

// BenchmarkRBACUpdate measures a chassis' permitted update with the
// check against one without (ovn-controller's nb_cfg bump).
func BenchmarkRBACUpdate(b *testing.B) {
	db := rbacDB(b)
	applyTxn(b, db, `[{"op":"insert","table":"Chassis","row":{"name":"hv1"}}]`, ovsdb.TxnOptions{})
	v, err := ovsdb.DecodeJSON([]byte(`[{"op":"mutate","table":"Chassis","where":[["name","==","hv1"]],"mutations":[["nb_cfg","+=",1]]}]`))
	if err != nil {
		b.Fatal(err)
	}
	ops := v.([]any)
	hv1 := &rbac{role: "ovn-controller", peerID: func() (string, bool) { return "hv1", true }}
	for _, bc := range []struct {
		name    string
		checker ovsdb.WriteChecker
	}{{"unchecked", nil}, {"rbac", hv1}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if res := db.Transact(ops, ovsdb.TxnOptions{Checker: bc.checker}); res.Failed {
					b.Fatalf("refused: %s", res.Reply)
				}
			}
		})
	}
}
