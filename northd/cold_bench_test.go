package northd

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/bench/northdbench"
)

// BenchmarkK8sColdStart is what govn northd does for a cold start and a
// full recompute on northdbench's cluster, timed step by step (run with
// -benchtime=1x and -cpuprofile to see where a full compute goes):
//
//   - ms-compute: Recompute of the loaded Northbound;
//   - ms-writesb: the first WriteSB (every row inserted);
//   - ms-sbecho: Apply of the Southbound's echo of that transaction, and
//     Process;
//   - ms-recompute: a later full recompute (inc-engine/recompute): Recompute
//     and the WriteSB that compares everything and finds nothing to write;
//   - writesb-bytes/op: what the first WriteSB allocated, per operation
//     (the cold start's transaction, which the daemon holds until it is
//     sent);
//   - cpums-compute and cpums-recompute: the process's CPU time in those
//     (all goroutines, the garbage collector's too), which a busy machine
//     distorts less than the time on the clock.
func BenchmarkK8sColdStart(b *testing.B) {
	for _, nodes := range []int{100, 250} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := &harness{t: b, nb: newMemDB(b, NB, "nb"), sb: newMemDB(b, SB, "sb")}
				evs := loadOps(h, northdbench.Shape{Nodes: nodes}.Northbound())
				h.s = New(h.nb.schema, h.sb.schema, Options{})
				h.s.Apply(evs)
				b.StartTimer()

				start, cpu := time.Now(), cpuTime()
				h.s.Recompute()
				compute, computeCPU := time.Since(start), cpuTime()-cpu
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				start = time.Now()
				ops := h.s.WriteSB(h.sb)
				write := time.Since(start)
				runtime.ReadMemStats(&m1)
				b.StopTimer()
				echo := h.sb.commit()
				b.StartTimer()
				start = time.Now()
				h.s.Apply(echo)
				h.s.Process()
				apply := time.Since(start)

				start, cpu = time.Now(), cpuTime()
				h.s.Recompute()
				again := h.s.WriteSB(h.sb)
				recompute, recomputeCPU := time.Since(start), cpuTime()-cpu
				if again != 0 {
					b.Fatalf("a recompute of an unchanged Northbound wrote %d operations", again)
				}
				b.ReportMetric(float64(compute.Milliseconds()), "ms-compute")
				b.ReportMetric(float64(write.Milliseconds()), "ms-writesb")
				b.ReportMetric(float64(apply.Milliseconds()), "ms-sbecho")
				b.ReportMetric(float64(recompute.Milliseconds()), "ms-recompute")
				b.ReportMetric(float64(computeCPU.Milliseconds()), "cpums-compute")
				b.ReportMetric(float64(recomputeCPU.Milliseconds()), "cpums-recompute")
				b.ReportMetric(float64(ops), "sb-ops")
				b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(ops), "writesb-bytes/op")
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkK8sRecompute is inc-engine/recompute alone on northdbench's
// 100-node cluster once its Southbound is written: Recompute and the
// WriteSB that compares everything and finds nothing to write. Its work
// is labeled step=recompute and step=writesb, so that a -cpuprofile of it
// can leave the setup out (go tool pprof -tagfocus step=recompute).
// peak-heap-growth is how much the heap grew over what the synced State
// holds, at its largest (garbage included: GOGC decides how much of it
// there is, and so the peak RSS).
func BenchmarkK8sRecompute(b *testing.B) {
	h := k8sCluster(b, 100)
	runtime.GC()
	base := liveHeap()
	peak := watchHeap(b)
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		var ops int
		pprof.Do(b.Context(), pprof.Labels("step", "recompute"), func(context.Context) { h.s.Recompute() })
		pprof.Do(b.Context(), pprof.Labels("step", "writesb"), func(context.Context) { ops = h.s.WriteSB(h.sb) })
		if ops != 0 {
			b.Fatalf("a recompute of an unchanged Northbound wrote %d operations", ops)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpums/op")
	b.ReportMetric(float64(peak()-base)/float64(base), "peak-heap-growth")
}

// liveHeap is the heap's objects, live or not yet collected.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchHeap samples liveHeap every millisecond until the benchmark ends;
// the function it returns gives the largest sample.
func watchHeap(b *testing.B) func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	b.Cleanup(func() { close(done) })
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if v := liveHeap(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return peak.Load
}
