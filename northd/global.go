package northd

import (
	"maps"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// northdInternalVersion is the interface version ovn-northd 23.03 writes
// in SB_Global:options:northd_internal_version. An ovn-controller with
// ovn-match-northd-version=true refuses a Southbound whose version differs
// from its own; govn writes the one whose Southbound it writes.
const northdInternalVersion = "23.03.1-20.27.0-70.6"

// rbacPermission is what a chassis may do to one Southbound table (ovn-sb(5)
// "RBAC_Permission"): authorization names the column that must hold the
// chassis's name ("" for any row), update lists the columns it may change.
type rbacPermission struct {
	table         string
	authorization string
	insertDelete  bool
	update        []string
}

// controllerPermissions are the RBAC_Permission rows of the role
// "ovn-controller", as ovn-northd creates them.
func controllerPermissions() []rbacPermission {
	return []rbacPermission{
		{"BFD", "", false, []string{"status"}},
		{"Chassis", "name", true, []string{"encaps", "external_ids", "nb_cfg", "other_config", "transport_zones", "vtep_logical_switches"}},
		{"Chassis_Private", "name", true, []string{"chassis", "external_ids", "nb_cfg", "nb_cfg_timestamp"}},
		{"Controller_Event", "", true, []string{"chassis", "event_info", "event_type", "seq_num"}},
		{"Encap", "chassis_name", true, []string{"ip", "options", "type"}},
		{"FDB", "", true, []string{"dp_key", "mac", "port_key"}},
		{"IGMP_Group", "", true, []string{"address", "chassis", "datapath", "ports"}},
		{"MAC_Binding", "", true, []string{"datapath", "ip", "logical_port", "mac", "timestamp"}},
		{"Port_Binding", "", false, []string{"additional_chassis", "additional_encap", "chassis", "encap", "options", "up", "virtual_parent"}},
		{"Service_Monitor", "", false, []string{"status"}},
	}
}

// nbGlobal returns the Northbound's NB_Global row (the first, if a broken
// database has several), recording the dependencies.
func nbGlobal(g *gen) (nb.NBGlobal, bool) {
	ids := g.All(NB, nb.NBGlobalTable)
	if len(ids) == 0 {
		return nb.NBGlobal{}, false
	}
	if len(ids) > 1 {
		g.Warn("Northbound has several NB_Global rows; using the first", "count", len(ids))
	}
	return Read[nb.NBGlobal](g, NB, ids[0])
}

// genGlobal writes SB_Global, the RBAC role of chassis and the address set
// of the service monitor MAC.
func genGlobal(g *gen) {
	dhcpOptionTables(g)
	glob, ok := nbGlobal(g)
	if ok {
		opts := maps.Clone(glob.Options)
		if opts == nil {
			opts = map[string]string{}
		}
		opts["northd_internal_version"] = northdInternalVersion
		g.Record("SB_Global", "", map[string]ovsdb.Datum{
			"nb_cfg":       dInt(glob.NBCfg),
			"options":      dMap(opts),
			"external_ids": dMap(glob.ExternalIDs),
			"ipsec":        dBool(glob.IPsec),
		})
		if mac := glob.Options["svc_monitor_mac"]; mac != "" {
			g.Record("Address_Set", "svc_monitor_mac", map[string]ovsdb.Datum{
				"name":      dString("svc_monitor_mac"),
				"addresses": dStrings([]string{mac}),
			})
		}
	}

	perms := controllerPermissions()
	keys := make([]ovsdb.Atom, 0, len(perms))
	vals := make([]ovsdb.Atom, 0, len(perms))
	for _, p := range perms {
		g.Record("RBAC_Permission", p.table, map[string]ovsdb.Datum{
			"table":         dString(p.table),
			"authorization": dStrings([]string{p.authorization}),
			"insert_delete": dBool(p.insertDelete),
			"update":        dStrings(p.update),
		})
		keys = append(keys, ovsdb.String(p.table))
		vals = append(vals, ovsdb.UUIDAtom(g.Ref("RBAC_Permission", p.table)))
	}
	g.Record("RBAC_Role", "ovn-controller", map[string]ovsdb.Datum{
		"name":        dString("ovn-controller"),
		"permissions": ovsdb.Map(keys, vals),
	})
}
