package ctbench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the report as a table of measure, value and the goal
// it is held to, if any.
func (r *Report) WriteTable(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "measure\tvalue\tgoal\t\n")
	if r.BigEntries > 0 {
		writeGovnRows(w, r)
	}
	if o := r.OVS; o != nil {
		fmt.Fprintf(w, "OVS 3.1 userspace: entries\t%d in %d zones (%d packets in %.1fs)\t\t\n", o.Entries, o.Zones, o.PacketsSent, o.FillSeconds)
		fmt.Fprintf(w, "OVS flush zone of %d entries (unixctl round trip)\tp50 %.1f µs, p99 %.1f µs; empty zone p50 %.1f µs\t\t\n", o.ZoneEntries, o.Flush.P50, o.Flush.P99, o.FlushEmpty.P50)
		fmt.Fprintf(w, "govn flush, same layout\tp50 %.2f µs; empty zone p50 %.3f µs\t\t\n", o.GovnFlush.P50, o.GovnEmpty.P50)
		fmt.Fprintf(w, "ratio OVS/govn (p50)\t%.0fx (%.0fx net of OVS's RPC overhead)\t\t\n", o.Ratio, o.RatioNetOfRPC)
	} else {
		fmt.Fprintf(w, "OVS side\tskipped: %s\t\t\n", r.OVSSkipped)
	}
	fmt.Fprintf(w, "GOMAXPROCS\t%d\t\t\n", r.GoMaxProcs)
	w.Flush()
}

func goalMet(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func writeGovnRows(w io.Writer, r *Report) {
	fmt.Fprintf(w, "big table\t%d entries in %d zones, built in %.1fs (%s)\t\t\n", r.BigEntries, r.BigZones, r.BuildSeconds, r.BuildMethod)
	fmt.Fprintf(w, "memory per entry\t%.0f bytes (live heap %.2f GiB)\t< 300 bytes: %s\t\n", r.BytesPerEntry, r.HeapGiB, goalMet(r.BytesPerEntry < 300))
	fmt.Fprintf(w, "flush full zone (%d zones), until empty and returned\tp50 %.2f µs, p99 %.2f µs, max %.2f µs (n=%d)\tp50 ≤ 50 µs: %s\t\n", r.BigZones, r.BigFlush.P50, r.BigFlush.P99, r.BigFlush.Max, r.BigFlush.N, goalMet(r.BigFlush.P50 <= 50))
	fmt.Fprintf(w, "  background reclamation per zone (reclaimer busy time)\tp50 %.2f µs, p99 %.2f µs\t\t\n", r.BigReclaim.P50, r.BigReclaim.P99)
	fmt.Fprintf(w, "  flush call to reclaimed (wall, reclaimer polls every 2 ms)\tp50 %.2f µs, p99 %.2f µs\t\t\n", r.BigReclaimAfter.P50, r.BigReclaimAfter.P99)
	fmt.Fprintf(w, "Expire pass over all zones, nothing due (timer wheels, no sweep)\tp50 %.0f µs, max %.0f µs\t\t\n", r.ExpirePass.P50, r.ExpirePass.Max)
	fmt.Fprintf(w, "flush 1,000-entry zone (%d entries, 500 zones)\tp50 %.2f µs, p99 %.2f µs\t≤ 10 µs: %s\t\n", r.MedEntries, r.MedFlush.P50, r.MedFlush.P99, goalMet(r.MedFlush.P50 <= 10))
	fmt.Fprintf(w, "flush empty zone\tp50 %.3f µs, p99 %.3f µs\t≤ 10 µs: %s\t\n", r.MedEmpty.P50, r.MedEmpty.P99, goalMet(r.MedEmpty.P50 <= 10))
	fmt.Fprintf(w, "packet goroutine worst stall while a %d-entry zone is flushed and reclaimed (%d runs)\tmax %.1f µs excluding OS run-queue wait (raw %.1f µs); window %.0f µs\t≤ 100 µs: %s\t\n",
		r.PauseEntries, len(r.PauseRuns), r.PauseOwnMaxUs, r.PauseMaxUs, r.PauseWindowUs, goalMet(r.PauseOwnMaxUs <= 100))
	fmt.Fprintf(w, "  same windows without a flush (machine noise)\tmax %.1f µs excluding run-queue wait (raw %.1f µs)\t\t\n", r.BaselineOwnMaxUs, r.BaselineMaxUs)
	fmt.Fprintf(w, "established lookups, one goroutine, 1,000 connections (cache-resident)\t%.2f M/s wall, %.2f M per CPU-second\t≥ 2 M/s per core: %s\t\n", r.HotLookupsPerSec/1e6, r.HotLookupsPerCPUSec/1e6, goalMet(r.HotLookupsPerCPUSec >= 2e6))
	fmt.Fprintf(w, "established lookups, one goroutine, 500k entries in random order (2 DRAM misses each)\t%.2f M/s wall, %.2f M per CPU-second\t≥ 2 M/s per core: %s\t\n", r.LookupsPerSec/1e6, r.LookupsPerCPUSec/1e6, goalMet(r.LookupsPerCPUSec >= 2e6))
	fmt.Fprintf(w, "  same, batch mode: ProcessBatch of %d packets of one zone (random zone, random connections)\t%.2f M/s wall, %.2f M per CPU-second\t≥ 2 M/s per core: %s\t\n", r.BatchSize, r.BatchLookupsPerSec/1e6, r.BatchLookupsPerCPUSec/1e6, goalMet(r.BatchLookupsPerCPUSec >= 2e6))
	fmt.Fprintf(w, "  cache-resident (1,000 connections), batch mode\t%.2f M/s wall, %.2f M per CPU-second\t≥ 2 M/s per core: %s\t\n", r.HotBatchLookupsPerSec/1e6, r.HotBatchLookupsPerCPUSec/1e6, goalMet(r.HotBatchLookupsPerCPUSec >= 2e6))
	fmt.Fprintf(w, "new connections (commit), one goroutine\t%.0f k/s wall, %.0f k per CPU-second\t≥ 500 k/s per core: %s\t\n", r.NewConnsPerSec/1e3, r.NewConnsPerCPUSec/1e3, goalMet(r.NewConnsPerCPUSec >= 5e5))
}
