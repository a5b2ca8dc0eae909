package xlate

import (
	"os"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
)

// ovnChassis is a govn chassis's flow tables (testdata/ovn-chassis.flows,
// dumped from hypervisor 1 of "govn bench chassis": switches ls-c and
// ls-s, router lr0, load balancer lb0 on ls-c, a stateful ACL on ls-s),
// for measuring translations of OVN's pipelines.
func ovnChassis(tb testing.TB) *Translator {
	tb.Helper()
	data, err := os.ReadFile("testdata/ovn-chassis.flows")
	if err != nil {
		tb.Fatal(err)
	}
	var b flow.Bundle
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		r, err := flow.ParseRule(strings.Replace(l, " actions=", ",actions=", 1))
		if err != nil {
			tb.Fatalf("%v: %s", err, l)
		}
		b.Add(r)
	}
	ts := classifier.NewTables()
	if _, err := ts.Apply(b); err != nil {
		tb.Fatal(err)
	}
	return New(ts)
}

// pingKey is an ICMP echo request from c1 (port 5) to s1 through the
// router: the bench's first-packet ping.
func pingKey() flow.Key {
	var k flow.Key
	k.Set(flow.InPort, 5)
	k.Set(flow.EthSrc, 0x0a0000000111)
	k.Set(flow.EthDst, 0x000000000101)
	k.Set(flow.EthType, 0x0800)
	k.Set(flow.NWSrc, ip("10.0.1.11"))
	k.Set(flow.NWDst, ip("10.0.2.21"))
	k.Set(flow.NWProto, 1)
	k.Set(flow.NWTTL, 64)
	k.Set(flow.TPSrc, 8) // icmp_type
	return k
}

// firstPacketPasses translates the ping's first packet as the datapath
// would: each pass that ends in ct() and recirc() is followed by the
// recirculated packet's, with conntrack's answer for a new connection
// (+new+trk). It returns the passes' results.
func firstPacketPasses(tr *Translator) []Result {
	k := pingKey()
	var rs []Result
	for range 8 {
		r := tr.Translate(&k, Options{})
		rs = append(rs, r)
		id, ok := lastRecirc(r.Actions)
		if !ok {
			break
		}
		k.Set(flow.RecircID, uint64(id))
		k.Set(flow.CTState, 0x21)
	}
	return rs
}

// lastRecirc returns the id of the recirc() that ends actions, looking
// into a trailing clone() (OVN's patch ports clone).
func lastRecirc(as []flow.DPAction) (uint32, bool) {
	for len(as) > 0 {
		switch a := as[len(as)-1].(type) {
		case flow.DPRecirc:
			return a.ID, true
		case flow.DPClone:
			as = a.Actions
		default:
			return 0, false
		}
	}
	return 0, false
}

// TestOVNFirstPacket checks the ping's path: three passes (two
// recirculations, ls-c's and ls-s's conntrack) that end in output to s1's
// port (7), with only the packet's own fields in the megaflows.
func TestOVNFirstPacket(t *testing.T) {
	rs := firstPacketPasses(ovnChassis(t))
	if len(rs) != 3 {
		for _, r := range rs {
			t.Log(r.String())
		}
		t.Fatalf("%d passes, want 3", len(rs))
	}
	last := rs[len(rs)-1]
	if got := flow.DPActionsString(last.Actions); !strings.HasSuffix(got, "7") {
		t.Errorf("last pass: actions %s, want an output to port 7", got)
	}
	for i, r := range rs {
		if r.Err != nil {
			t.Errorf("pass %d: %v", i, r.Err)
		}
		po := flow.PipelineOnlyMask()
		for w := range r.Mask.W {
			if r.Mask.W[w]&po.W[w] != 0 {
				t.Errorf("pass %d: megaflow mask has pipeline-only bits in word %d", i, w)
			}
		}
	}
}

// TestOVNTranslateAllocs is the allocation budget of one pass: the
// translation's context, its results' slices and actions, no per-lookup
// garbage (an upcall's latency grows with what it allocates, cache-cold
// on a busy hypervisor).
func TestOVNTranslateAllocs(t *testing.T) {
	tr := ovnChassis(t)
	k := pingKey()
	got := testing.AllocsPerRun(100, func() { tr.Translate(&k, Options{}) })
	const budget = 12
	if got > budget {
		t.Errorf("a translation allocates %v times, budget %d", got, budget)
	}
}

// BenchmarkOVNFirstPacket translates every pass of the bench's
// first-packet ping (the slow path's share of its RTT).
func BenchmarkOVNFirstPacket(b *testing.B) {
	tr := ovnChassis(b)
	b.ReportAllocs()
	for b.Loop() {
		firstPacketPasses(tr)
	}
}

// BenchmarkOVNFirstPacketCold is BenchmarkOVNFirstPacket with the CPU's
// caches flushed before each packet (64 MiB written, outside the timer),
// as they are for a flow's first packet on a busy hypervisor: what
// the translation costs then is the memory it touches.
func BenchmarkOVNFirstPacketCold(b *testing.B) {
	tr := ovnChassis(b)
	evict := make([]byte, 64<<20)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < len(evict); i += 64 {
			evict[i]++
		}
		b.StartTimer()
		firstPacketPasses(tr)
	}
}
