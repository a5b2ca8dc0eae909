package lflow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// TestIntoDatapath compiles a small logical switch into the datapath's
// flow tables and sends packets through the datapath's translator: the
// compiled rules install, and behave, as the logical flows say.
//
// Ports: p1 is datapath port 1, p2 port 2. The physical stages, which the
// controller owns, are stubbed: table 0 classifies, 37 runs the egress
// pipeline, 64 outputs by reg15.
func TestIntoDatapath(t *testing.T) {
	st, c := testCompiler(t)
	env := &mapEnv{
		keys: map[string]uint32{"p1": 1, "p2": 2},
		sets: map[string][]Const{},
	}
	var err error
	if env.sets["web_clients"], err = st.ParseAddresses([]string{"10.0.0.1", "10.0.0.2", "10.0.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	const mac1, mac2 = "00:00:00:00:00:01", "00:00:00:00:00:02"
	lflows := []Lflow{
		{"ingress", 0, 100, `inport == {"p1", "p2"}`, "next;"},
		// ARP responder for 10.0.0.254: swaps addresses and sends back.
		{"ingress", 1, 100, "arp.op == 1 && arp.tpa == 10.0.0.254",
			"eth.dst <-> eth.src; eth.src = 00:00:00:00:00:fe; arp.op = 2; arp.tha = arp.sha; arp.sha = 00:00:00:00:00:fe; arp.tpa <-> arp.spa; outport = inport; flags.loopback = 1; output;"},
		{"ingress", 1, 0, "1", "next;"},
		{"ingress", 2, 50, "eth.dst == " + mac1, `outport = "p1"; output;`},
		{"ingress", 2, 50, "eth.dst == " + mac2, `outport = "p2"; output;`},
		// Egress ACL on p2: web traffic only from the clients (a
		// conjunctive match), nothing else over TCP, ttl decremented.
		{"egress", 0, 200, `outport == "p2" && ip4.src == $web_clients && tcp.dst == {80, 443}`, "ip.ttl--; next;"},
		{"egress", 0, 100, `outport == "p2" && tcp`, "drop;"},
		// QoS: UDP to p2 is rate-limited.
		{"egress", 0, 100, `outport == "p2" && udp`, "set_meter(1000, 100); next;"},
		{"egress", 0, 0, "1", "next;"},
		{"egress", 1, 0, "1", "output;"},
	}
	var b flow.Bundle
	ctx := &Context{Env: env, Datapath: 7, NextConjID: 1, NextGroupID: 1}
	for i := range lflows {
		var res Result
		if err := c.Compile(&lflows[i], ctx, &res); err != nil {
			t.Fatalf("%+v: %v", lflows[i], err)
		}
		for _, r := range res.Rules {
			b.Add(r)
		}
	}
	f := func(name string) flow.Field {
		fl, ok := flow.FieldByName(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		return fl
	}
	// Physical stubs.
	for port := uint32(1); port <= 2; port++ {
		var m flow.Match
		m.Set(flow.InPort, uint64(port))
		b.Add(flow.Rule{Table: 0, Priority: 100, Match: m, Actions: []flow.Action{
			flow.Load{Dst: flow.Whole(f("metadata")), Value: flow.U128{Lo: 7}},
			flow.Load{Dst: flow.Whole(f("reg14")), Value: flow.U128{Lo: uint64(port)}},
			flow.Resubmit{Table: 8}}})
		var out flow.Match
		out.Set(f("reg15"), uint64(port))
		b.Add(flow.Rule{Table: 64, Priority: 100, Match: out, Actions: []flow.Action{flow.Output{Port: port}}})
	}
	b.Add(flow.Rule{Table: 37, Priority: 0, Actions: []flow.Action{flow.Resubmit{Table: 42}}})
	tables := classifier.NewTables()
	if _, err := tables.Apply(b); err != nil {
		t.Fatal(err)
	}
	tr := xlate.New(tables)

	mac := func(s string) uint64 {
		v, ok := parseMAC(s)
		if !ok {
			t.Fatalf("bad mac %s", s)
		}
		return v.Lo
	}
	ip := func(s string) uint64 {
		v, ok := parseIPv4(s)
		if !ok {
			t.Fatalf("bad ip %s", s)
		}
		return v.Lo
	}
	tcpTo := func(src string, dport uint64) flow.Key {
		var k flow.Key
		k.Set(flow.InPort, 1)
		k.Set(f("eth_src"), mac(mac1))
		k.Set(f("eth_dst"), mac(mac2))
		k.Set(f("eth_type"), 0x800)
		k.Set(f("nw_proto"), 6)
		k.Set(f("nw_src"), ip(src))
		k.Set(f("nw_dst"), ip("10.0.0.2"))
		k.Set(f("nw_ttl"), 64)
		k.Set(f("tp_dst"), dport)
		return k
	}
	udp := tcpTo("10.0.9.9", 53)
	udp.Set(f("nw_proto"), 17)
	var arp flow.Key
	arp.Set(flow.InPort, 1)
	arp.Set(f("eth_src"), mac(mac1))
	arp.Set(f("eth_dst"), 0xffffffffffff)
	arp.Set(f("eth_type"), 0x806)
	arp.Set(f("arp_op"), 1)
	arp.Set(f("arp_spa"), ip("10.0.0.1"))
	arp.Set(f("arp_tpa"), ip("10.0.0.254"))
	arp.Set(f("arp_sha"), mac(mac1))

	tests := []struct {
		name string
		key  flow.Key
		want []string // substrings of the datapath actions, in order
		not  string   // a substring that must not appear
	}{
		{"web from a client", tcpTo("10.0.0.1", 80), []string{"2"}, ""},
		{"web from the client subnet", tcpTo("10.0.1.77", 443), []string{"2"}, ""},
		{"web from elsewhere", tcpTo("10.0.9.9", 80), nil, "2"},
		{"ssh from a client", tcpTo("10.0.0.1", 22), nil, "2"},
		{"arp reply", arp, []string{"eth_dst", "1"}, "2"},
		{"metered udp", udp, []string{"meter(rate=1000,burst=100)", "2"}, ""},
	}
	for _, tt := range tests {
		res := tr.Translate(&tt.key, xlate.Options{Trace: true})
		if res.Err != nil {
			t.Errorf("%s: %v", tt.name, res.Err)
			continue
		}
		got := flow.DPActionsString(res.Actions)
		rest := got
		for _, w := range tt.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: actions %q lack %q\n%s", tt.name, got, w, res.FormatTrace())
				break
			}
			rest = rest[i+len(w):]
		}
		if tt.want == nil && got != "" && got != "drop" {
			t.Errorf("%s: want a drop, got %q\n%s", tt.name, got, res.FormatTrace())
		}
		if tt.not != "" && containsOutput(res.Actions, tt.not) {
			t.Errorf("%s: actions %q output to %s", tt.name, got, tt.not)
		}
		if tt.name == "arp reply" {
			checkARPReply(t, res.Actions, mac(mac1), ip("10.0.0.1"), ip("10.0.0.254"))
		}
	}
}

func containsOutput(as []flow.DPAction, port string) bool {
	for _, a := range as {
		if o, ok := a.(flow.DPOutput); ok && fmt.Sprint(o.Port) == port {
			return true
		}
	}
	return false
}

// checkARPReply checks the rewrites of the ARP responder: the reply goes
// to the asker's MAC and IP, from 10.0.0.254 — which needs the exchanges
// (<->) to have worked.
func checkARPReply(t *testing.T, as []flow.DPAction, askerMAC, askerIP, targetIP uint64) {
	t.Helper()
	set := map[string]uint64{}
	for _, a := range as {
		if s, ok := a.(flow.DPSetField); ok {
			set[s.Field.String()] = s.Value.Lo
		}
	}
	for field, want := range map[string]uint64{
		"eth_dst": askerMAC, "eth_src": 0xfe, "arp_op": 2, "arp_tha": askerMAC,
		"arp_tpa": askerIP, "arp_spa": targetIP,
	} {
		// Aliases (arp_tpa is nw_dst's slot) may print under either name.
		got, ok := set[field]
		if !ok {
			for name, v := range set {
				if f1, _ := flow.FieldByName(name); f1.Info().Word == mustField(t, field).Info().Word && f1.Info().Shift == mustField(t, field).Info().Shift {
					got, ok = v, true
				}
			}
		}
		if !ok || got != want {
			t.Errorf("arp reply: %s = %#x (set: %v), want %#x", field, got, ok, want)
		}
	}
}

func mustField(t *testing.T, name string) flow.Field {
	f, ok := flow.FieldByName(name)
	if !ok {
		t.Fatalf("no field %s", name)
	}
	return f
}
