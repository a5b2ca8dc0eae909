package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/nb"
)

// latencyRig is govn db (Northbound and Southbound, in the process), a
// govn northd on them and a client that changes the Northbound as
// ovn-nbctl --wait=sb does: each change also sets NB_Global.nb_cfg one
// higher, and waits until sb_cfg has reached it.
type latencyRig struct {
	tb     testing.TB
	ctx    context.Context
	cl     *client.Client
	writes chan LastWrite
	cfg    int64
	// nbUpdates has an entry per Northbound update the client saw.
	nbUpdates chan nbUpdate
}

// nbUpdate is one Northbound update: the sb_cfg it set (-1: none).
type nbUpdate struct {
	sbCfg int64
}

func startLatencyRig(tb testing.TB, nodes int) *latencyRig {
	tb.Helper()
	dir := tb.TempDir()
	nbDB := startInProcessDB(tb, dir, "nb")
	tb.Cleanup(nbDB.stop)
	sbDB := startInProcessDB(tb, dir, "sb")
	tb.Cleanup(sbDB.stop)
	loadNorthbound(tb, nbDB.sock, nodes)

	ctx, cancel := context.WithCancel(context.Background())
	r := &latencyRig{tb: tb, ctx: ctx, writes: make(chan LastWrite, 1024), nbUpdates: make(chan nbUpdate, 1024)}
	d, err := New(Config{NB: []string{"unix:" + nbDB.sock}, SB: []string{"unix:" + sbDB.sock},
		Logger: slog.New(slog.DiscardHandler),
		OnWrite: func(w LastWrite) {
			select {
			case r.writes <- w:
			default:
			}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	r.cl, err = client.New(client.Options{Endpoints: []string{"unix:" + nbDB.sock}, Database: "OVN_Northbound",
		Tables: map[string][]string{nb.NBGlobalTable: nil, nb.LogicalSwitchTable: {"name", "ports"},
			nb.AddressSetTable: nil, nb.LoadBalancerTable: nil, nb.LogicalSwitchPortTable: {"name"}},
		OnChange: func(cs client.ChangeSet) {
			u := nbUpdate{sbCfg: -1}
			for _, e := range cs.Events {
				if e.Table != nb.NBGlobalTable || e.New == nil {
					continue
				}
				col := r.cl.Cache().Schema().Tables[nb.NBGlobalTable].Column("sb_cfg")
				if e.Old == nil || !e.Old.Get(col).Equal(e.New.Get(col)) {
					if v := e.New.Get(col); len(v.Keys) == 1 {
						u.sbCfg = v.Keys[0].Int()
					}
				}
			}
			select {
			case r.nbUpdates <- u:
			default:
			}
		}})
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = r.cl.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("northd: %v", err)
		}
	})
	if err := r.cl.WaitConnected(ctx); err != nil {
		tb.Fatal(err)
	}
	// The first complete Southbound: sb_cfg at the bench's nb_cfg.
	g := r.global()
	r.cfg = g.NBCfg
	r.waitSBCfg(r.cfg, 5*time.Minute)
	return r
}

func (r *latencyRig) global() nb.NBGlobal {
	r.tb.Helper()
	gs := client.List[nb.NBGlobal](r.cl.Cache())
	if len(gs) != 1 {
		r.tb.Fatalf("%d NB_Global rows", len(gs))
	}
	return gs[0]
}

// waitSBCfg waits until the client's cache shows sb_cfg at least cfg.
func (r *latencyRig) waitSBCfg(cfg int64, limit time.Duration) {
	r.tb.Helper()
	timeout := time.After(limit)
	for {
		changed := r.cl.Cache().Changed()
		if g := r.global(); g.SBCfg >= cfg {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			r.tb.Fatalf("sb_cfg did not reach %d in %v", cfg, limit)
		}
	}
}

// byName returns the UUID of the row of table named name.
func (r *latencyRig) byName(table, name string) ovsdb.UUID {
	r.tb.Helper()
	rows := r.cl.Cache().Lookup(table, "name", ovsdb.Scalar(ovsdb.String(name)))
	if len(rows) != 1 {
		r.tb.Fatalf("%d rows of %s named %q", len(rows), table, name)
	}
	return rows[0].UUID
}

// change commits the operations build adds with nb_cfg one higher and
// waits, as ovn-nbctl --wait=sb, for its reply and then for sb_cfg; it
// returns how long that took and northd's own account of the change.
func (r *latencyRig) change(build func(t *client.Txn)) (time.Duration, LastWrite) {
	r.tb.Helper()
	for len(r.writes) > 0 {
		<-r.writes
	}
	for len(r.nbUpdates) > 0 {
		<-r.nbUpdates
	}
	t := r.cl.Txn()
	build(t)
	r.cfg++
	t.Update(nb.NBGlobalTable, r.global().UUID, map[string]ovsdb.Datum{"nb_cfg": ovsdb.Scalar(ovsdb.Integer(r.cfg))})
	start := time.Now()
	if _, err := t.Commit(r.ctx); err != nil {
		r.tb.Fatal(err)
	}
	r.waitSBCfg(r.cfg, time.Minute)
	took := time.Since(start)
	var w LastWrite
	select {
	case w = <-r.writes:
	default:
	}
	return took, w
}

// podAdd adds pod i to node i%nodes as the bench does: a switch port with
// addresses, port security and requested-chassis, and its IP in its
// namespace's address set.
func (r *latencyRig) podAdd(nodes, i int) func(*client.Txn) {
	return func(t *client.Txn) {
		k := i % nodes
		name, addr, ip := podNames(k, i)
		port := t.Insert(nb.LogicalSwitchPortTable, map[string]ovsdb.Datum{
			"name":          ovsdb.Scalar(ovsdb.String(name)),
			"addresses":     ovsdb.Set(ovsdb.String(addr)),
			"port_security": ovsdb.Set(ovsdb.String(addr)),
			"options":       ovsdb.Map([]ovsdb.Atom{ovsdb.String("requested-chassis")}, []ovsdb.Atom{ovsdb.String(fmt.Sprintf("chassis-node%d", k))}),
		})
		t.Mutate(nb.LogicalSwitchTable, r.byName(nb.LogicalSwitchTable, fmt.Sprintf("node%d", k)),
			client.Mutation{Column: "ports", Mutator: "insert", Value: ovsdb.Set(ovsdb.UUIDAtom(port))})
		t.Mutate(nb.AddressSetTable, r.byName(nb.AddressSetTable, fmt.Sprintf("as_ns%d", i%10)),
			client.Mutation{Column: "addresses", Mutator: "insert", Value: ovsdb.Set(ovsdb.String(ip))})
	}
}

// podDelete deletes the pod podAdd(nodes, i) added.
func (r *latencyRig) podDelete(nodes, i int) func(*client.Txn) {
	return func(t *client.Txn) {
		k := i % nodes
		name, _, ip := podNames(k, i)
		port := r.byName(nb.LogicalSwitchPortTable, name)
		t.Mutate(nb.LogicalSwitchTable, r.byName(nb.LogicalSwitchTable, fmt.Sprintf("node%d", k)),
			client.Mutation{Column: "ports", Mutator: "delete", Value: ovsdb.Set(ovsdb.UUIDAtom(port))})
		t.Delete(nb.LogicalSwitchPortTable, port)
		t.Mutate(nb.AddressSetTable, r.byName(nb.AddressSetTable, fmt.Sprintf("as_ns%d", i%10)),
			client.Mutation{Column: "addresses", Mutator: "delete", Value: ovsdb.Set(ovsdb.String(ip))})
	}
}

// backendAdd adds a backend to the first VIP of service i%10.
func (r *latencyRig) backendAdd(i int) func(*client.Txn) {
	return func(t *client.Txn) {
		id := r.byName(nb.LoadBalancerTable, fmt.Sprintf("Service_default/svc%d_TCP_cluster", i%10))
		lb, _ := client.Get[nb.LoadBalancer](r.cl.Cache(), id)
		vips := make([]string, 0, len(lb.VIPs))
		for v := range lb.VIPs {
			vips = append(vips, v)
		}
		slices.Sort(vips)
		var keys, vals []ovsdb.Atom
		for j, v := range vips {
			b := lb.VIPs[v]
			if j == 0 {
				b += fmt.Sprintf(",10.%d.%d.%d:8080", 200+i/65536, i/256%256, i%256)
			}
			keys, vals = append(keys, ovsdb.String(v)), append(vals, ovsdb.String(b))
		}
		t.Update(nb.LoadBalancerTable, id, map[string]ovsdb.Datum{"vips": ovsdb.Map(keys, vals)})
	}
}

func podNames(k, i int) (name, addr, ip string) {
	ip = fmt.Sprintf("10.%d.%d.%d", 128+k/256, k%256, 200+i%50)
	mac := fmt.Sprintf("0a:58:0a:%02x:%02x:%02x", 128+k/256, k%256, 200+i%50)
	return fmt.Sprintf("latency-pod-%d-%d", k, i), mac + " " + ip, ip
}

// BenchmarkChangeLatency times what ovn-nbctl --wait=sb waits for, on the
// bench's cluster (GOVN_LATENCY_NODES nodes, 20 by default) with govn db
// and govn northd in the process: a pod add, a pod delete and a load
// balancer backend add, each from its Northbound commit until the
// client's monitor shows sb_cfg at its nb_cfg (ns/op; p50-ms and p90-ms
// too), northd's own account from the Northbound update to the
// Southbound commit's reply (inside-p50-ms), and the Northbound updates
// the client saw per change (its own and northd's: nb-updates/op).
func BenchmarkChangeLatency(b *testing.B) {
	nodes := 20
	if v := os.Getenv("GOVN_LATENCY_NODES"); v != "" {
		var err error
		if nodes, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	r := startLatencyRig(b, nodes)
	seq := 0       // changes made: each pod and backend is new
	var pods []int // pods added and not deleted yet, oldest first
	for _, kind := range []string{"pod-add", "pod-delete", "lb-backend-add"} {
		b.Run(kind, func(b *testing.B) {
			var took, inside []time.Duration
			updates := 0
			for i := 0; i < b.N; i++ {
				seq++
				var build func(*client.Txn)
				switch kind {
				case "pod-add":
					build = r.podAdd(nodes, seq)
					pods = append(pods, seq)
				case "pod-delete":
					if len(pods) == 0 {
						b.StopTimer()
						r.change(r.podAdd(nodes, seq))
						pods = append(pods, seq)
						b.StartTimer()
					}
					build = r.podDelete(nodes, pods[0])
					pods = pods[1:]
				default:
					build = r.backendAdd(seq)
				}
				d, w := r.change(build)
				took = append(took, d)
				if w.Latency > 0 {
					inside = append(inside, w.Latency)
				}
				updates += len(r.nbUpdates)
			}
			b.ReportMetric(ms(percentile(took, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(took, 90)), "p90-ms")
			b.ReportMetric(ms(percentile(inside, 50)), "inside-p50-ms")
			b.ReportMetric(float64(updates)/float64(b.N), "nb-updates/op")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(v []time.Duration, p int) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[max((p*len(s)+99)/100-1, 0)]
}

// TestSBCfgWithTheSouthboundCommit: after a change with nb_cfg, the first
// Northbound transaction of northd's carries sb_cfg, so a client waiting
// as ovn-nbctl --wait=sb sees its own update and then one of northd's, not
// a Northbound write of northd's, then another engine run for the
// Southbound's own updates and only then sb_cfg.
func TestSBCfgWithTheSouthboundCommit(t *testing.T) {
	const nodes = 2
	r := startLatencyRig(t, nodes)
	for i, build := range []func(*client.Txn){r.podAdd(nodes, 0), r.backendAdd(1), r.podDelete(nodes, 0)} {
		r.change(build)
		var got []string
		for len(r.nbUpdates) > 0 {
			u := <-r.nbUpdates
			got = append(got, strconv.FormatInt(u.sbCfg, 10))
		}
		// The client's own update (no sb_cfg), then northd's with sb_cfg.
		want := []string{"-1", strconv.FormatInt(r.cfg, 10)}
		if !slices.Equal(got, want) {
			t.Errorf("change %d: the client saw updates with sb_cfg %s (-1: none) until sb_cfg %d; want %s",
				i, strings.Join(got, ", "), r.cfg, strings.Join(want, ", "))
		}
	}
}
