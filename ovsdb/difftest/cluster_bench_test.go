package difftest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/bench/procstat"
)

// BenchmarkClusterInserts measures insert transactions to the leader of a
// 3-server cluster of govn db and of the real ovsdb-server (election timer
// 1000 ms, loopback), from 1 and from 16 clients: transactions per second,
// commit latency p50/p99, and the CPU time of all three members per
// transaction. Run it with a fixed count, e.g.
//
//	go test -run XXX -bench ClusterInserts -benchtime 4000x ./ovsdb/difftest
func BenchmarkClusterInserts(b *testing.B) {
	need(b, "ovsdb-server", "ovsdb-tool", "ovs-appctl")
	for _, kind := range []string{kindGovn, kindReal} {
		b.Run(kind, func(b *testing.B) {
			c := startCluster(b, kind, "nb")
			l := c.leader(b, "OVN_Northbound", -1)
			for _, clients := range []int{1, 16} {
				b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
					benchInserts(b, c, l, clients)
				})
			}
		})
	}
}

func benchInserts(b *testing.B, c *govnCluster, l *clusterMember, clients int) {
	conns := make([]*ovsdbConn, clients)
	for i := range conns {
		oc, err := dialMember(l)
		if err != nil {
			b.Fatal(err)
		}
		defer oc.conn.Close()
		conns[i] = oc
	}
	cpu := func() time.Duration {
		var sum time.Duration
		for _, m := range c.members {
			if d, err := procstat.CPUTime(m.cmd.Process.Pid); err == nil {
				sum += d
			}
		}
		return sum
	}
	per := max(b.N/clients, 1)
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	var failed sync.Once
	var ferr error
	cpu0 := cpu()
	b.ResetTimer()
	start := time.Now()
	for k := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := conns[k].insertSwitch(ctx, fmt.Sprintf("b-%d-%d-%d-%d", clients, b.N, k, i))
				cancel()
				if err != nil {
					failed.Do(func() { ferr = err })
					return
				}
				lat[k] = append(lat[k], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if ferr != nil {
		b.Fatal(ferr)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	n := len(all)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "txn/s")
	b.ReportMetric(float64(all[n/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[n*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64((cpu()-cpu0).Microseconds())/float64(n), "cpu-µs/txn")
}

// BenchmarkClusterFailover measures, for govn db and ovsdb-server
// clusters of three (election timer 1000 ms), the time from SIGKILL of the
// leader until another member accepts a write, b.N times (the killed
// member restarted each time).
//
//	go test -run XXX -bench ClusterFailover -benchtime 5x ./ovsdb/difftest
func BenchmarkClusterFailover(b *testing.B) {
	need(b, "ovsdb-server", "ovsdb-tool", "ovs-appctl")
	for _, kind := range []string{kindGovn, kindReal} {
		b.Run(kind, func(b *testing.B) {
			c := startCluster(b, kind, "nb")
			var times []time.Duration
			for i := 0; i < b.N; i++ {
				l := c.leader(b, "OVN_Northbound", -1)
				killed := time.Now()
				l.kill()
				var took time.Duration
				waitUntil(b, "a write after the leader's kill", 30*time.Second, func() bool {
					for _, m := range c.members {
						if m == l || m.cmd == nil {
							continue
						}
						oc, err := dialMember(m)
						if err != nil {
							continue
						}
						ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
						err = oc.insertSwitch(ctx, fmt.Sprintf("f-%d-%d", b.N, i))
						cancel()
						oc.conn.Close()
						if err == nil {
							took = time.Since(killed)
							return true
						}
					}
					return false
				})
				times = append(times, took)
				l.start(b)
				waitUntil(b, "the killed member to rejoin", 30*time.Second, func() bool {
					return l.status("OVN_Northbound") != ""
				})
				time.Sleep(2 * time.Second) // let it catch up and the cluster settle
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median-ms")
			b.ReportMetric(float64(times[len(times)-1].Milliseconds()), "max-ms")
			b.Logf("%s failover times: %v", kind, times)
		})
	}
}
