package switchd

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/internal/ovsref"
)

// aclFlows are three tables: port 1's packets go through an ACL in table
// 1 (a resubmit), which drops UDP to port 53, resubmits other UDP to
// table 2 and has no rule for TCP; table 2 forwards to port 2.
const aclFlows = `table=0,priority=100,in_port=1 actions=resubmit(,1)
table=0,priority=90,in_port=2 actions=output:1
table=1,priority=200,udp,tp_dst=53 actions=drop
table=1,priority=100,udp actions=resubmit(,2)
table=2,priority=100,dl_dst=02:00:00:00:00:02 actions=output:2
`

// packetCounts reads "table=T, n_packets=P, n_bytes=B, ... priority=N" from
// a dump-flows output (govn's or ovs-ofctl's) by table and priority.
func packetCounts(t *testing.T, dump string) map[[2]int][2]uint64 {
	t.Helper()
	re := regexp.MustCompile(`table=(\d+), n_packets=(\d+), n_bytes=(\d+),.* priority=(\d+)`)
	m := map[[2]int][2]uint64{}
	for _, line := range strings.Split(dump, "\n") {
		sm := re.FindStringSubmatch(line)
		if sm == nil {
			continue
		}
		tbl, _ := strconv.Atoi(sm[1])
		prio, _ := strconv.Atoi(sm[4])
		p, _ := strconv.ParseUint(sm[2], 10, 64)
		b, _ := strconv.ParseUint(sm[3], 10, 64)
		m[[2]int{tbl, prio}] = [2]uint64{p, b}
	}
	return m
}

// TestRuleStatsLikeOVS sends the same packets through aclFlows in govn
// and in the real ovs-vswitchd and compares every rule's n_packets and
// n_bytes, and every table's matched and missed packets.
func TestRuleStatsLikeOVS(t *testing.T) {
	o := ovsref.Start(t)
	r := newRig(t, aclFlows)
	o.SetFlows(t, strings.Split(strings.TrimSpace(aclFlows), "\n"))

	tcp := func(payload int) []byte {
		f := udpFrame(1000, 80, payload)
		f[14+9] = 6 // TCP: table 1 has no rule for it
		return f
	}
	type pkt struct {
		in, out uint32
		frame   []byte
	}
	var pkts []pkt
	for i := range 5 {
		pkts = append(pkts, pkt{1, 2, udpFrame(uint16(1000+i), 80, 10+i)})
	}
	for i := range 3 {
		pkts = append(pkts, pkt{1, 0, udpFrame(uint16(2000+i), 53, 20)})
	}
	for i := range 2 {
		pkts = append(pkts, pkt{1, 0, tcp(30 + i)})
	}
	for i := range 4 {
		pkts = append(pkts, pkt{2, 1, udpFrame(80, 1000, i)})
	}
	var total uint64
	for _, p := range pkts {
		r.send(t, p.in, p.out, p.frame)
		o.Appctl(t, "netdev-dummy/receive", "p"+strconv.Itoa(int(p.in)), hex.EncodeToString(p.frame))
		total += uint64(len(p.frame))
	}

	got := packetCounts(t, r.do(t, "dump-flows"))
	// OVS credits rules from its revalidators: wait until it has all.
	var want map[[2]int][2]uint64
	for deadline := time.Now().Add(20 * time.Second); ; {
		o.Appctl(t, "revalidator/wait")
		want = packetCounts(t, o.Ofctl(t, "dump-flows", "--no-names"))
		var n uint64
		for k, c := range want {
			if k[0] == 0 {
				n += c[1]
			}
		}
		if n == total || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("OVS: %v\ngovn: %v", want, got)
	if len(want) != 5 {
		t.Fatalf("ovs-ofctl dump-flows has %d rules, want 5", len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("table %d priority %d: govn n_packets=%d n_bytes=%d, OVS %d, %d", k[0], k[1], got[k][0], got[k][1], w[0], w[1])
		}
	}

	// ovs-ofctl dump-tables: "table N:" then "active=A, lookup=L, matched=M".
	ovsTables := map[int][2]uint64{}
	re := regexp.MustCompile(`table (\d+):\s+active=\d+, lookup=(\d+), matched=(\d+)`)
	for _, sm := range re.FindAllStringSubmatch(o.Ofctl(t, "dump-tables"), -1) {
		tbl, _ := strconv.Atoi(sm[1])
		l, _ := strconv.ParseUint(sm[2], 10, 64)
		m, _ := strconv.ParseUint(sm[3], 10, 64)
		ovsTables[tbl] = [2]uint64{m, l - m}
	}
	ours := r.do(t, "dump-tables")
	t.Logf("OVS tables: %v\ngovn:\n%s", ovsTables, ours)
	for tbl := range 3 {
		w, ok := ovsTables[tbl]
		if !ok {
			t.Fatalf("ovs-ofctl dump-tables has no table %d", tbl)
		}
		line := "table " + strconv.Itoa(tbl) + ": active="
		i := strings.Index(ours, line)
		if i < 0 {
			t.Errorf("dump-tables has no table %d:\n%s", tbl, ours)
			continue
		}
		rest := ours[i:]
		rest = rest[:strings.IndexByte(rest, '\n')]
		if !strings.Contains(rest, " matched="+strconv.FormatUint(w[0], 10)+" missed="+strconv.FormatUint(w[1], 10)+" ") {
			t.Errorf("govn %q; OVS matched=%d missed=%d", rest, w[0], w[1])
		}
	}
}

// TestFlowChangesCountLikeOVS changes the rules of a switch that
// counted packets, in govn and in ovs-vswitchd alike, and compares the
// counts after: an add-flow over a rule resets its counts (ovs-ofctl sends
// an OpenFlow 1.0 add), replace-flows keeps the counts of the rules it
// leaves in place, changed or not.
func TestFlowChangesCountLikeOVS(t *testing.T) {
	o := ovsref.Start(t)
	replacement := strings.Join([]string{
		"table=0,priority=100,in_port=1 actions=resubmit(,1)", // unchanged
		"table=0,priority=90,in_port=2 actions=drop",          // new actions
		"table=1,priority=100,udp actions=resubmit(,2)",       // unchanged
		"table=1,priority=50,tcp actions=drop",                // new
		// table=1,priority=200 and table=2's rule go
	}, "\n") + "\n"
	for _, tt := range []struct {
		name   string
		govn   func(t *testing.T, r *rig)
		ovs    func(t *testing.T)
		nRules int
	}{
		{"add-flow over a rule",
			func(t *testing.T, r *rig) { r.do(t, "add-flow", "table=0,priority=90,in_port=2 actions=drop") },
			func(t *testing.T) { o.Ofctl(t, "add-flow", "table=0,priority=90,in_port=2 actions=drop") },
			5},
		{"replace-flows",
			func(t *testing.T, r *rig) {
				f := filepath.Join(t.TempDir(), "flows")
				os.WriteFile(f, []byte(replacement), 0o644)
				r.do(t, "replace-flows", f)
			},
			func(t *testing.T) {
				f := filepath.Join(t.TempDir(), "flows")
				os.WriteFile(f, []byte(replacement), 0o644)
				// OVS needs OpenFlow 1.3 to replace flows with tables.
				o.Ofctl(t, "replace-flows", f, "-O", "OpenFlow13")
			},
			4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, aclFlows)
			o.SetFlows(t, strings.Split(strings.TrimSpace(aclFlows), "\n"))
			sent := 0
			for i := range 3 {
				for _, p := range []struct {
					in, out uint32
					frame   []byte
				}{{2, 1, udpFrame(80, 1000, 8+i)}, {1, 2, udpFrame(1000, 80, i)}, {1, 0, udpFrame(1000, 53, i)}} {
					r.send(t, p.in, p.out, p.frame)
					o.Appctl(t, "netdev-dummy/receive", "p"+strconv.Itoa(int(p.in)), hex.EncodeToString(p.frame))
					sent++
				}
			}
			// Change the rules only once OVS counted every packet.
			for deadline := time.Now().Add(20 * time.Second); ; {
				o.Appctl(t, "revalidator/wait")
				n := uint64(0)
				for k, c := range packetCounts(t, o.Ofctl(t, "dump-flows", "--no-names")) {
					if k[0] == 0 {
						n += c[0]
					}
				}
				if n == uint64(sent) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("OVS counted %d packets in table 0, want %d", n, sent)
				}
				time.Sleep(50 * time.Millisecond)
			}
			tt.govn(t, r)
			tt.ovs(t)
			o.Appctl(t, "revalidator/wait")
			want := packetCounts(t, o.Ofctl(t, "dump-flows", "--no-names"))
			got := packetCounts(t, r.do(t, "dump-flows"))
			t.Logf("OVS %v\ngovn %v", want, got)
			if len(want) != tt.nRules || len(got) != tt.nRules {
				t.Fatalf("OVS has %d rules, govn %d, want %d", len(want), len(got), tt.nRules)
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("table %d priority %d: govn n_packets=%d n_bytes=%d, OVS %d, %d", k[0], k[1], got[k][0], got[k][1], w[0], w[1])
				}
			}
		})
	}
}

// ctFlows send port 1's UDP through conntrack: new connections are
// committed, replies and later packets are established; anything else is
// dropped. Each packet runs table 0 before recirculation and table 1
// after, so its counts come from two megaflows.
const ctFlows = `table=0,priority=100,ip actions=ct(table=1,zone=1)
table=0,priority=0 actions=drop
table=1,priority=100,ct_state=+trk+new,ip,in_port=1 actions=ct(commit,zone=1),output:2
table=1,priority=100,ct_state=+trk+est,in_port=1 actions=output:2
table=1,priority=100,ct_state=+trk+est,in_port=2 actions=output:1
table=1,priority=10 actions=drop
`

// reply swaps a frame's MAC and IP addresses and UDP ports.
func reply(f []byte) []byte {
	r := append([]byte(nil), f...)
	copy(r[0:6], f[6:12])
	copy(r[6:12], f[0:6])
	copy(r[26:30], f[30:34])
	copy(r[30:34], f[26:30])
	copy(r[34:36], f[36:38])
	copy(r[36:38], f[34:36])
	return r
}

// TestConntrackRuleStatsLikeOVS compares rule counts across
// recirculation: the packets of two UDP connections, their replies, and
// a reply without a connection (dropped), in govn and in ovs-vswitchd.
func TestConntrackRuleStatsLikeOVS(t *testing.T) {
	o := ovsref.Start(t)
	r := newRig(t, ctFlows)
	o.SetFlows(t, strings.Split(strings.TrimSpace(ctFlows), "\n"))
	type pkt struct {
		in, out uint32
		frame   []byte
	}
	var pkts []pkt
	for c := range 2 {
		f := udpFrame(uint16(3000+c), 80, 4)
		pkts = append(pkts, pkt{1, 2, f}, pkt{2, 1, reply(f)}, pkt{1, 2, f}, pkt{1, 2, f}, pkt{2, 1, reply(f)})
	}
	pkts = append(pkts, pkt{2, 0, reply(udpFrame(4000, 80, 4))})
	for _, p := range pkts {
		r.send(t, p.in, p.out, p.frame)
		o.Appctl(t, "netdev-dummy/receive", "p"+strconv.Itoa(int(p.in)), hex.EncodeToString(p.frame))
	}
	var theirs map[string][2]uint64
	for deadline := time.Now().Add(20 * time.Second); ; {
		o.Appctl(t, "revalidator/wait")
		theirs = ruleLines(o.Ofctl(t, "dump-flows", "--no-names"))
		n := uint64(0)
		for k, c := range theirs {
			if strings.HasPrefix(k, "table=1 ") {
				n += c[0]
			}
		}
		if n == uint64(len(pkts)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	ours := ruleLines(r.do(t, "dump-flows"))
	t.Logf("OVS %v\ngovn %v", theirs, ours)
	if len(theirs) != 6 || len(ours) != 6 {
		t.Fatalf("OVS dumps %d rules, govn %d, want 6", len(theirs), len(ours))
	}
	for m, w := range theirs {
		if g, ok := ours[m]; !ok || g != w {
			t.Errorf("rule %s: govn n_packets, n_bytes %v, OVS %v", m, g, w)
		}
	}
}

// ruleLines reads counts by rule ("table=T priority=P,MATCH") from a
// dump-flows output; matches are compared by their set of terms, as OVS
// and govn order (and abbreviate) them differently.
func ruleLines(dump string) map[string][2]uint64 {
	re := regexp.MustCompile(`table=(\d+), n_packets=(\d+), n_bytes=(\d+),.* priority=(\d+),?(\S*) actions=`)
	m := map[string][2]uint64{}
	for _, line := range strings.Split(dump, "\n") {
		sm := re.FindStringSubmatch(line)
		if sm == nil {
			continue
		}
		terms := strings.Split(sm[5], ",")
		for i, term := range terms {
			if term == "ip" { // OVS's shorthand, govn's field
				terms[i] = "eth_type=0x800"
			}
		}
		slices.Sort(terms)
		p, _ := strconv.ParseUint(sm[2], 10, 64)
		b, _ := strconv.ParseUint(sm[3], 10, 64)
		m["table="+sm[1]+" priority="+sm[4]+" "+strings.Join(terms, ",")] = [2]uint64{p, b}
	}
	return m
}
