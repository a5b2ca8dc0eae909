package client

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema"
)

// logicalFlowUpdate returns a <table-updates2> with n Southbound
// Logical_Flow rows shaped like the ones northd writes: a few datapaths,
// two pipelines, stage names and sources in external_ids that repeat, and
// matches and actions of which some repeat ("next;") and most do not.
func logicalFlowUpdate(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"Logical_Flow":{`)
	stages := []string{"ls_in_port_sec_l2", "ls_in_acl", "ls_in_l2_lkup", "lr_in_ip_routing", "ls_out_acl"}
	actions := []string{"next;", "drop;", "outport = \"lsp-%d\"; output;", "reg0[1] = 1; next;"}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		act := actions[i%len(actions)]
		if strings.Contains(act, "%d") {
			act = fmt.Sprintf(act, i)
		}
		fmt.Fprintf(&b, `"%08x-0000-4000-8000-000000000000":{"initial":{"logical_datapath":["uuid","%08x-1111-4000-8000-000000000000"],`+
			`"pipeline":"ingress","table_id":%d,"priority":%d,"match":"inport == \"lsp-%d\" && eth.src == {0a:58:0a:f4:%02x:%02x}","actions":%q,`+
			`"external_ids":["map",[["source","northd.c:%d"],["stage-name","%s"]]]}}`,
			i, i%250, i%30, 50+i%100, i, i%256, i/256%256, act, 1000+i%400, stages[i%len(stages)])
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// BenchmarkLogicalFlowCacheBytes measures the heap a client's cache keeps
// for each Southbound logical flow it holds (northd's largest table): the
// rows of an initial monitor reply of 20,000 flows, decoded and installed,
// after a collection. bytes/flow is the figure to cut (issue 13).
func BenchmarkLogicalFlowCacheBytes(b *testing.B) {
	text, err := schema.Lookup("sb")
	if err != nil {
		b.Fatal(err)
	}
	s := ovsdb.MustParseSchema(text)
	const n = 20000
	data := logicalFlowUpdate(n)
	empty := func(string) map[ovsdb.UUID]*ovsdb.Row { return nil }
	var perFlow float64
	for b.Loop() {
		runtime.GC()
		before := heapInUse()
		c := newCache(nil)
		events, err := parseUpdates(s, empty, data, methodCond)
		if err != nil || len(events) != n {
			b.Fatal(err, len(events))
		}
		c.apply(&ChangeSet{Events: events}, s)
		events = nil
		runtime.GC()
		perFlow = float64(heapInUse()-before) / n
		if c.Len("Logical_Flow") != n {
			b.Fatal("rows missing from the cache")
		}
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perFlow, "bytes/flow")
}

// heapInUse returns the bytes of live heap objects after the last
// collection.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
