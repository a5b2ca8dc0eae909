package northd

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/govn/govn/ovsdb"
)

// The reference comparison of Southbound rows other than logical flows:
// each row of the tables below becomes one line per column, named by the
// row's key, with references replaced by the referenced row's key (or, for
// rows of non-root tables, by their normalized contents), so that the two
// Southbounds compare although their UUIDs differ.

// compareTables lists the tables compared, with the columns left out:
// those chassis write, and those whose values ovn-northd picks by timing.
var compareTables = map[string][]string{
	"Port_Binding":     {"chassis", "encap", "up", "virtual_parent", "additional_chassis", "additional_encap"},
	"Multicast_Group":  nil,
	"Datapath_Binding": nil,
	"Port_Group":       nil,
	"Address_Set":      nil,
	"Load_Balancer":    nil,
	"DNS":              nil,
	"IP_Multicast":     {"seq_no"},
	"DHCP_Options":     nil,
	"DHCPv6_Options":   nil,
	"Meter":            nil,
	"Service_Monitor":  {"status"},
	"HA_Chassis_Group": {"ref_chassis"},
	// BFD's disc is random in ovn-northd and src_port in its hash order;
	// status is the chassis'.
	"BFD":                {"disc", "status", "src_port"},
	"Static_MAC_Binding": nil,
}

// uuidText finds the Northbound UUIDs rows carry in external_ids
// (logical-switch, lb_id, dns_id): new in every run of the script.
var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// rtrLBSet finds the names of the address sets ovn-northd makes of a
// router's load balancer VIPs, numbered in no fixed order.
var rtrLBSet = regexp.MustCompile(`_rtr_lb_\d+_`)

// rowSet is a whole database's rows, by table and UUID.
type rowSet map[string]map[ovsdb.UUID]*ovsdb.Row

func eventRows(evs []Event) rowSet {
	rs := rowSet{}
	for _, ev := range evs {
		if rs[ev.Table] == nil {
			rs[ev.Table] = map[ovsdb.UUID]*ovsdb.Row{}
		}
		rs[ev.Table][ev.New.UUID] = ev.New
	}
	return rs
}

// sbRowLines returns the normalized lines of the compared tables. Tunnel
// keys of datapaths and ports are replaced by "*" unless requested (in
// nbReq, the requested keys by name, or options:requested-tnl-key): the
// real ovn-northd hands the others out in the order the script's
// transactions reach it, govn in UUID order.
func sbRowLines(schema *ovsdb.Schema, rows rowSet, dpRequested map[string]bool) []string {
	n := &rowNormalizer{schema: schema, rows: rows}
	var lines []string
	for table, skip := range compareTables {
		ts := schema.Tables[table]
		if ts == nil {
			continue
		}
		for _, r := range rows[table] {
			key := n.key(table, r)
			for _, c := range ts.Columns {
				if contains(skip, c.Name) {
					continue
				}
				v := n.value(c, r.Get(c))
				if c.Name == "tunnel_key" && !n.keyDeterministic(table, r, dpRequested) {
					v = "*"
				}
				if v == "" || v == "[]" || v == "{}" || (v == key && (c.Name == "name" || c.Name == "logical_port")) || (table == "Port_Group" && c.Name == "name") {
					continue
				}
				line := fmt.Sprintf("%s %s %s=%s", table, key, c.Name, v)
				line = rtrLBSet.ReplaceAllString(uuidText.ReplaceAllString(line, "<uuid>"), "_rtr_lb_N_")
				lines = append(lines, line)
			}
		}
	}
	sort.Strings(lines)
	return lines
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

type rowNormalizer struct {
	schema *ovsdb.Schema
	rows   rowSet
}

func (n *rowNormalizer) col(table string, r *ovsdb.Row, col string) ovsdb.Datum {
	return r.Get(n.schema.Tables[table].Column(col))
}

func (n *rowNormalizer) str(table string, r *ovsdb.Row, col string) string {
	d := n.col(table, r, col)
	if len(d.Keys) == 0 {
		return ""
	}
	return d.Keys[0].String()
}

func (n *rowNormalizer) ext(table string, r *ovsdb.Row, k string) string {
	v, _ := n.col(table, r, "external_ids").Lookup(ovsdb.String(k))
	return v.Str()
}

// key names a row the same way in both Southbounds.
func (n *rowNormalizer) key(table string, r *ovsdb.Row) string {
	ref := func(col string) string {
		d := n.col(table, r, col)
		if len(d.Keys) == 0 {
			return "-"
		}
		c := n.schema.Tables[table].Column(col)
		return n.refKey(c.Type.Key.RefTable, d.Keys[0].UUID())
	}
	switch table {
	case "Datapath_Binding":
		return n.ext(table, r, "name")
	case "Port_Binding":
		return n.str(table, r, "logical_port")
	case "Multicast_Group":
		return ref("datapath") + "/" + n.str(table, r, "name")
	case "IP_Multicast":
		return ref("datapath")
	case "DNS":
		return n.value(n.schema.Tables[table].Column("datapaths"), n.col(table, r, "datapaths"))
	case "Service_Monitor":
		return fmt.Sprintf("%s/%s/%s/%s", n.str(table, r, "logical_port"), n.str(table, r, "ip"), n.str(table, r, "port"), n.str(table, r, "protocol"))
	case "Chassis":
		return n.str(table, r, "name")
	case "BFD":
		return n.str(table, r, "logical_port") + "/" + n.str(table, r, "dst_ip")
	case "Static_MAC_Binding":
		return n.str(table, r, "logical_port") + "/" + n.str(table, r, "ip")
	case "Port_Group":
		// "<datapath tunnel key>_<name>": the key is named by its datapath.
		name := n.str(table, r, "name")
		if k, rest, ok := strings.Cut(name, "_"); ok {
			for _, dp := range n.rows["Datapath_Binding"] {
				if n.str("Datapath_Binding", dp, "tunnel_key") == k {
					return n.ext("Datapath_Binding", dp, "name") + "_" + rest
				}
			}
		}
		return name
	case "Logical_DP_Group":
		return n.value(n.schema.Tables[table].Column("datapaths"), n.col(table, r, "datapaths"))
	}
	if c := n.schema.Tables[table].Column("name"); c != nil {
		return n.str(table, r, "name")
	}
	return r.UUID.String()
}

// refKey names the row id of table: by its key, or for a row of a non-root
// table by its contents.
func (n *rowNormalizer) refKey(table string, id ovsdb.UUID) string {
	r := n.rows[table][id]
	if r == nil {
		return "missing:" + table
	}
	ts := n.schema.Tables[table]
	if ts.IsRoot {
		return n.key(table, r)
	}
	var parts []string
	for _, c := range ts.Columns {
		if v := n.value(c, r.Get(c)); v != "" && v != "[]" && v != "{}" {
			parts = append(parts, c.Name+"="+v)
		}
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// value renders a column's value with references replaced by keys.
func (n *rowNormalizer) value(c *ovsdb.ColumnSchema, d ovsdb.Datum) string {
	atom := func(a ovsdb.Atom, bt *ovsdb.BaseType) string {
		if bt.RefTable != "" {
			return n.refKey(bt.RefTable, a.UUID())
		}
		return a.String()
	}
	if c.Type.IsMap() {
		parts := make([]string, len(d.Keys))
		for i := range d.Keys {
			parts[i] = atom(d.Keys[i], &c.Type.Key) + "=" + atom(d.Values[i], c.Type.Value)
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ", ") + "}"
	}
	if c.Type.Max == 1 && c.Type.Min == 1 {
		return atom(d.Keys[0], &c.Type.Key)
	}
	parts := make([]string, len(d.Keys))
	for i, a := range d.Keys {
		parts[i] = atom(a, &c.Type.Key)
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, ", ") + "]"
}

// keyDeterministic says whether a row's tunnel key is one both northds
// must agree on: multicast groups' fixed keys and requested keys.
func (n *rowNormalizer) keyDeterministic(table string, r *ovsdb.Row, dpRequested map[string]bool) bool {
	switch table {
	case "Port_Binding":
		_, ok := n.col(table, r, "options").Lookup(ovsdb.String("requested-tnl-key"))
		return ok
	case "Datapath_Binding":
		return dpRequested[n.ext(table, r, "name")]
	}
	return true
}
