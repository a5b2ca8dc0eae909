package dp

import (
	"testing"
	"time"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/port"
)

// aclPipeline is three tables: table 0 admits port 1 into the ACL (a
// resubmit) and sends port 2's packets back to port 1; table 1 drops UDP
// to port 53 and resubmits other UDP to table 2 (TCP misses); table 2
// forwards to mac2 on port 2.
func aclPipeline() map[string]flow.Rule {
	rule := func(table uint8, prio uint16, set func(m *flow.Match), acts ...flow.Action) flow.Rule {
		var m flow.Match
		if set != nil {
			set(&m)
		}
		return flow.Rule{Table: table, Priority: prio, Match: m, Actions: acts}
	}
	udp := func(m *flow.Match) { m.Set(flow.EthType, 0x0800); m.Set(flow.NWProto, 17) }
	return map[string]flow.Rule{
		"admit":   rule(0, 100, func(m *flow.Match) { m.Set(flow.InPort, 1) }, flow.Resubmit{Table: 1}),
		"return":  rule(0, 100, func(m *flow.Match) { m.Set(flow.InPort, 2) }, flow.Output{Port: 1}),
		"dropDNS": rule(1, 200, func(m *flow.Match) { udp(m); m.Set(flow.TPDst, 53) }, flow.Drop{}),
		"allow":   rule(1, 100, udp, flow.Resubmit{Table: 2}),
		"forward": rule(2, 100, func(m *flow.Match) { m.Set(flow.EthDst, mac2) }, flow.Output{Port: 2}),
	}
}

// tcpFrameFrom is udpFrame relabelled as TCP: table 1 has no rule for it.
// The datapath does not check the L4 header it parses.
func tcpFrameFrom(payload int) []byte {
	f := udpFrame(mac2, mac1, 1000, 80, payload)
	f[14+9] = 6
	return f
}

// ruleCounts are packets and bytes by rule name.
type ruleCounts map[string][2]uint64

// counts pushes the datapath's megaflow counts and reads every rule's.
func (r *rig) counts(t *testing.T, ts *classifier.Tables, rules map[string]flow.Rule) ruleCounts {
	t.Helper()
	r.d.PushStats()
	got := ruleCounts{}
	for _, in := range ts.Dump(flow.NumTables) {
		for name, rr := range rules {
			if rr.Table == in.Table && rr.Priority == in.Priority && rr.Match.String() == in.Match.String() {
				got[name] = [2]uint64{in.Stats.Packets(), in.Stats.Bytes()}
			}
		}
	}
	return got
}

// waitPackets waits until the datapath has received n packets in all.
func (r *rig) waitPackets(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.d.Stats().Packets < n {
		if time.Now().After(deadline) {
			t.Fatalf("received %d packets, want %d", r.d.Stats().Packets, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRuleStats sends known packets through aclPipeline and checks every
// rule's and table's packet and byte counts, exactly, after a push.
func TestRuleStats(t *testing.T) {
	p := NewPipeline()
	rules := aclPipeline()
	var b flow.Bundle
	for _, rr := range rules {
		b.Add(rr)
	}
	if _, err := p.Apply(b); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Config{Flows: p}, 3)

	want := ruleCounts{}
	credit := func(frame []byte, names ...string) {
		for _, n := range names {
			c := want[n]
			want[n] = [2]uint64{c[0] + 1, c[1] + uint64(len(frame))}
		}
	}
	sent := uint64(0)
	// Each packet waits for the one before, so the first of a kind is an
	// upcall and the rest hit its megaflow.
	send := func(in uint32, frame []byte, out uint32, names ...string) {
		t.Helper()
		r.inject(t, in, frame, port.Offload{})
		sent++
		if out != 0 {
			r.expect(t, out)
		} else {
			r.waitPackets(t, sent)
		}
		credit(frame, names...)
	}
	for i := range 5 {
		send(1, udpFrame(mac2, mac1, uint16(1000+i), 80, 10+i), 2, "admit", "allow", "forward")
	}
	for i := range 3 {
		send(1, udpFrame(mac2, mac1, uint16(2000+i), 53, 20), 0, "admit", "dropDNS")
	}
	for i := range 2 {
		send(1, tcpFrameFrom(30+i), 0, "admit")
	}
	for i := range 4 {
		send(2, udpFrame(mac1, mac2, 80, 1000, i), 1, "return")
	}
	if s := r.d.Stats(); s.Upcalls >= sent {
		t.Fatalf("%d upcalls for %d packets: no megaflow was hit", s.Upcalls, sent)
	}
	got := r.counts(t, p.Tables(), rules)
	for name := range rules {
		if got[name] != want[name] {
			t.Errorf("rule %s: %d packets %d bytes, want %d, %d", name, got[name][0], got[name][1], want[name][0], want[name][1])
		}
	}
	for _, tt := range []struct {
		table           uint8
		matched, missed uint64
	}{{0, 14, 0}, {1, 8, 2}, {2, 5, 0}, {3, 0, 0}} {
		st := p.Tables().TableStats(tt.table)
		if st.MatchedPackets != tt.matched || st.MissedPackets != tt.missed {
			t.Errorf("table %d: matched %d missed %d packets, want %d, %d", tt.table, st.MatchedPackets, st.MissedPackets, tt.matched, tt.missed)
		}
	}
	// A second push has nothing new to credit.
	if again := r.counts(t, p.Tables(), rules); again["admit"] != got["admit"] {
		t.Errorf("a second push changed admit from %v to %v", got["admit"], again["admit"])
	}

	// A modified rule keeps its counts, and its megaflows (revalidated to
	// the new actions) go on crediting it.
	var mod flow.Bundle
	fwd := rules["forward"]
	fwd.Actions = []flow.Action{flow.Output{Port: 2}, flow.Output{Port: 3}}
	mod.Modify(fwd)
	if _, err := p.Apply(mod); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(mac2, mac1, 1000, 80, 10)
	send(1, f, 2, "admit", "allow", "forward")
	r.expect(t, 3)
	got = r.counts(t, p.Tables(), rules)
	if got["forward"] != want["forward"] {
		t.Errorf("modified rule: %v, want %v", got["forward"], want["forward"])
	}

	// A deleted rule's megaflow credits the deleted rule with the packets
	// it counted before the change, never the rule added in its place.
	old := p.Tables().Dump(1)
	var oldAllow *flow.PacketCounter
	for _, in := range old {
		if in.Priority == 100 {
			oldAllow = in.Stats
		}
	}
	before := oldAllow.Packets()
	for range 3 { // hits, not pushed yet
		send(1, f, 2, "admit", "allow", "forward")
		r.expect(t, 3)
	}
	var repl flow.Bundle
	repl.Delete(rules["allow"])
	repl.Add(rules["allow"])
	if _, err := p.Apply(repl); err != nil {
		t.Fatal(err)
	}
	send(1, f, 2, "admit", "forward")
	r.expect(t, 3)
	got = r.counts(t, p.Tables(), rules)
	if got["allow"] != [2]uint64{1, uint64(len(f))} {
		t.Errorf("re-added rule: %v, want the one packet sent after it was added", got["allow"])
	}
	if n := oldAllow.Packets(); n != before+3 {
		t.Errorf("deleted rule: %d packets, want %d", n, before+3)
	}
	for _, name := range []string{"admit", "forward"} {
		if got[name] != want[name] {
			t.Errorf("rule %s: %v, want %v", name, got[name], want[name])
		}
	}
}

// TestRuleStatsOnRemovePort checks that a removed port's megaflows credit
// their rules with the packets no sweep pushed yet.
func TestRuleStatsOnRemovePort(t *testing.T) {
	p := NewPipeline()
	rules := aclPipeline()
	var b flow.Bundle
	for _, rr := range rules {
		b.Add(rr)
	}
	if _, err := p.Apply(b); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Config{Flows: p}, 2)
	f := udpFrame(mac1, mac2, 80, 1000, 0)
	for range 4 {
		r.inject(t, 2, f, port.Offload{})
		r.expect(t, 1)
	}
	if err := r.d.RemovePort(2); err != nil {
		t.Fatal(err)
	}
	// No PushStats: the removal pushed.
	for _, in := range p.Tables().Dump(0) {
		if in.Match.Key.Get(flow.InPort) == 2 && (in.Stats.Packets() != 4 || in.Stats.Bytes() != 4*uint64(len(f))) {
			t.Errorf("rule %s: %d packets %d bytes, want 4, %d", in.String(), in.Stats.Packets(), in.Stats.Bytes(), 4*len(f))
		}
	}
}
