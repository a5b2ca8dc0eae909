package megaflow

import (
	"runtime"
	"testing"

	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

// BenchmarkMegaflowMemory reports the heap bytes one installed megaflow
// costs (the Flow, its actions, reasons and rule counters, its slot), over
// 20000 megaflows (translated and installed while measuring) of a three-table pipeline that differ in tcp_dst.
func BenchmarkMegaflowMemory(b *testing.B) {
	const n = 20000
	ts := lbPipeline(b, true)
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
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "B/megaflow")
		runtime.KeepAlive(c)
	}
}
