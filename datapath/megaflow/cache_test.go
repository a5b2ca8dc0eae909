package megaflow

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

func ip(s string) uint64 { return flow.IPv4(netip.MustParseAddr(s)) }

var (
	clientMAC = uint64(0x02000000000a)
	serverMAC = uint64(0x02000000000b)
	clientIP  = ip("10.0.0.1")
	serverIP  = ip("10.0.0.2")
	vip       = ip("10.0.0.100")
)

const clientPort, serverPort = 1, 2

// lbPipeline builds a pipeline shaped like OVN's logical switch with a load
// balancer: table 0 admits ports and stores the logical inport in reg14
// (moveAll adds moves of nw_dst and tp_dst into registers for every packet);
// table 1 is the load-balancer stage, whose high-priority rule matches the
// VIP and its port and loads constants into registers, with a catch-all;
// table 2 forwards by destination MAC.
func lbPipeline(t testing.TB, moveAll bool) *classifier.Tables {
	t.Helper()
	var b flow.Bundle
	add := func(table uint8, prio uint16, m flow.Match, acts ...flow.Action) {
		b.Add(flow.Rule{Table: table, Priority: prio, Match: m, Actions: acts})
	}
	for _, p := range []uint64{clientPort, serverPort} {
		var m flow.Match
		m.Set(flow.InPort, p)
		acts := []flow.Action{flow.Load{Dst: flow.Whole(flow.Reg14), Value: flow.U128{Lo: p}}}
		if moveAll {
			acts = append(acts,
				flow.Move{Src: flow.Whole(flow.NWDst), Dst: flow.Whole(flow.Reg0)},
				flow.Move{Src: flow.Whole(flow.TPDst), Dst: flow.FieldRange{Field: flow.Reg1, Bits: 16}})
		}
		add(0, 100, m, append(acts, flow.GotoTable{Table: 1})...)
	}
	var lb flow.Match
	lb.Set(flow.EthType, 0x0800)
	lb.Set(flow.NWDst, vip)
	lb.Set(flow.NWProto, 6)
	lb.Set(flow.TPDst, 80)
	add(1, 120, lb,
		flow.Load{Dst: flow.Whole(flow.Reg1), Value: flow.U128{Lo: vip}},
		flow.Load{Dst: flow.FieldRange{Field: flow.Reg2, Bits: 16}, Value: flow.U128{Lo: 80}},
		flow.Load{Dst: flow.FieldRange{Field: flow.Reg10, Ofs: 3, Bits: 1}, Value: flow.U128{Lo: 1}},
		flow.GotoTable{Table: 2})
	add(1, 0, flow.Match{}, flow.GotoTable{Table: 2})
	for mac, port := range map[uint64]uint32{clientMAC: clientPort, serverMAC: serverPort} {
		var m flow.Match
		m.Set(flow.EthDst, mac)
		add(2, 50, m, flow.Output{Port: port})
	}
	ts := classifier.NewTables()
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	return ts
}

// tcpKey is the key of one TCP segment.
func tcpKey(toServer bool, clientSport uint16, flags uint64) flow.Key {
	var k flow.Key
	k.Set(flow.EthType, 0x0800)
	k.Set(flow.NWProto, 6)
	k.Set(flow.NWTTL, 64)
	k.Set(flow.TCPFlags, flags)
	if toServer {
		k.Set(flow.InPort, clientPort)
		k.Set(flow.EthSrc, clientMAC)
		k.Set(flow.EthDst, serverMAC)
		k.Set(flow.NWSrc, clientIP)
		k.Set(flow.NWDst, serverIP)
		k.Set(flow.TPSrc, uint64(clientSport))
		k.Set(flow.TPDst, 8080)
	} else {
		k.Set(flow.InPort, serverPort)
		k.Set(flow.EthSrc, serverMAC)
		k.Set(flow.EthDst, clientMAC)
		k.Set(flow.NWSrc, serverIP)
		k.Set(flow.NWDst, clientIP)
		k.Set(flow.TPSrc, 8080)
		k.Set(flow.TPDst, uint64(clientSport))
	}
	return k
}

// connection is the packets of one short-lived TCP connection, in order.
var connection = []struct {
	toServer bool
	flags    uint64
}{
	{true, packet.TCPSyn},
	{false, packet.TCPSyn | packet.TCPAck},
	{true, packet.TCPAck},
	{true, packet.TCPPsh | packet.TCPAck},
	{false, packet.TCPPsh | packet.TCPAck},
	{true, packet.TCPFin | packet.TCPAck},
	{false, packet.TCPFin | packet.TCPAck},
	{true, packet.TCPAck},
}

// datapath is the fast path of the test: cache, misses to the slow path.
type datapath struct {
	cache   *Cache
	tr      *xlate.Translator
	tables  *classifier.Tables
	upcalls int
	now     time.Duration
	changed ChangedSince // nil: revalidate by re-translating everything
}

func (d *datapath) process(t testing.TB, k *flow.Key) []flow.DPAction {
	d.now++
	if g := d.tables.Generation(); d.cache.NeedsRevalidation(g) {
		d.cache.Revalidate(g, func(k *flow.Key) xlate.Result { return d.tr.Translate(k, xlate.Options{}) }, d.changed)
	}
	if f := d.cache.Lookup(k, d.now); f != nil {
		return f.Actions
	}
	d.upcalls++
	res := d.tr.Translate(k, xlate.Options{})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	d.cache.Insert(&res, d.now)
	return res.Actions
}

func runConnections(t *testing.T, moveAll bool, n int) *datapath {
	ts := lbPipeline(t, moveAll)
	d := &datapath{cache: New(true), tr: xlate.New(ts), tables: ts}
	for i := 0; i < n; i++ {
		sport := uint16(10000 + i)
		for _, p := range connection {
			k := tcpKey(p.toServer, sport, p.flags)
			acts := d.process(t, &k)
			want := fmt.Sprint(serverPort)
			if !p.toServer {
				want = fmt.Sprint(clientPort)
			}
			if got := flow.DPActionsString(acts); got != want {
				t.Fatalf("connection %d: actions %s, want %s", i, got, want)
			}
		}
	}
	return d
}

// TestShortLivedConnections is acceptance check (c): 10,000 connections
// through an OVN-shaped load-balancer pipeline need a handful of megaflows.
func TestShortLivedConnections(t *testing.T) {
	const n = 10000
	d := runConnections(t, false, n)
	// The first packet of each direction must miss; at most 4 more may.
	if d.cache.Len() > 4 || d.upcalls > 2+4 {
		t.Errorf("%d megaflows, %d upcalls for %d connections; want <= 4 megaflows, <= 6 upcalls\n%s",
			d.cache.Len(), d.upcalls, n, d.cache.Dump(true))
	}
	t.Logf("%d connections: %d megaflows, %d upcalls", n, d.cache.Len(), d.upcalls)
	// The dump, with the reason for every matched field, is a golden file:
	// a change in what the megaflows match shows up in review.
	checkGolden(t, "short-lived.golden", d.cache.Dump(true))
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, got)
	}
}

// TestShortLivedConnectionsMoveAll proves the instrument can fail: moving
// nw_dst and tp_dst into registers for every packet makes every reply
// direction's megaflow match the client's port.
func TestShortLivedConnectionsMoveAll(t *testing.T) {
	const n = 10000
	d := runConnections(t, true, n)
	if d.cache.Len() < n {
		t.Errorf("%d megaflows for %d connections; want one per connection at least", d.cache.Len(), n)
	}
	t.Logf("%d connections: %d megaflows, %d upcalls", n, d.cache.Len(), d.upcalls)
}

// TestRevalidation: a flow-table change never leaves a stale megaflow in
// use, and unaffected megaflows survive.
func TestRevalidation(t *testing.T) {
	ts := lbPipeline(t, false)
	d := &datapath{cache: New(true), tr: xlate.New(ts), tables: ts}
	toServer := tcpKey(true, 1000, packet.TCPAck)
	toClient := tcpKey(false, 1000, packet.TCPAck)
	d.process(t, &toServer)
	d.process(t, &toClient)
	if d.cache.Len() != 2 {
		t.Fatalf("%d megaflows", d.cache.Len())
	}
	// The server moves to port 3.
	var b flow.Bundle
	var m flow.Match
	m.Set(flow.EthDst, serverMAC)
	b.Modify(flow.Rule{Table: 2, Priority: 50, Match: m, Actions: []flow.Action{flow.Output{Port: 3}}})
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	// Once the cache knows the generation, even before revalidation, the
	// stale megaflow is not used.
	d.cache.SetGeneration(ts.Generation())
	if f := d.cache.Lookup(&toServer, d.now); f != nil {
		t.Fatalf("stale megaflow used: %s", f)
	}
	before := d.upcalls
	if got := flow.DPActionsString(d.process(t, &toServer)); got != "3" {
		t.Errorf("after the change: %s, want 3", got)
	}
	if got := flow.DPActionsString(d.process(t, &toClient)); got != "1" {
		t.Errorf("unaffected direction: %s, want 1", got)
	}
	// Revalidation kept the client direction's megaflow: one upcall only.
	if d.upcalls != before+1 || d.cache.Len() != 2 {
		t.Errorf("upcalls %d→%d, %d megaflows", before, d.upcalls, d.cache.Len())
	}
	s := d.cache.Stats()
	if s.Revalidated != 1 || s.Deleted != 1 {
		t.Errorf("stats %+v", s)
	}
	// Idle expiry.
	if n := d.cache.Expire(d.now+time.Hour, time.Second); n != 2 || d.cache.Len() != 0 {
		t.Errorf("expired %d, %d left", n, d.cache.Len())
	}
}

// TestSubtableDeletion exercises open addressing with many inserts and
// removes in one subtable.
func TestSubtableDeletion(t *testing.T) {
	c := New(false)
	var mask flow.Mask
	mask.SetField(flow.InPort)
	mask.SetField(flow.TPSrc)
	flows := map[uint64]*Flow{}
	for i := uint64(0); i < 2000; i++ {
		var k flow.Key
		k.Set(flow.InPort, 1)
		k.Set(flow.TPSrc, i)
		res := xlate.Result{Key: k, Mask: mask, Actions: []flow.DPAction{flow.DPOutput{Port: uint32(i)}}}
		flows[i] = c.Insert(&res, 0)
	}
	for i := uint64(0); i < 2000; i += 3 {
		c.Remove(flows[i])
	}
	for i := uint64(0); i < 2000; i++ {
		var k flow.Key
		k.Set(flow.InPort, 1)
		k.Set(flow.TPSrc, i)
		k.Set(flow.NWSrc, i) // outside the mask
		f := c.Lookup(&k, 1)
		if (f == nil) != (i%3 == 0) {
			t.Fatalf("port %d: found %v", i, f)
		}
		if f != nil && f.Actions[0].(flow.DPOutput).Port != uint32(i) {
			t.Fatalf("port %d: wrong flow %s", i, f)
		}
	}
}

// benchCache builds a cache with 20 subtables (masks of different prefix
// lengths and fields), 10 megaflows each, and keys that hit each subtable.
func benchCache(emc bool) (*Cache, []flow.Key) {
	c := New(emc)
	var keys []flow.Key
	for s := 0; s < 20; s++ {
		var mask flow.Mask
		mask.SetField(flow.InPort)
		mask.SetField(flow.RecircID)
		mask.SetField(flow.EthType)
		plen := uint(12 + s)
		mask.SetBits(flow.NWDst, flow.OnesU128(plen).Shl(32-plen))
		if s%2 == 0 {
			mask.SetField(flow.NWProto)
			mask.SetField(flow.TPDst)
		}
		for i := 0; i < 10; i++ {
			var k flow.Key
			k.Set(flow.InPort, 1)
			k.Set(flow.EthType, 0x0800)
			k.Set(flow.NWProto, 6)
			k.Set(flow.NWSrc, ip("192.168.1.1"))
			k.Set(flow.NWDst, uint64(10+s)<<24|uint64(i)<<(32-plen))
			k.Set(flow.TPSrc, uint64(40000+i))
			k.Set(flow.TPDst, 80)
			res := xlate.Result{Key: k.And(&mask), Mask: mask, Actions: []flow.DPAction{flow.DPOutput{Port: uint32(s)}}}
			c.Insert(&res, 0)
			keys = append(keys, k)
		}
	}
	return c, keys
}

func TestBenchCacheShape(t *testing.T) {
	c, keys := benchCache(false)
	if c.Subtables() != 20 || c.Len() != 200 {
		t.Fatalf("%d subtables, %d flows", c.Subtables(), c.Len())
	}
	for _, k := range keys {
		if c.Lookup(&k, 0) == nil {
			t.Fatal("miss")
		}
	}
}

// BenchmarkLookup20Subtables looks up keys spread over 20 subtables, so an
// average lookup probes about half of them.
func BenchmarkLookup20Subtables(b *testing.B) {
	for _, emc := range []bool{false, true} {
		b.Run(fmt.Sprintf("emc=%v", emc), func(b *testing.B) {
			c, keys := benchCache(emc)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if c.Lookup(&keys[i%len(keys)], 0) == nil {
					b.Fatal("miss")
				}
				i++
			}
		})
	}
}

// BenchmarkLookup20SubtablesLast hits only the subtable that ranks last
// before ranking, the worst case of a single lookup.
func BenchmarkLookup20SubtablesWorst(b *testing.B) {
	c, keys := benchCache(false)
	k := keys[len(keys)-1]
	// Make every other subtable busier, so ranking keeps this one last.
	for _, st := range c.subtables {
		st.hits = 1 << 40
	}
	c.byMask[*c.Lookup(&k, 0).Mask()].hits = 0
	c.rank()
	b.ReportAllocs()
	for b.Loop() {
		c.lookups = 1 // keep rank from running
		if c.Lookup(&k, 0) == nil {
			b.Fatal("miss")
		}
	}
}

// BenchmarkLookupOneSubtable is the short-lived-connection case: every
// packet hits the first subtable.
func BenchmarkLookupOneSubtable(b *testing.B) {
	for _, emc := range []bool{false, true} {
		b.Run(fmt.Sprintf("emc=%v", emc), func(b *testing.B) {
			ts := lbPipeline(b, false)
			d := &datapath{cache: New(emc), tr: xlate.New(ts), tables: ts}
			k := tcpKey(true, 1000, packet.TCPAck)
			d.process(b, &k)
			b.ReportAllocs()
			for b.Loop() {
				if d.cache.Lookup(&k, 0) == nil {
					b.Fatal("miss")
				}
			}
		})
	}
}

// TestLookupAllocs keeps the fast path allocation free.
func TestLookupAllocs(t *testing.T) {
	c, keys := benchCache(true)
	for _, emc := range []bool{true, false} {
		if !emc {
			c.emc = nil
		}
		if n := testing.AllocsPerRun(200, func() { c.Lookup(&keys[7], 1) }); n != 0 {
			t.Errorf("emc=%v: Lookup allocates %v times", emc, n)
		}
	}
}

// tcpFrame builds the Ethernet/IPv4/TCP frame of one segment.
func tcpFrame(toServer bool, clientSport uint16, flags uint16) []byte {
	k := tcpKey(toServer, clientSport, 0)
	b := make([]byte, 14+20+20)
	dst, src := flow.MACBytes(k.Get(flow.EthDst)), flow.MACBytes(k.Get(flow.EthSrc))
	copy(b[0:], dst[:])
	copy(b[6:], src[:])
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	binary.BigEndian.PutUint32(ip[12:], uint32(k.Get(flow.NWSrc)))
	binary.BigEndian.PutUint32(ip[16:], uint32(k.Get(flow.NWDst)))
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], uint16(k.Get(flow.TPSrc)))
	binary.BigEndian.PutUint16(tcp[2:], uint16(k.Get(flow.TPDst)))
	binary.BigEndian.PutUint16(tcp[12:], 5<<12|flags)
	return b
}

// TestShortLivedConnectionsFromFrames runs the acceptance pipeline on real
// frames parsed by packet.Extract, as the datapath does.
func TestShortLivedConnectionsFromFrames(t *testing.T) {
	ts := lbPipeline(t, false)
	d := &datapath{cache: New(true), tr: xlate.New(ts), tables: ts}
	const n = 2000
	for i := 0; i < n; i++ {
		for _, p := range connection {
			f := tcpFrame(p.toServer, uint16(20000+i), uint16(p.flags))
			var k flow.Key
			port := uint64(clientPort)
			if !p.toServer {
				port = serverPort
			}
			k.Set(flow.InPort, port)
			packet.Extract(f, &k)
			acts := d.process(t, &k)
			want := map[bool]string{true: "2", false: "1"}[p.toServer]
			if got := flow.DPActionsString(acts); got != want {
				t.Fatalf("connection %d: %s, want %s", i, got, want)
			}
		}
	}
	if d.cache.Len() > 4 || d.upcalls > 6 {
		t.Errorf("%d megaflows, %d upcalls\n%s", d.cache.Len(), d.upcalls, d.cache.Dump(true))
	}
}

// TestRevalidationSkipsUnchangedTables: a change to a table no megaflow
// looked at re-translates nothing; a change to a table they used
// re-translates them.
func TestRevalidationSkipsUnchangedTables(t *testing.T) {
	ts := lbPipeline(t, false)
	d := &datapath{cache: New(false), tr: xlate.New(ts), tables: ts, changed: ts.ChangedSince}
	for i := 0; i < 10; i++ {
		for _, dir := range []bool{true, false} {
			k := tcpKey(dir, uint16(1000+i), packet.TCPAck)
			d.process(t, &k)
		}
	}
	if d.cache.Len() != 2 {
		t.Fatalf("%d megaflows", d.cache.Len())
	}
	translations := 0
	translate := func(k *flow.Key) xlate.Result {
		translations++
		return d.tr.Translate(k, xlate.Options{})
	}
	apply := func(table uint8) uint64 {
		var b flow.Bundle
		var m flow.Match
		m.Set(flow.Reg0, 42)
		b.Add(flow.Rule{Table: table, Priority: 77, Match: m, Actions: []flow.Action{flow.Drop{}}})
		gen, err := ts.Apply(b)
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}
	kept, deleted := d.cache.Revalidate(apply(10), translate, ts.ChangedSince)
	if translations != 0 || kept != 2 || deleted != 0 {
		t.Errorf("change in table 10: %d translations, kept %d, deleted %d", translations, kept, deleted)
	}
	kept, deleted = d.cache.Revalidate(apply(2), translate, ts.ChangedSince)
	if translations != 2 || kept != 2 || deleted != 0 {
		t.Errorf("change in table 2: %d translations, kept %d, deleted %d", translations, kept, deleted)
	}
	// The rule added to table 2 matches reg0, which the megaflows now have
	// examined: still valid, since registers are pipeline-only.
	for _, dir := range []bool{true, false} {
		k := tcpKey(dir, 5000, packet.TCPAck)
		if f := d.cache.Lookup(&k, d.now); f == nil {
			t.Errorf("megaflow lost after revalidation")
		}
	}
}
