package ctbench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs every govn measurement at a tiny size and checks the
// report is filled in consistently (the figures themselves are machine
// dependent and belong to "govn bench conntrack").
func TestRunSmall(t *testing.T) {
	opts := Options{
		BigZones: 20, BigPerZone: 300, Flushes: 10,
		MedZones: 5, MedPerZone: 200,
		PauseEntries: 2000, PauseRuns: 2,
		RateDuration: 20 * time.Millisecond,
	}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BigEntries != 20*300 || rep.BigZones != 20 || rep.MedEntries != 5*200 {
		t.Errorf("entries: big %d in %d zones, medium %d", rep.BigEntries, rep.BigZones, rep.MedEntries)
	}
	if rep.BigFlush.N != 10 || rep.BigReclaim.N != 10 || rep.MedFlush.N != 5 || rep.MedEmpty.N != 1000 {
		t.Errorf("sample counts: %+v %+v %+v %+v", rep.BigFlush, rep.BigReclaim, rep.MedFlush, rep.MedEmpty)
	}
	if rep.BigFlush.P50 <= 0 || rep.BigFlush.P99 < rep.BigFlush.P50 || rep.BytesPerEntry <= 0 {
		t.Errorf("flush %+v, bytes/entry %v", rep.BigFlush, rep.BytesPerEntry)
	}
	if len(rep.PauseRuns) != 2 || rep.LookupsPerSec <= 0 || rep.NewConnsPerSec <= 0 || rep.HotLookupsPerSec <= 0 {
		t.Errorf("pause runs %v, rates %v %v %v", rep.PauseRuns, rep.LookupsPerSec, rep.NewConnsPerSec, rep.HotLookupsPerSec)
	}
	if rep.BatchSize == 0 || rep.BatchLookupsPerSec <= 0 || rep.HotBatchLookupsPerCPUSec <= 0 {
		t.Errorf("batch size %d, batch rates %v %v", rep.BatchSize, rep.BatchLookupsPerSec, rep.HotBatchLookupsPerCPUSec)
	}
	if rep.OVS != nil || rep.OVSSkipped == "" {
		t.Errorf("OVS side ran although not requested")
	}
	var table strings.Builder
	rep.WriteTable(&table)
	for _, row := range []string{"memory per entry", "flush empty zone", "new connections (commit)", "OVS side", "skipped: not requested"} {
		if !strings.Contains(table.String(), row) {
			t.Errorf("table lacks %q:\n%s", row, table.String())
		}
	}
}

func TestDist(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	d := dist(ds)
	if d.N != 100 || d.P50 != 50 || d.P99 != 99 || d.Max != 100 {
		t.Errorf("dist = %+v", d)
	}
}
