package server

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
	"github.com/govn/govn/schema"
)

// southboundFlows is a transact request's params in the shape of a first
// Southbound: datapaths and flows on them, as govn northd writes them.
func southboundFlows(datapaths, flows int) []byte {
	var b strings.Builder
	b.WriteString(`["OVN_Southbound"`)
	for i := range datapaths {
		fmt.Fprintf(&b, `,{"op":"insert","table":"Datapath_Binding","row":{"external_ids":["map",[["logical-switch","%08x-0000-4000-8000-000000000000"],["name","node%d"]]],"tunnel_key":%d},"uuid-name":"dp%d"}`, i, i, i+1, i)
	}
	for i := range flows {
		fmt.Fprintf(&b, `,{"op":"insert","table":"Logical_Flow","row":{"actions":"eth.dst = 0a:58:0a:80:%02x:%02x; next;","external_ids":["map",[["stage-hint","%08x"],["stage-name","lr_in_arp_resolve"]]],"logical_datapath":["named-uuid","dp%d"],"match":"outport == \"rtos-node%d\" && reg0 == 10.128.%d.%d","pipeline":"ingress","priority":100,"table_id":17},"uuid-name":"f%d"}`,
			i/256%256, i%256, i*7919, i%datapaths, i%datapaths, i/256%256, i%256, i)
	}
	b.WriteString(`]`)
	return []byte(b.String())
}

// BenchmarkCommitLarge measures the server's side of a first Southbound of
// 20,000 flows: decoding and executing the request, applying it, encoding
// the update for a monitor of every table (as northd's) and the record,
// writing and syncing the log.
func BenchmarkCommitLarge(b *testing.B) {
	req := southboundFlows(100, 20000)
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		file := filepath.Join(b.TempDir(), "sb.db")
		if err := CreateFile(file, schema.MustLookup("sb")); err != nil {
			b.Fatal(err)
		}
		db, log, err := OpenFile(file, quietLogger())
		if err != nil {
			b.Fatal(err)
		}
		srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
		if err := srv.AddDatabase(db, log); err != nil {
			b.Fatal(err)
		}
		d := srv.database("OVN_Southbound")
		closed := make(chan struct{})
		sess := &session{srv: srv, monitors: map[string]*monitor{}, locks: map[string]bool{}, pending: map[string][]*blockedTxn{}}
		sess.conn = jsonrpc.NewConn(b.Context(), discard{closed}, jsonrpc.Options{Logger: quietLogger()})
		all := map[string]any{}
		for name := range db.Schema.Tables {
			all[name] = []any{map[string]any{}}
		}
		text, _ := json.Marshal(all)
		v, _ := ovsdb.DecodeJSON(text)
		tables, err := parseMonitorRequests(d.db, v, monitorV3)
		if err != nil {
			b.Fatal(err)
		}
		m := &monitor{sess: sess, d: d, version: monitorV3, tables: tables}
		m.setID(json.RawMessage(`"m"`))
		m.computeShape()
		d.mu.Lock()
		d.monitors[m] = struct{}{}
		d.watchLocked(m)
		d.unlock()
		b.StartTimer()

		params, err := ovsdb.DecodeJSON(req)
		if err != nil {
			b.Fatal(err)
		}
		d.mu.Lock()
		res := d.db.Transact(params.([]any)[1:], ovsdb.TxnOptions{})
		if res.Failed {
			b.Fatalf("%.300s", res.Reply)
		}
		commit, err := d.commitLocked(res.Changes)
		d.unlock()
		if err != nil {
			b.Fatal(err)
		}
		if err := commit.Wait(b.Context()); err != nil {
			b.Fatal(err)
		}

		b.StopTimer()
		close(closed)
		log.Close()
		b.StartTimer()
	}
}
