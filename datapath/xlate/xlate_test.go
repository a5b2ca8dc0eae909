package xlate

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
)

func ip(s string) uint64 { return flow.IPv4(netip.MustParseAddr(s)) }

func tcpKey(sport, dport uint64) flow.Key {
	var k flow.Key
	k.Set(flow.InPort, 1)
	k.Set(flow.EthSrc, 0x0a)
	k.Set(flow.EthDst, 0x0b)
	k.Set(flow.EthType, 0x0800)
	k.Set(flow.NWSrc, ip("10.0.0.1"))
	k.Set(flow.NWDst, ip("10.0.0.2"))
	k.Set(flow.NWProto, 6)
	k.Set(flow.NWTTL, 64)
	k.Set(flow.TPSrc, sport)
	k.Set(flow.TPDst, dport)
	return k
}

type ruleSpec struct {
	table uint8
	prio  uint16
	match func(m *flow.Match)
	acts  []flow.Action
}

func program(t testing.TB, specs ...ruleSpec) *classifier.Tables {
	t.Helper()
	ts := classifier.NewTables()
	var b flow.Bundle
	for _, s := range specs {
		r := flow.Rule{Table: s.table, Priority: s.prio, Actions: s.acts}
		if s.match != nil {
			s.match(&r.Match)
		}
		b.Add(r)
	}
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	return ts
}

func matchAll(m *flow.Match) {}

// TestMoveUnwildcards: a move of tcp_dst into a register makes the megaflow
// match tcp_dst, and says which rule caused it.
func TestMoveUnwildcards(t *testing.T) {
	for _, withMove := range []bool{false, true} {
		acts := []flow.Action{flow.Load{Dst: flow.Whole(flow.Reg1), Value: flow.U128{Lo: 7}}, flow.Resubmit{Table: 1}}
		if withMove {
			acts = append([]flow.Action{flow.Move{Src: flow.Whole(flow.TPDst), Dst: flow.FieldRange{Field: flow.Reg0, Bits: 16}}}, acts...)
		}
		ts := program(t,
			ruleSpec{0, 10, matchAll, acts},
			ruleSpec{1, 10, matchAll, []flow.Action{flow.Output{Port: 2}}},
		)
		k := tcpKey(1000, 80)
		res := New(ts).Translate(&k, Options{Trace: true})
		got := !res.Mask.Get(flow.TPDst).IsZero()
		if got != withMove {
			t.Errorf("move=%v: tp_dst matched = %v\n%s", withMove, got, res.FormatTrace())
		}
		if !res.Mask.Get(flow.Reg0).IsZero() || !res.Mask.Get(flow.Reg1).IsZero() {
			t.Error("registers leaked into the megaflow mask")
		}
		found := false
		for _, r := range res.Reasons {
			if r.Field == flow.TPDst && strings.HasPrefix(r.Cause, "move") && r.Table == 0 {
				found = true
			}
		}
		if found != withMove {
			t.Errorf("move=%v: reason for tp_dst recorded = %v: %v", withMove, found, res.Reasons)
		}
		if s := flow.DPActionsString(res.Actions); s != "2" {
			t.Errorf("actions = %s", s)
		}
	}
}

// TestRegisterMatchFollowsSource: matching a register that holds a moved
// packet field is sound because the move un-wildcarded the source.
func TestRegisterMatchFollowsSource(t *testing.T) {
	ts := program(t,
		ruleSpec{0, 10, matchAll, []flow.Action{flow.Move{Src: flow.Whole(flow.NWDst), Dst: flow.Whole(flow.Reg0)}, flow.Resubmit{Table: 1}}},
		ruleSpec{1, 10, func(m *flow.Match) { m.Set(flow.Reg0, ip("10.0.0.2")) }, []flow.Action{flow.Output{Port: 2}}},
		ruleSpec{1, 0, matchAll, []flow.Action{flow.Output{Port: 3}}},
	)
	tr := New(ts)
	k := tcpKey(1, 2)
	res := tr.Translate(&k, Options{})
	if res.Mask.Get(flow.NWDst).Lo != 0xffffffff {
		t.Errorf("nw_dst mask = %x", res.Mask.Get(flow.NWDst))
	}
	if flow.DPActionsString(res.Actions) != "2" {
		t.Errorf("actions %v", res.Actions)
	}
}

func TestCTRecirculation(t *testing.T) {
	ts := program(t,
		ruleSpec{0, 10, matchAll, []flow.Action{
			flow.Load{Dst: flow.FieldRange{Field: flow.Reg13, Bits: 16}, Value: flow.U128{Lo: 5}},
			flow.CT{ZoneField: flow.FieldRange{Field: flow.Reg13, Bits: 16}, Table: 3},
		}},
		ruleSpec{3, 20, func(m *flow.Match) { m.SetMasked(flow.CTState, 0x22, 0x22) }, []flow.Action{
			flow.Move{Src: flow.FieldRange{Field: flow.Reg13, Bits: 16}, Dst: flow.FieldRange{Field: flow.Reg14, Bits: 16}},
			flow.Resubmit{Table: 4},
		}},
		ruleSpec{3, 10, matchAll, []flow.Action{flow.CT{Zone: 5, Commit: true, Table: flow.CTNoTable,
			Exec: []flow.Action{flow.Load{Dst: flow.FieldRange{Field: flow.CTMark, Ofs: 1, Bits: 1}, Value: flow.U128{Lo: 1}}}}, flow.Output{Port: 9}}},
		ruleSpec{4, 10, func(m *flow.Match) { m.Set(flow.Reg14, 5) }, []flow.Action{flow.Output{Port: 8}}},
	)
	tr := New(ts)
	k := tcpKey(1, 2)
	res := tr.Translate(&k, Options{})
	if got := flow.DPActionsString(res.Actions); got != "ct(zone=5),recirc(0x1)" {
		t.Fatalf("first pass: %s", got)
	}
	// The datapath re-injects with recirc_id and the conntrack verdict.
	k.Set(flow.RecircID, 1)
	k.Set(flow.CTState, 0x21) // trk|new
	res = tr.Translate(&k, Options{Trace: true})
	if got := flow.DPActionsString(res.Actions); got != "ct(commit,zone=5,mark=0x2/0x2),9" {
		t.Errorf("new connection: %s\n%s", got, res.FormatTrace())
	}
	if res.Mask.Get(flow.RecircID).Lo != 0xffffffff || res.Mask.Get(flow.CTState).Lo != 0x22 {
		t.Errorf("recirc megaflow mask: %s", res.String())
	}
	k.Set(flow.CTState, 0x22) // trk|est
	res = tr.Translate(&k, Options{})
	if got := flow.DPActionsString(res.Actions); got != "8" {
		t.Errorf("established: %s (registers not restored?)", got)
	}
	// The same state is frozen once.
	k2 := tcpKey(5, 6)
	tr.Translate(&k2, Options{})
	if n := tr.RecircStates(); n != 1 {
		t.Errorf("%d frozen states, want 1", n)
	}
	k.Set(flow.RecircID, 99)
	if res := tr.Translate(&k, Options{}); res.Err == nil || len(res.Actions) != 0 {
		t.Error("unknown recirc_id not dropped")
	}
}

func TestGroups(t *testing.T) {
	ts := program(t, ruleSpec{0, 10, matchAll, []flow.Action{flow.Group{ID: 1}}},
		ruleSpec{0, 20, func(m *flow.Match) { m.Set(flow.TPDst, 443) }, []flow.Action{flow.Group{ID: 2}}})
	var b flow.Bundle
	buckets := []flow.Bucket{{Weight: 1, Actions: []flow.Action{flow.Output{Port: 10}}}, {Weight: 1, Actions: []flow.Action{flow.Output{Port: 11}}}}
	b.AddGroup(flow.GroupDef{ID: 1, Method: flow.Select5Tuple, Buckets: buckets})
	b.AddGroup(flow.GroupDef{ID: 2, Method: flow.SelectHash, Buckets: buckets})
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	tr := New(ts)
	seen := map[string]bool{}
	for sp := uint64(1); sp < 50; sp++ {
		k := tcpKey(sp, 80)
		res := tr.Translate(&k, Options{})
		seen[flow.DPActionsString(res.Actions)] = true
		if res.Mask.Get(flow.TPSrc).Lo != 0xffff || res.Mask.Get(flow.NWSrc).Lo != 0xffffffff {
			t.Fatalf("5-tuple select does not match the 5-tuple: %s", res.String())
		}
	}
	if !seen["10"] || !seen["11"] || len(seen) != 2 {
		t.Errorf("5-tuple select used %v", seen)
	}
	k := tcpKey(1, 443)
	res := tr.Translate(&k, Options{})
	acts := flow.DPActionsString(res.Actions)
	if !strings.HasPrefix(acts, "hash(l4(2)),recirc(") || !res.Mask.Get(flow.TPSrc).IsZero() {
		t.Fatalf("dp_hash select: %s", res.String())
	}
	rid := res.Actions[1].(flow.DPRecirc).ID
	seen = map[string]bool{}
	for h := uint64(0); h < 64; h++ {
		k.Set(flow.RecircID, uint64(rid))
		k.Set(flow.DPHash, h*0x01000001)
		res := tr.Translate(&k, Options{})
		seen[flow.DPActionsString(res.Actions)] = true
		if res.Mask.Get(flow.DPHash).Lo != 1<<hashSlotBits-1 {
			t.Fatalf("dp_hash mask %x", res.Mask.Get(flow.DPHash))
		}
	}
	if !seen["10"] || !seen["11"] {
		t.Errorf("dp_hash select used %v", seen)
	}
}

// TestSelectOneBucket: a select group with one bucket of nonzero weight
// (a load balancer with one backend) runs it at once, by either method:
// no dp_hash and recirculation (a megaflow per hash slot), no 5-tuple in
// the mask (a megaflow per connection).
func TestSelectOneBucket(t *testing.T) {
	for _, m := range []flow.SelectionMethod{flow.SelectHash, flow.Select5Tuple} {
		ts := program(t, ruleSpec{0, 10, matchAll, []flow.Action{flow.Group{ID: 1}}})
		var b flow.Bundle
		b.AddGroup(flow.GroupDef{ID: 1, Method: m, Buckets: []flow.Bucket{
			{Weight: 0, Actions: []flow.Action{flow.Output{Port: 9}}},
			{Weight: 100, Actions: []flow.Action{flow.Output{Port: 10}}}}})
		if _, err := ts.Apply(b); err != nil {
			t.Fatal(err)
		}
		tr := New(ts)
		for sp := uint64(1); sp < 5; sp++ {
			k := tcpKey(sp, 80)
			res := tr.Translate(&k, Options{})
			if got := flow.DPActionsString(res.Actions); got != "10" {
				t.Errorf("method %v: actions %s, want 10", m, got)
			}
			if !res.Mask.Get(flow.TPSrc).IsZero() || !res.Mask.Get(flow.DPHash).IsZero() {
				t.Errorf("method %v: megaflow matches the connection: %s", m, res.String())
			}
		}
		if n := tr.RecircStates(); n != 0 {
			t.Errorf("method %v: %d frozen states, want none", m, n)
		}
	}
}

// TestSelectHashShares: a dp_hash select group shares the hash slots out
// in proportion to its buckets' weights, as OVN's load balancers make
// them (weight 100 each) and with uneven weights.
func TestSelectHashShares(t *testing.T) {
	for _, weights := range [][]uint16{{100, 100, 100}, {1, 1}, {100, 100, 100, 100, 100}, {3, 1}} {
		ts := program(t, ruleSpec{0, 10, matchAll, []flow.Action{flow.Group{ID: 1}}})
		var buckets []flow.Bucket
		total := 0
		for i, w := range weights {
			buckets = append(buckets, flow.Bucket{Weight: w, Actions: []flow.Action{flow.Output{Port: uint32(10 + i)}}})
			total += int(w)
		}
		var b flow.Bundle
		b.AddGroup(flow.GroupDef{ID: 1, Method: flow.SelectHash, Buckets: buckets})
		if _, err := ts.Apply(b); err != nil {
			t.Fatal(err)
		}
		tr := New(ts)
		k := tcpKey(1, 80)
		res := tr.Translate(&k, Options{})
		rid := res.Actions[1].(flow.DPRecirc).ID
		count := map[string]int{}
		const slots = 1 << hashSlotBits
		for h := uint64(0); h < slots; h++ {
			k.Set(flow.RecircID, uint64(rid))
			k.Set(flow.DPHash, h)
			count[flow.DPActionsString(tr.Translate(&k, Options{}).Actions)]++
		}
		for i, w := range weights {
			port := strconv.Itoa(10 + i)
			// Each bucket's share of the slots, to within one slot.
			if want := slots * int(w) / total; count[port] < want || count[port] > want+1 {
				t.Errorf("weights %v: bucket %d has %d of %d slots, want %d", weights, i, count[port], slots, want)
			}
		}
	}
}

func TestLimitsAndMisc(t *testing.T) {
	// A resubmit loop is cut off and dropped.
	ts := program(t, ruleSpec{0, 10, matchAll, []flow.Action{flow.Output{Port: 2}, flow.Resubmit{Table: 0}}})
	k := tcpKey(1, 2)
	res := New(ts).Translate(&k, Options{})
	if res.Err == nil || len(res.Actions) != 0 {
		t.Errorf("loop: err %v, actions %v", res.Err, res.Actions)
	}
	// dec_ttl, set field, output to in_port, clone, conjunction via goto.
	ts = program(t,
		ruleSpec{0, 10, matchAll, []flow.Action{flow.DecTTL{}, flow.Load{Dst: flow.Whole(flow.EthDst), Value: flow.U128{Lo: 0x0c}},
			flow.Output{Port: 1}, flow.Output{Port: flow.PortInPort},
			flow.Clone{Actions: []flow.Action{flow.Load{Dst: flow.Whole(flow.TunID), Value: flow.U128{Lo: 5}}, flow.Output{Port: 7}}},
			flow.GotoTable{Table: 1}}},
		ruleSpec{1, 5, func(m *flow.Match) { m.Set(flow.NWProto, 6) }, []flow.Action{flow.Conjunction{ID: 4, Clause: 1, NClauses: 2}}},
		ruleSpec{1, 5, func(m *flow.Match) { m.Set(flow.TPDst, 2) }, []flow.Action{flow.Conjunction{ID: 4, Clause: 2, NClauses: 2}}},
		ruleSpec{1, 5, func(m *flow.Match) { m.Set(flow.ConjID, 4) }, []flow.Action{flow.Output{Port: 3}}},
	)
	res = New(ts).Translate(&k, Options{Trace: true})
	want := "set(nw_ttl=63),set(eth_dst=00:00:00:00:00:0c),1,clone(set(tun_id=0x5),7),3"
	if got := flow.DPActionsString(res.Actions); got != want {
		t.Errorf("actions %s, want %s\n%s", got, want, res.FormatTrace())
	}
	if !res.Mask.Get(flow.ConjID).IsZero() {
		t.Error("conj_id in the megaflow mask")
	}
	if res.Mask.Get(flow.NWTTL).IsZero() {
		t.Error("dec_ttl did not un-wildcard nw_ttl")
	}
}

// TestMegaflowSoundness translates random packets through a random
// pipeline and checks that every packet agreeing with one on its megaflow
// mask gets the same datapath actions: the megaflow never over-generalizes.
func TestMegaflowSoundness(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fields := []flow.Field{flow.EthType, flow.NWSrc, flow.NWDst, flow.NWProto, flow.TPSrc, flow.TPDst}
	randKey := func() flow.Key {
		var k flow.Key
		k.Set(flow.InPort, uint64(1+rng.IntN(2)))
		k.Set(flow.EthType, 0x0800)
		k.Set(flow.NWSrc, 0x0a000000|uint64(rng.IntN(8)))
		k.Set(flow.NWDst, 0x0a000000|uint64(rng.IntN(8))<<4)
		k.Set(flow.NWProto, []uint64{6, 17}[rng.IntN(2)])
		k.Set(flow.TPSrc, uint64(rng.IntN(4)))
		k.Set(flow.TPDst, uint64(rng.IntN(4)))
		return k
	}
	for round := 0; round < 20; round++ {
		var specs []ruleSpec
		for table := uint8(0); table < 3; table++ {
			for i := 0; i < 8; i++ {
				src := randKey()
				var m flow.Match
				for _, f := range fields {
					if rng.IntN(4) == 0 {
						m.Set(f, src.Get(f))
					}
				}
				if rng.IntN(3) == 0 {
					m.Set(flow.Reg0, uint64(rng.IntN(4)))
				}
				if rng.IntN(3) == 0 {
					m.SetPrefix(flow.NWDst, src.GetU128(flow.NWDst), uint(rng.IntN(33)))
				}
				var acts []flow.Action
				switch rng.IntN(4) {
				case 0:
					acts = append(acts, flow.Move{Src: flow.FieldRange{Field: fields[rng.IntN(len(fields))], Bits: 2}, Dst: flow.FieldRange{Field: flow.Reg0, Bits: 2}})
				case 1:
					acts = append(acts, flow.Load{Dst: flow.Whole(flow.Reg0), Value: flow.U128{Lo: uint64(rng.IntN(4))}})
				}
				acts = append(acts, flow.Output{Port: uint32(10 + rng.IntN(5))})
				if table < 2 && rng.IntN(2) == 0 {
					acts = append(acts, flow.Resubmit{Table: table + 1 + uint8(rng.IntN(int(2-table)))})
				}
				mm := m
				specs = append(specs, ruleSpec{table, uint16(rng.IntN(5)), func(x *flow.Match) { *x = mm }, acts})
			}
		}
		tr := New(program(t, specs...))
		for p := 0; p < 30; p++ {
			k := randKey()
			res := tr.Translate(&k, Options{})
			for q := 0; q < 60; q++ {
				k2 := randKey()
				if !k2.EqualMasked(&k, &res.Mask) {
					continue
				}
				res2 := tr.Translate(&k2, Options{})
				if a, b := flow.DPActionsString(res.Actions), flow.DPActionsString(res2.Actions); a != b {
					t.Fatalf("round %d: keys agree on megaflow %s but translate to %s and %s", round, res.String(), a, b)
				}
			}
		}
	}
}

// TestHairpin: clearing in_port lets a packet go back out its input port,
// without any datapath action for in_port itself.
func TestHairpin(t *testing.T) {
	ts := program(t, ruleSpec{0, 10, matchAll, []flow.Action{
		flow.Output{Port: 1},
		flow.Load{Dst: flow.Whole(flow.InPort), Value: flow.U128{}},
		flow.Output{Port: 1},
	}})
	k := tcpKey(1, 2)
	res := New(ts).Translate(&k, Options{})
	if got := flow.DPActionsString(res.Actions); got != "1" {
		t.Errorf("actions %s, want the second output only", got)
	}
}

// TestHairpinAcrossRecirculation: an in_port that an action changed
// before a ct() recirculation is what the resumed pipeline sees, as in
// Open vSwitch, so that a packet OVN sends back by the port it came in
// on through a patch port (which zeroes in_port) and conntrack (a
// router's echo reply to a VM on a switch with a load balancer) still
// leaves. An in_port left alone is not frozen: packets from every port
// share one state.
func TestHairpinAcrossRecirculation(t *testing.T) {
	ts := program(t,
		ruleSpec{0, 20, func(m *flow.Match) { m.Set(flow.InPort, 1) }, []flow.Action{
			flow.Load{Dst: flow.Whole(flow.InPort), Value: flow.U128{}},
			flow.CT{Zone: 1, Table: 3},
		}},
		ruleSpec{0, 10, matchAll, []flow.Action{flow.CT{Zone: 1, Table: 3}}},
		ruleSpec{3, 10, matchAll, []flow.Action{flow.Output{Port: 1}}},
	)
	tr := New(ts)
	k := tcpKey(1, 2)
	if got := flow.DPActionsString(tr.Translate(&k, Options{}).Actions); got != "ct(zone=1),recirc(0x1)" {
		t.Fatalf("first pass: %s", got)
	}
	k.Set(flow.RecircID, 1)
	k.Set(flow.CTState, 0x22)
	if got := flow.DPActionsString(tr.Translate(&k, Options{}).Actions); got != "1" {
		t.Errorf("after recirculation: %q, want output to port 1 (in_port was zeroed before ct)", got)
	}
	for _, in := range []uint64{2, 3} {
		k := tcpKey(1, 2)
		k.Set(flow.InPort, in)
		tr.Translate(&k, Options{})
	}
	if n := tr.RecircStates(); n != 2 {
		t.Errorf("%d frozen states, want 2 (one with in_port zeroed, one shared by ports 2 and 3)", n)
	}
}

// TestConcurrentTranslateAndApply translates from several goroutines while
// bundles change the tables (run with -race): every translation sees one
// generation, whose rule it applies.
func TestConcurrentTranslateAndApply(t *testing.T) {
	ts := classifier.NewTables()
	tr := New(ts)
	set := func(port uint32) {
		var b flow.Bundle
		b.Add(flow.Rule{Priority: 1, Actions: []flow.Action{flow.Output{Port: port}, flow.CT{Zone: 1, Table: 2}}})
		if _, err := ts.Apply(b); err != nil {
			t.Error(err)
		}
	}
	set(10)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			k := tcpKey(uint64(g), 80)
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				res := tr.Translate(&k, Options{})
				// Generation g (g >= 1) installed output:10+g-1.
				want := fmt.Sprintf("%d,ct(zone=1),recirc(0x1)", 10+res.Generation-1)
				if got := flow.DPActionsString(res.Actions); got != want {
					errs <- fmt.Errorf("generation %d: %s, want %s", res.Generation, got, want)
					return
				}
			}
		}()
	}
	for i := uint32(11); i < 60; i++ {
		set(i)
	}
	close(done)
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestActionTable(t *testing.T) {
	vlanKey := tcpKey(1, 2)
	vlanKey.Set(flow.VLANTCI, 0x1005)
	ttl1 := tcpKey(1, 2)
	ttl1.Set(flow.NWTTL, 1)
	tests := []struct {
		name string
		k    flow.Key
		acts []flow.Action
		want string
		mask flow.Field // a field the megaflow must match
	}{
		{"push vlan then set vid", tcpKey(1, 2), []flow.Action{flow.PushVLAN{TPID: 0x8100},
			flow.Load{Dst: flow.FieldRange{Field: flow.VLANTCI, Bits: 12}, Value: flow.U128{Lo: 7}}, flow.Output{Port: 2}},
			"push_vlan(tpid=0x8100,tci=0x1000),set(vlan_tci=0x7/0xfff),2", flow.InPort},
		{"pop vlan", vlanKey, []flow.Action{flow.PopVLAN{}, flow.Output{Port: 2}}, "pop_vlan,2", flow.VLANTCI},
		{"pop without vlan", tcpKey(1, 2), []flow.Action{flow.PopVLAN{}, flow.Output{Port: 2}}, "2", flow.VLANTCI},
		{"dec_ttl expired", ttl1, []flow.Action{flow.DecTTL{ToController: true}, flow.Output{Port: 2}}, "userspace(userdata=6465635f74746c)", flow.NWTTL},
		{"controller pause", tcpKey(1, 2), []flow.Action{flow.Controller{UserData: []byte{9}, Pause: true}, flow.Output{Port: 2}}, "userspace(userdata=09,pause(table=0,actions=output:2))", flow.InPort},
		{"exit", tcpKey(1, 2), []flow.Action{flow.Output{Port: 2}, flow.Exit{}, flow.Output{Port: 3}}, "2", flow.InPort},
		{"ct_clear", tcpKey(1, 2), []flow.Action{flow.CTClear{}, flow.Output{Port: 2}}, "ct_clear,2", flow.InPort},
		{"meter", tcpKey(1, 2), []flow.Action{flow.Meter{RateKbps: 100, BurstKbits: 20}, flow.Output{Port: 2}}, "meter(rate=100,burst=20),2", flow.InPort},
		{"group all", tcpKey(1, 2), []flow.Action{flow.Group{ID: 5}}, "2,clone(set(eth_dst=00:00:00:00:00:0c),3)", flow.InPort},
		{"missing group", tcpKey(1, 2), []flow.Action{flow.Group{ID: 6}}, "drop", flow.InPort},
		{"output from register", tcpKey(1, 2), []flow.Action{flow.Load{Dst: flow.Whole(flow.Reg15), Value: flow.U128{Lo: 4}},
			flow.Output{PortField: flow.Whole(flow.Reg15)}}, "4", flow.InPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := program(t, ruleSpec{0, 1, matchAll, tt.acts})
			var b flow.Bundle
			b.AddGroup(flow.GroupDef{ID: 5, Type: flow.GroupAll, Buckets: []flow.Bucket{
				{Actions: []flow.Action{flow.Output{Port: 2}}},
				{Actions: []flow.Action{flow.Load{Dst: flow.Whole(flow.EthDst), Value: flow.U128{Lo: 0x0c}}, flow.Output{Port: 3}}},
			}})
			if _, err := ts.Apply(b); err != nil {
				t.Fatal(err)
			}
			k := tt.k
			res := New(ts).Translate(&k, Options{})
			if got := flow.DPActionsString(res.Actions); got != tt.want {
				t.Errorf("actions %s, want %s", got, tt.want)
			}
			if res.Mask.Get(tt.mask).IsZero() {
				t.Errorf("megaflow does not match %s: %s", tt.mask, res.String())
			}
		})
	}
}

// TestFrozenWordsLayout: the words a recirculation saves are exactly
// metadata and the registers.
func TestFrozenWordsLayout(t *testing.T) {
	if w := flow.Metadata.Info().Word; w != firstPipelineWord {
		t.Errorf("metadata is word %d, frozen state starts at %d", w, firstPipelineWord)
	}
	if w := flow.XReg7.Info().Word; w != firstPipelineWord+pipelineWords-1 {
		t.Errorf("xreg7 is word %d, frozen state ends at %d", w, firstPipelineWord+pipelineWords-1)
	}
}
