package megaflow

import (
	"testing"
	"time"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/xlate"
)

// TestLearnedRuleLifetime: a learn action installs a rule keyed on the
// client's address (affinity, as OVN's commit_lb_aff does); the rule lives
// while the megaflow that learns it is hit, and idles out after.
func TestLearnedRuleLifetime(t *testing.T) {
	var b flow.Bundle
	add := func(table uint8, prio uint16, match, actions string) {
		r, err := flow.ParseRule(match + " actions=" + actions)
		if err != nil {
			t.Fatal(err)
		}
		r.Table, r.Priority = table, prio
		b.Add(r)
	}
	// New connections to port 8080 learn the client; port 9090 checks it.
	add(0, 20, "tcp,tp_dst=8080", "learn(table=5,priority=10,idle_timeout=10,match:0x800->eth_type,match:nw_src->nw_src,load:0x7->reg1),output:3")
	add(0, 10, "tcp,tp_dst=9090", "resubmit(,5),output:reg1")
	add(5, 0, "", "load:0x4->reg1")
	ts := classifier.NewTables()
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	d := &datapath{cache: New(true), tables: ts}
	epoch := time.Unix(0, 0)
	d.tr = xlate.New(ts, xlate.WithClock(func() time.Time { return epoch.Add(d.now) }))
	send := func(src uint64, dport uint64) string {
		k := tcpKey(true, 1000, packet.TCPSyn)
		k.Set(flow.NWSrc, src)
		k.Set(flow.TPDst, dport)
		return flow.DPActionsString(d.process(t, &k))
	}
	other := clientIP + 1
	if got := send(other, 9090); got != "4" {
		t.Fatalf("unknown client: %s", got)
	}
	if got := send(clientIP, 8080); got != "3" {
		t.Fatalf("learning packet: %s", got)
	}
	if n := d.tr.LearnedRules(); n != 1 {
		t.Fatalf("%d learned rules", n)
	}
	if got := send(clientIP, 9090); got != "7" {
		t.Errorf("learned client: %s", got)
	}
	if got := send(other, 9090); got != "4" {
		t.Errorf("other client after learning: %s (the learned rule must match nw_src)", got)
	}
	// The learning megaflow keeps being hit for 30 s: the rule stays.
	gen := ts.Generation()
	for i := 0; i < 30; i++ {
		d.now += time.Second
		send(clientIP, 8080)
		d.cache.Expire(d.now, time.Minute)
	}
	if got := send(clientIP, 9090); got != "7" || ts.Generation() != gen {
		t.Errorf("after 30 s of use: %s, generation %d→%d", got, gen, ts.Generation())
	}
	if s := d.cache.Stats(); s.Misses > 4 {
		t.Errorf("%d misses: re-learning an unchanged rule must not invalidate megaflows", s.Misses)
	}
	// Unused for longer than the idle timeout: gone.
	for i := 0; i < 12; i++ {
		d.now += time.Second
		send(clientIP, 9090)
		d.cache.Expire(d.now, time.Minute)
	}
	if n := d.tr.LearnedRules(); n != 0 {
		t.Errorf("%d learned rules after the idle timeout", n)
	}
	if got := send(clientIP, 9090); got != "4" {
		t.Errorf("after the idle timeout: %s", got)
	}
	// The learning megaflow is hit again: the next expiry run puts the
	// rule back, as OVS's revalidator re-runs learn for a used megaflow.
	d.now += time.Second
	send(clientIP, 8080)
	d.cache.Expire(d.now, time.Minute)
	if got := send(clientIP, 9090); got != "7" {
		t.Errorf("after the learning megaflow was used again: %s", got)
	}
}
