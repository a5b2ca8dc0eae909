package lflow

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// benchCorpus replicates the reference corpus to n logical flows, varying
// addresses and MACs per replica so that no two replicas are identical
// text (as on a Southbound with many similar datapaths).
func benchCorpus(t testing.TB, n int) []Lflow {
	base := readCorpus(t)
	out := make([]Lflow, 0, n)
	for rep := 0; len(out) < n; rep++ {
		r := strings.NewReplacer(
			// Network addresses keep their host bits zero.
			"172.168.0.0/", "172.168.0.0/", "10.0.0.0/", "10.0.0.0/",
			"172.168.0.", fmt.Sprintf("172.%d.%d.", 16+rep/256%16, rep%256),
			"10.0.0.", fmt.Sprintf("10.%d.%d.", rep/256%256, rep%256),
			"00:00:20:20:12:", fmt.Sprintf("00:00:%02x:%02x:12:", rep/256%256, rep%256),
		)
		for _, fl := range base {
			if len(out) == n {
				break
			}
			out = append(out, Lflow{Pipeline: fl.Pipeline, Table: fl.Table, Priority: fl.Priority,
				Match: r.Replace(fl.Match), Actions: r.Replace(fl.Actions)})
		}
	}
	return out
}

// BenchmarkCompile parses, normalizes and compiles the flows of a
// 100,000-lflow Southbound, one lflow per iteration, on the datapaths of
// 100 replicas. Run with -cpu 1; it reports lflows/s (wall time),
// lflows/cpu-s (CPU time of the process, GC included: the figure to trust
// on a shared machine) and allocs/lflow.
func BenchmarkCompile(b *testing.B) {
	st, c := testCompiler(b)
	env := newTestEnv(b, st)
	env.autoKeys = true
	flows := benchCorpus(b, 100_000)
	ctx := &Context{Env: env, Datapath: 1, NextConjID: 1, NextGroupID: 1}
	var res Result
	// Warm the port map so that the benchmark does not measure it.
	for i := range flows[:len(flows)/100] {
		_ = c.Compile(&flows[i], ctx, &res)
		res.Rules, res.Groups = res.Rules[:0], res.Groups[:0]
	}
	b.ReportAllocs()
	b.ResetTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0 := ms.Mallocs
	cpu0 := processCPUTime()
	rules, failed := 0, 0
	for i := 0; i < b.N; i++ {
		lf := &flows[i%len(flows)]
		ctx.Datapath = uint32(i / 687 % 1024)
		err := c.Compile(lf, ctx, &res)
		var ue *UnsupportedError
		if err != nil && !errors.As(err, &ue) {
			b.Fatalf("%s / %s: %v", lf.Match, lf.Actions, err)
		}
		if err != nil {
			failed++
		}
		rules += len(res.Rules)
		res.Rules, res.Groups = res.Rules[:0], res.Groups[:0]
	}
	cpu := processCPUTime() - cpu0
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Mallocs-mallocs0)/float64(b.N), "allocs/lflow")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lflows/s")
	if cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "lflows/cpu-s")
	}
	b.ReportMetric(float64(rules)/float64(b.N), "rules/lflow")
	b.ReportMetric(float64(failed)/float64(b.N), "unsupported/lflow")
}

// BenchmarkParseExpr measures the match parser alone.
func BenchmarkParseExpr(b *testing.B) {
	st := testSymtab(b)
	flows := readCorpus(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := st.ParseExpr(flows[i%len(flows)].Match); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseActions measures the action parser alone.
func BenchmarkParseActions(b *testing.B) {
	st := testSymtab(b)
	flows := readCorpus(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := st.ParseActions(flows[i%len(flows)].Actions); err != nil {
			b.Fatal(err)
		}
	}
}
