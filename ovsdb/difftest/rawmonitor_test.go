package difftest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawMonitorTxns change columns of every kind: scalars, optional values
// (set, changed, cleared, set again), maps and sets of references,
// including weak references cleared by a deletion.
var rawMonitorTxns = []string{
	`[{"op":"insert","table":"Logical_Router","row":{"name":"r1","enabled":true,"options":["map",[["a","1"]]]}}]`,
	`[{"op":"update","table":"Logical_Router","where":[],"row":{"enabled":false}}]`,
	`[{"op":"update","table":"Logical_Router","where":[],"row":{"enabled":["set",[]]}}]`,
	`[{"op":"update","table":"Logical_Router","where":[],"row":{"enabled":true}}]`,
	`[{"op":"mutate","table":"Logical_Router","where":[],"mutations":[["options","insert",["map",[["b","2"]]]]]}]`,
	`[{"op":"update","table":"Logical_Router","where":[],"row":{"options":["map",[["a","9"],["b","2"]]]}}]`,
	`[{"op":"mutate","table":"Logical_Router","where":[],"mutations":[["options","delete",["set",["a"]]]]}]`,
	`[{"op":"insert","table":"Load_Balancer","row":{"name":"lb1","vips":["map",[["1.1.1.1","2.2.2.2"]]],"protocol":"tcp"}}]`,
	`[{"op":"insert","table":"Load_Balancer","row":{"name":"lb2"}}]`,
	`[{"op":"insert","table":"Logical_Switch","row":{"name":"sw","load_balancer":["set",[]]}}]`,
	`[{"op":"mutate","table":"Logical_Switch","where":[["name","==","sw"]],"mutations":[["load_balancer","insert",["named-uuid","nothing"]]]}]`,
	`[{"op":"update","table":"Load_Balancer","where":[["name","==","lb1"]],"row":{"protocol":"udp"}}]`,
	`[{"op":"update","table":"Load_Balancer","where":[["name","==","lb1"]],"row":{"protocol":["set",[]]}}]`,
	`[{"op":"update","table":"Load_Balancer","where":[["name","==","lb1"]],"row":{"protocol":"sctp"}}]`,
	`[{"op":"insert","table":"DHCP_Options","row":{"cidr":"10.0.0.0/24"}}]`,
	`[{"op":"insert","table":"DHCP_Options","row":{"cidr":"20.0.0.0/24"}}]`,
	`[{"op":"update","table":"Logical_Switch","where":[["name","==","sw"]],"row":{"other_config":["map",[["x","y"]]]}}]`,
	`[{"op":"delete","table":"Load_Balancer","where":[["name","==","lb2"]]}]`,
	`[{"op":"update","table":"Logical_Switch","where":[["name","==","sw"]],"row":{"name":"sw-renamed","other_config":["map",[]]}}]`,
	`[{"op":"delete","table":"DHCP_Options","where":[["cidr","==","20.0.0.0/24"]]}]`,
	`[{"op":"delete","table":"Logical_Switch","where":[]}]`,
}

// TestRawMonitorUpdates compares, notification by notification, the
// update2 and update3 messages of monitor_cond and monitor_cond_since that
// the target and the real ovsdb-server send for rawMonitorTxns: what ovsdb-idl clients (northd,
// controllers) apply to their replicas, so any difference in the encoding
// of a "modify" makes their view of the database drift.
func TestRawMonitorUpdates(t *testing.T) {
	need(t, "ovsdb-server", "ovsdb-tool")
	for _, method := range []string{"monitor_cond", "monitor_cond_since"} {
		t.Run(method, func(t *testing.T) {
			txns := slices.Clone(rawMonitorTxns)
			ref := runRawMonitor(t, startServer(t, kindReal, "nb"), method, txns)
			got := runRawMonitor(t, startServer(t, target(), "nb"), method, txns)
			diffTranscripts(t, "raw-"+method+"-updates", ref, got)
		})
	}
}

// runRawMonitor monitors with method (monitor_cond, whose notifications
// are update2, or monitor_cond_since, update3) while running txns, and
// returns the transcript of transactions and the updates they caused.
func runRawMonitor(t *testing.T, s *dbServer, method string, txns []string) string {
	w, err := dialRPC(s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer w.c.Close()
	m, err := dialRPC(s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer m.c.Close()
	requests := `{
		"Logical_Router":[{"columns":["name","enabled","options"]}],
		"Load_Balancer":[{"columns":["name","vips","protocol"]}],
		"Logical_Switch":[{"columns":["name","load_balancer","other_config"]}],
		"DHCP_Options":[{"columns":["cidr"]}]}`
	req := `{"id":"mon","method":"monitor_cond","params":["OVN_Northbound",["mon"],` + requests + `]}`
	notification, nparams := "update2", 2
	if method == "monitor_cond_since" {
		req = `{"id":"mon","method":"monitor_cond_since","params":["OVN_Northbound",["mon"],` + requests + `,"00000000-0000-0000-0000-000000000000"]}`
		notification, nparams = "update3", 3
	}
	if _, err := m.c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{} // row UUID -> "<table#n>", in order of insertion
	var b strings.Builder
	readMsg := func() (rpcMessage, error) {
		m.c.SetReadDeadline(time.Now().Add(3 * time.Second))
		var msg rpcMessage
		err := m.dec.Decode(&msg)
		return msg, err
	}
	if msg, err := readMsg(); err != nil || len(msg.Error) > 0 && string(msg.Error) != "null" {
		t.Fatalf("%s: %s: %v %s", s.kind, method, err, msg.Error)
	}
	// name -> UUID, for the transaction that refers to lb1 and lb2 by the
	// UUIDs their inserts returned.
	uuids := map[string]string{}
	for i, txn := range txns {
		txn = strings.ReplaceAll(txn, `["named-uuid","nothing"]`, fmt.Sprintf(`["set",[["uuid",%q],["uuid",%q]]]`, uuids["lb1"], uuids["lb2"]))
		var ops []any
		if err := json.Unmarshal([]byte(txn), &ops); err != nil {
			t.Fatalf("txn %d: %v", i, err)
		}
		res, err := w.transact(ops...)
		fmt.Fprintf(&b, "$ txn %d: %s\n", i+1, uuidRE.ReplaceAllStringFunc(txn, func(u string) string { return nameOf(u, names) }))
		if err != nil {
			fmt.Fprintf(&b, "  error: %v\n", normalizeNoise(err.Error()))
			continue
		}
		for j, r := range res {
			if u, ok := r["uuid"].([]any); ok && len(u) == 2 {
				table := ops[j].(map[string]any)["table"].(string)
				names[u[1].(string)] = fmt.Sprintf("<%s#%d>", table, len(names)+1)
				if row, ok := ops[j].(map[string]any)["row"].(map[string]any); ok {
					if n, ok := row["name"].(string); ok {
						uuids[n] = u[1].(string)
					}
				}
			}
		}
		msg, err := readMsg()
		if err != nil {
			fmt.Fprintf(&b, "  (no update: %v)\n", err)
			continue
		}
		var params []json.RawMessage
		if msg.Method != notification || json.Unmarshal(msg.Params, &params) != nil || len(params) != nparams {
			fmt.Fprintf(&b, "  unexpected message: %s %.200s\n", msg.Method, msg.Params)
			continue
		}
		b.WriteString(renderTableUpdates(params[nparams-1], names))
	}
	return b.String()
}

// renderTableUpdates writes one line per row change, sorted, with UUIDs
// replaced by the names of the rows the test inserted and set members
// sorted, so two servers' updates compare equal exactly when a client
// would apply them alike.
func renderTableUpdates(raw json.RawMessage, names map[string]string) string {
	var tu map[string]map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &tu); err != nil {
		return fmt.Sprintf("  unparsable update: %.200s\n", raw)
	}
	var lines []string
	for table, rows := range tu {
		for u, change := range rows {
			for action, row := range change {
				var cols []string
				for c, v := range row {
					cols = append(cols, c+"="+renderValue(v, names))
				}
				slices.Sort(cols)
				lines = append(lines, fmt.Sprintf("  %s %s %s %s\n", table, nameOf(u, names), action, strings.Join(cols, " ")))
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

func nameOf(u string, names map[string]string) string {
	if n, ok := names[u]; ok {
		return n
	}
	return "<unknown-uuid>"
}

func renderValue(v any, names map[string]string) string {
	switch v := v.(type) {
	case []any:
		if len(v) == 2 {
			if tag, _ := v[0].(string); tag == "uuid" {
				u, _ := v[1].(string)
				return nameOf(u, names)
			}
			if tag, _ := v[0].(string); tag == "set" || tag == "map" {
				elems, _ := v[1].([]any)
				var out []string
				for _, e := range elems {
					out = append(out, renderValue(e, names))
				}
				slices.Sort(out)
				return tag + "{" + strings.Join(out, ",") + "}"
			}
		}
		var out []string
		for _, e := range v {
			out = append(out, renderValue(e, names))
		}
		return "[" + strings.Join(out, ",") + "]"
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
