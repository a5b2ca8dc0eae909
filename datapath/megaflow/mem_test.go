package megaflow

import (
	"runtime"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

// BenchmarkMegaflowMemory reports the heap bytes one installed megaflow
// costs (the Flow, its actions, reasons and rule counters, its slot), over
// 20000 megaflows that differ in tcp_dst, translated and installed while
// measuring. "shared": the three-table lbPipeline, where every megaflow
// runs the same rules; "distinct": a rule per tcp_dst in table 0, so no
// two megaflows run the same rules.
func BenchmarkMegaflowMemory(b *testing.B) {
	const n = 20000
	b.Run("shared", func(b *testing.B) { benchMegaflowMemory(b, lbPipeline(b, true), n) })
	b.Run("distinct", func(b *testing.B) { benchMegaflowMemory(b, perPortPipeline(b, n), n) })
}

// perPortPipeline has a rule for each of tcp_dst 1..n in table 0, each
// resubmitting to table 1, which outputs.
func perPortPipeline(b *testing.B, n int) *classifier.Tables {
	var bd flow.Bundle
	for i := range n {
		var m flow.Match
		m.Set(flow.EthType, 0x0800)
		m.Set(flow.NWProto, 6)
		m.Set(flow.TPDst, uint64(1+i))
		bd.Add(flow.Rule{Table: 0, Priority: 100, Match: m, Actions: []flow.Action{flow.Resubmit{Table: 1}}})
	}
	bd.Add(flow.Rule{Table: 1, Priority: 1, Actions: []flow.Action{flow.Output{Port: 1}}})
	ts := classifier.NewTables()
	if _, err := ts.Apply(bd); err != nil {
		b.Fatal(err)
	}
	return ts
}

func benchMegaflowMemory(b *testing.B, ts *classifier.Tables, n int) {
	tr := xlate.New(ts)
	results := make([]xlate.Result, n)
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := New(true)
		for i := range results {
			k := tcpKey(false, uint16(1+i), packet.TCPAck)
			results[i] = tr.Translate(&k, xlate.Options{})
			c.Insert(&results[i], 0)
		}
		clear(results) // the cache alone keeps what it needs
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.Len() != n {
			b.Fatalf("%d megaflows, want %d", c.Len(), n)
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/megaflow")
		runtime.KeepAlive(c)
	}
}
