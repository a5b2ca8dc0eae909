package classifier

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/govn/govn/datapath/flow"
)

func ip(s string) uint64 { return flow.IPv4(netip.MustParseAddr(s)) }

func tcpKey(src, dst string, sport, dport uint64) flow.Key {
	var k flow.Key
	k.Set(flow.InPort, 1)
	k.Set(flow.EthType, 0x0800)
	k.Set(flow.NWSrc, ip(src))
	k.Set(flow.NWDst, ip(dst))
	k.Set(flow.NWProto, 6)
	k.Set(flow.TPSrc, sport)
	k.Set(flow.TPDst, dport)
	return k
}

func rule(prio uint16, port uint32, set func(m *flow.Match)) *flow.Rule {
	r := &flow.Rule{Priority: prio, Actions: []flow.Action{flow.Output{Port: port}}}
	set(&r.Match)
	return r
}

// TestStagedLookup: a packet that fails a high-priority rule at L3 leaves
// the rule's L4 field wildcarded.
func TestStagedLookup(t *testing.T) {
	c := New()
	c.Insert(rule(100, 1, func(m *flow.Match) {
		m.Set(flow.EthType, 0x0800)
		m.Set(flow.NWProto, 17)
		m.Set(flow.TPDst, 53)
	}))
	c.Insert(rule(0, 2, func(m *flow.Match) {}))

	k := tcpKey("10.0.0.1", "10.0.0.2", 40000, 53)
	var wc flow.Mask
	r := c.Lookup(&k, &wc)
	if r == nil || r.Priority != 0 {
		t.Fatalf("got %v, want the catch-all", r)
	}
	if wc.Get(flow.NWProto).IsZero() || wc.Get(flow.EthType).IsZero() {
		t.Errorf("nw_proto/eth_type not examined: %v", wc.Get(flow.NWProto))
	}
	if got := wc.Get(flow.TPDst); !got.IsZero() {
		t.Errorf("tp_dst un-wildcarded (%x) though the rule failed at L3", got)
	}

	// The instrument can fail: a UDP packet reaches L4, and tp_dst is examined.
	k.Set(flow.NWProto, 17)
	wc = flow.Mask{}
	if r := c.Lookup(&k, &wc); r == nil || r.Priority != 100 {
		t.Fatalf("UDP to 53: got %v", r)
	}
	if wc.Get(flow.TPDst).IsZero() {
		t.Error("tp_dst wildcarded for a packet that matched on it")
	}
}

// TestPrefixTracking: host bits beyond the longest relevant prefix stay
// wildcarded.
func TestPrefixTracking(t *testing.T) {
	c := New()
	c.Insert(rule(20, 1, func(m *flow.Match) {
		m.Set(flow.EthType, 0x0800)
		m.SetPrefix(flow.NWDst, flow.U128{Lo: ip("10.1.2.3")}, 32)
		m.Set(flow.NWProto, 6)
		m.Set(flow.TPDst, 80)
	}))
	c.Insert(rule(10, 2, func(m *flow.Match) {
		m.Set(flow.EthType, 0x0800)
		m.SetPrefix(flow.NWDst, flow.U128{Lo: ip("10.0.0.0")}, 8)
	}))
	c.Insert(rule(0, 3, func(m *flow.Match) {}))

	tests := []struct {
		dst      string
		wantPort uint32
		wantPlen uint // examined prefix of nw_dst
		wantTP   bool // tp_dst examined
	}{
		// 10.200.x: leaves the trie at bit 8 (10.1.2.3 has a 0 there).
		{"10.200.3.4", 2, 9, false},
		// 10.1.2.7 follows 10.1.2.3 down to bit 29.
		{"10.1.2.7", 2, 30, false},
		// 11.x leaves the trie at bit 7.
		{"11.0.0.1", 3, 8, false},
		// The VIP itself: every bit, and the port.
		{"10.1.2.3", 1, 32, true},
	}
	for _, tt := range tests {
		k := tcpKey("192.168.0.1", tt.dst, 1234, 80)
		var wc flow.Mask
		r := c.Lookup(&k, &wc)
		port := r.Actions[0].(flow.Output).Port
		if port != tt.wantPort {
			t.Errorf("%s: output %d, want %d", tt.dst, port, tt.wantPort)
		}
		want := flow.OnesU128(tt.wantPlen).Shl(32 - tt.wantPlen)
		if got := wc.Get(flow.NWDst); got != want {
			t.Errorf("%s: nw_dst examined %s, want /%d", tt.dst, flow.IPv4Addr(got.Lo), tt.wantPlen)
		}
		if got := !wc.Get(flow.TPDst).IsZero(); got != tt.wantTP {
			t.Errorf("%s: tp_dst examined = %v, want %v", tt.dst, got, tt.wantTP)
		}
		if !wc.Get(flow.NWSrc).IsZero() {
			t.Errorf("%s: nw_src examined", tt.dst)
		}
	}
}

// reference is the slow, obviously correct classifier: the first rule of
// highest priority that matches.
func reference(rules []*flow.Rule, k *flow.Key) *flow.Rule {
	var best *flow.Rule
	for _, r := range rules {
		if r.Match.Matches(k) && (best == nil || r.Priority > best.Priority) {
			best = r
		}
	}
	return best
}

// randomKey draws keys from a small space so rules and packets collide.
func randomKey(rng *rand.Rand) flow.Key {
	var k flow.Key
	k.Set(flow.InPort, uint64(rng.IntN(3)))
	k.Set(flow.EthType, []uint64{0x0800, 0x86dd}[rng.IntN(2)])
	k.Set(flow.NWSrc, 0x0a000000|uint64(rng.IntN(4))<<16|uint64(rng.IntN(256)))
	k.Set(flow.NWDst, 0x0a000000|uint64(rng.IntN(4))<<8|uint64(rng.IntN(16)))
	k.Set(flow.NWProto, []uint64{6, 17}[rng.IntN(2)])
	k.Set(flow.TPDst, uint64(rng.IntN(4)))
	k.Set(flow.Reg0, uint64(rng.IntN(4)))
	k.Set(flow.Metadata, uint64(rng.IntN(3)))
	return k
}

func randomRule(rng *rand.Rand, i int) *flow.Rule {
	src := randomKey(rng)
	r := &flow.Rule{Priority: uint16(rng.IntN(8)), Actions: []flow.Action{flow.Output{Port: uint32(i)}}}
	for _, f := range []flow.Field{flow.InPort, flow.EthType, flow.NWProto, flow.TPDst, flow.Reg0, flow.Metadata, flow.Metadata} {
		if rng.IntN(3) == 0 {
			r.Match.Set(f, src.Get(f))
		}
	}
	for _, f := range []flow.Field{flow.NWSrc, flow.NWDst} {
		if rng.IntN(2) == 0 {
			r.Match.SetPrefix(f, src.GetU128(f), uint(rng.IntN(33)))
		}
	}
	return r
}

// TestLookupAgainstReference checks on random rule sets that Lookup finds
// the rule the reference finds (same priority) and that the wildcards are
// sound: every key agreeing with the packet on the examined bits gets the
// same rule.
func TestLookupAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 40; round++ {
		c := New()
		var rules []*flow.Rule
		seen := map[[2]any]bool{}
		for i := 0; i < 30; i++ {
			r := randomRule(rng, i)
			id := [2]any{r.Priority, r.Match}
			if seen[id] {
				continue
			}
			seen[id] = true
			rules = append(rules, r)
			c.Insert(r)
		}
		// Remove a few to exercise deletion.
		for i := 0; i < 5; i++ {
			j := rng.IntN(len(rules))
			if c.Remove(rules[j].Priority, rules[j].Match) == nil {
				t.Fatal("Remove did not find an inserted rule")
			}
			rules = append(rules[:j], rules[j+1:]...)
		}
		for p := 0; p < 50; p++ {
			k := randomKey(rng)
			var wc flow.Mask
			got := c.Lookup(&k, &wc)
			want := reference(rules, &k)
			// With an explainer the lookup is the same, wildcards too.
			var wcE flow.Mask
			if gotE := c.LookupExplain(&k, &wcE, func(*flow.Mask, *flow.Rule) {}); gotE != got || wcE != wc {
				t.Fatalf("round %d: with explain %v %v, without %v %v", round, gotE, wcE, got, wc)
			}
			if (got == nil) != (want == nil) || (got != nil && got.Priority != want.Priority) {
				t.Fatalf("round %d: key %v: got %v want %v", round, k, got, want)
			}
			for q := 0; q < 50; q++ {
				k2 := randomKey(rng)
				if !k2.EqualMasked(&k, &wc) {
					continue
				}
				var wc2 flow.Mask
				if got2 := c.Lookup(&k2, &wc2); got2 != got {
					t.Fatalf("round %d: keys agree on the examined bits but get different rules: %v vs %v", round, got, got2)
				}
			}
		}
	}
}

func TestConjunction(t *testing.T) {
	tab := NewTable()
	// nw_src in {10.0.0.1, 10.0.0.2} && tp_dst in {80, 443} → output 7.
	for _, s := range []string{"10.0.0.1", "10.0.0.2"} {
		r := &flow.Rule{Priority: 50, Actions: []flow.Action{flow.Conjunction{ID: 9, Clause: 1, NClauses: 2}}}
		r.Match.Set(flow.EthType, 0x0800)
		r.Match.Set(flow.NWSrc, ip(s))
		tab.Insert(r)
	}
	for _, p := range []uint64{80, 443} {
		r := &flow.Rule{Priority: 50, Actions: []flow.Action{flow.Conjunction{ID: 9, Clause: 2, NClauses: 2}}}
		r.Match.Set(flow.EthType, 0x0800)
		r.Match.Set(flow.NWProto, 6)
		r.Match.Set(flow.TPDst, p)
		tab.Insert(r)
	}
	cr := &flow.Rule{Priority: 50, Actions: []flow.Action{flow.Output{Port: 7}}}
	cr.Match.Set(flow.ConjID, 9)
	tab.Insert(cr)
	tab.Insert(rule(0, 1, func(m *flow.Match) {}))
	if tab.Len() != 6 {
		t.Fatalf("Len = %d", tab.Len())
	}
	for _, tt := range []struct {
		src  string
		dp   uint64
		want uint32
	}{
		{"10.0.0.1", 80, 7}, {"10.0.0.2", 443, 7}, {"10.0.0.3", 80, 1}, {"10.0.0.1", 22, 1},
	} {
		k := tcpKey(tt.src, "10.0.0.9", 1000, tt.dp)
		var wc flow.Mask
		r := tab.Lookup(&k, &wc)
		if got := r.Actions[0].(flow.Output).Port; got != tt.want {
			t.Errorf("%s:%d → %d, want %d", tt.src, tt.dp, got, tt.want)
		}
	}
}

func TestPrefixTrackingIPv6(t *testing.T) {
	c := New()
	v6 := func(s string) flow.U128 { return flow.IPv6(netip.MustParseAddr(s)) }
	c.Insert(rule(20, 1, func(m *flow.Match) {
		m.Set(flow.EthType, 0x86dd)
		m.SetPrefix(flow.IPv6Dst, v6("fd00::5"), 128)
	}))
	c.Insert(rule(10, 2, func(m *flow.Match) {
		m.Set(flow.EthType, 0x86dd)
		m.SetPrefix(flow.IPv6Dst, v6("fd00::"), 64)
	}))
	var k flow.Key
	k.Set(flow.EthType, 0x86dd)
	k.SetU128(flow.IPv6Dst, v6("fd00::8000:0:0:1"))
	var wc flow.Mask
	r := c.Lookup(&k, &wc)
	if r == nil || r.Priority != 10 {
		t.Fatalf("got %v", r)
	}
	// fd00::5 has a 0 at bit 64, the packet a 1: 65 bits decide.
	if got, want := wc.Get(flow.IPv6Dst), flow.OnesU128(65).Shl(128-65); got != want {
		t.Errorf("ipv6_dst examined %s, want /65", flow.IPv6Addr(got))
	}
	// Removing the /128 rule prunes the trie: now 64 bits suffice.
	c.Remove(20, c.Find(20, func() flow.Match {
		var m flow.Match
		m.Set(flow.EthType, 0x86dd)
		m.SetPrefix(flow.IPv6Dst, v6("fd00::5"), 128)
		return m
	}()).Match)
	wc = flow.Mask{}
	c.Lookup(&k, &wc)
	if got, want := wc.Get(flow.IPv6Dst), flow.OnesU128(64).Shl(64); got != want {
		t.Errorf("after removal: ipv6_dst examined %s, want /64", flow.IPv6Addr(got))
	}
}

// TestTableSoundnessWithConjunctions is TestLookupAgainstReference's
// soundness check for tables with conjunctive matches.
func TestTableSoundnessWithConjunctions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 30; round++ {
		tab := NewTable()
		for i := 0; i < 15; i++ {
			tab.Insert(randomRule(rng, i))
		}
		for id := uint32(1); id <= 3; id++ {
			prio := uint16(rng.IntN(8))
			n := uint8(2 + rng.IntN(2))
			for k := uint8(1); k <= n; k++ {
				for j := 0; j < 2; j++ {
					r := randomRule(rng, 0)
					r.Priority = prio
					r.Actions = []flow.Action{flow.Conjunction{ID: id, Clause: k, NClauses: n}}
					tab.Insert(r)
				}
			}
			cr := &flow.Rule{Priority: prio, Actions: []flow.Action{flow.Output{Port: 1000 + id}}}
			cr.Match.Set(flow.ConjID, uint64(id))
			tab.Insert(cr)
		}
		for p := 0; p < 40; p++ {
			k := randomKey(rng)
			var wc flow.Mask
			got := tab.Lookup(&k, &wc)
			for q := 0; q < 60; q++ {
				k2 := randomKey(rng)
				if !k2.EqualMasked(&k, &wc) {
					continue
				}
				var wc2 flow.Mask
				if got2 := tab.Lookup(&k2, &wc2); got2 != got {
					t.Fatalf("round %d: keys agree on the examined bits but get %v and %v", round, got, got2)
				}
			}
		}
	}
}

// TestMetadataPartition: a subtable whose rules all match metadata (a
// logical datapath) is skipped by a key with another metadata at the cost
// of the first stage's bits alone, and its tags follow removals.
func TestMetadataPartition(t *testing.T) {
	c := New()
	mk := func(md uint64) *flow.Rule {
		return rule(10, uint32(md), func(m *flow.Match) {
			m.Set(flow.Metadata, md)
			m.Set(flow.Reg0, 1)
			m.Set(flow.EthType, 0x0800)
			m.Set(flow.TPDst, 80)
		})
	}
	for md := uint64(1); md <= 3; md++ {
		c.Insert(mk(md))
	}
	k := tcpKey("10.0.0.1", "10.0.0.2", 1000, 80)
	k.Set(flow.Reg0, 1)
	for md := uint64(1); md <= 3; md++ {
		k.Set(flow.Metadata, md)
		var wc flow.Mask
		if r := c.Lookup(&k, &wc); r == nil || r.Actions[0] != (flow.Output{Port: uint32(md)}) {
			t.Fatalf("metadata %d: got %v", md, r)
		}
	}
	// Metadata values whose tag is clear: skipped, un-wildcarding only the
	// first stage (metadata and reg0), never eth_type or the port.
	st := c.subtables[0]
	skipped := 0
	for md := uint64(100); md < 200; md++ {
		if st.tags&metaTag(md) != 0 {
			continue
		}
		skipped++
		k.Set(flow.Metadata, md)
		var wc flow.Mask
		if r := c.Lookup(&k, &wc); r != nil {
			t.Fatalf("metadata %d: matched %v", md, r)
		}
		if wc.Get(flow.Metadata).Lo != ^uint64(0) || wc.Get(flow.Reg0).Lo != 0xffffffff ||
			!wc.Get(flow.EthType).IsZero() || !wc.Get(flow.TPDst).IsZero() {
			t.Fatalf("metadata %d: wildcards %v", md, wc)
		}
	}
	if skipped == 0 {
		t.Fatal("no metadata value was skipped")
	}
	for md := uint64(1); md <= 3; md++ {
		if c.Remove(10, mk(md).Match) == nil {
			t.Fatalf("remove metadata %d", md)
		}
	}
	if len(c.subtables) != 0 {
		t.Fatalf("%d subtables left", len(c.subtables))
	}
	c.Insert(mk(2))
	c.Insert(mk(3))
	c.Remove(10, mk(3).Match)
	if st := c.subtables[0]; st.tags != metaTag(2) {
		t.Errorf("tags %x after removing metadata 3, want %x", st.tags, metaTag(2))
	}
}

func BenchmarkClassifierLookup(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	c := New()
	for i := 0; i < 1000; i++ {
		c.Insert(randomRule(rng, i))
	}
	keys := make([]flow.Key, 64)
	for i := range keys {
		keys[i] = randomKey(rng)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var wc flow.Mask
		c.Lookup(&keys[i%len(keys)], &wc)
		i++
	}
}

// TestExplainAccountsForEveryBit: LookupExplain examines exactly what
// Lookup does, and every examined bit is reported with a rule of the
// classifier.
func TestExplainAccountsForEveryBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	c := New()
	rules := map[*flow.Rule]bool{}
	for i := 0; i < 40; i++ {
		r := randomRule(rng, i)
		c.Insert(r)
		rules[r] = true
	}
	for p := 0; p < 200; p++ {
		k := randomKey(rng)
		var wc1, wc2, reported flow.Mask
		r1 := c.Lookup(&k, &wc1)
		r2 := c.LookupExplain(&k, &wc2, func(ex *flow.Mask, r *flow.Rule) {
			if !rules[r] {
				t.Fatalf("explained by a rule not in the classifier: %v", r)
			}
			reported.Or(ex)
		})
		if r1 != r2 || wc1 != wc2 {
			t.Fatalf("Lookup and LookupExplain differ: %v/%v, %v/%v", r1, r2, wc1.String(), wc2.String())
		}
		if reported != wc2 {
			t.Fatalf("reported %s, examined %s", reported.String(), wc2.String())
		}
	}
}
