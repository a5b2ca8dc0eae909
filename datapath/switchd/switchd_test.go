package switchd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/unixctl"
)

// testFlows forwards port 1 → 2 through table 1 (which drops UDP to port
// 53 at a higher priority, so megaflows of other UDP ports match tp_dst
// because of it) and port 2 → 1 directly.
const testFlows = `# two-port switch
table=0,priority=100,in_port=1 actions=goto_table:1
table=0,priority=100,in_port=2 actions=output:1

table=1,priority=200,udp,tp_dst=53 actions=drop
table=1,priority=100,ip actions=output:2
`

// rig is a switch over two channel ports, running until the test ends.
type rig struct {
	sw    *Switch
	ports map[uint32]*port.Channel
	cmds  map[string]unixctl.Command
	stop  chan struct{} // closed by the exit command
}

func newRig(t *testing.T, flows string) *rig {
	t.Helper()
	rules, err := ParseFlows(strings.NewReader(flows))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{ports: map[uint32]*port.Channel{}, stop: make(chan struct{})}
	var ps []Port
	for _, no := range []uint32{2, 1} { // out of order: dumps sort them
		ch := port.NewChannel("p"+strconv.Itoa(int(no)), 64, false)
		r.ports[no] = ch
		ps = append(ps, Port{No: no, Kind: "channel", Port: ch})
	}
	r.sw, err = New(Config{Ports: ps, Rules: rules, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.sw.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	r.cmds = r.sw.Commands(func() { close(r.stop) })
	return r
}

// do runs a control command and fails the test if it fails.
func (r *rig) do(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	out, err := r.cmds[cmd](args)
	if err != nil {
		t.Fatalf("%s %q: %v", cmd, args, err)
	}
	return out
}

// send injects frame on port in and waits for it on port out (0: expect
// it nowhere).
func (r *rig) send(t *testing.T, in, out uint32, frame []byte) {
	t.Helper()
	if err := r.ports[in].Inject(frame, port.Offload{}); err != nil {
		t.Fatal(err)
	}
	if out == 0 {
		for no, ch := range r.ports {
			select {
			case p := <-ch.Out():
				t.Fatalf("frame came out of port %d: % x", no, p.Data)
			case <-time.After(30 * time.Millisecond):
			}
		}
		return
	}
	select {
	case <-r.ports[out].Out():
	case <-time.After(5 * time.Second):
		t.Fatalf("no frame on port %d", out)
	}
}

// settle waits until the ports have counted the frames they sent: a
// channel port counts a frame just after handing it over, so a frame
// seen by send may not be counted yet.
func (r *rig) settle(t *testing.T, wantTx map[uint32]uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		st := r.sw.Datapath().PortStats()
		ok := true
		for no, n := range wantTx {
			ok = ok && st[no].TxPackets == n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port counters %+v, want TX packets %v", st, wantTx)
		}
		time.Sleep(time.Millisecond)
	}
}

// udpFrame builds an Ethernet/IPv4/UDP frame from 10.0.0.1 to 10.0.0.2.
func udpFrame(sport, dport uint16, payload int) []byte {
	f := make([]byte, 14+20+8+payload)
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+payload))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 0, 0, 1})
	copy(ip[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^onesSum(ip[:20]))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+payload))
	return f
}

func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestDumpMegaflows(t *testing.T) {
	r := newRig(t, testFlows)
	frames := [][]byte{udpFrame(1000, 80, 10), udpFrame(1001, 80, 20), udpFrame(1002, 80, 30)}
	for _, f := range frames {
		r.send(t, 1, 2, f)
	}
	r.send(t, 1, 0, udpFrame(1000, 53, 10))
	// The first frame was an upcall; the other two hit its megaflow.
	wantBytes := len(frames[1]) + len(frames[2])

	out := r.do(t, "dpctl/dump-flows")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("dpctl/dump-flows: %d lines, want 2 megaflows:\n%s", len(lines), out)
	}
	// Busiest first.
	// Prefix tracking leaves tp_dst's low bits wildcarded (80 and 53
	// differ in the high ones), so the value is not 80 itself.
	fwd := regexp.MustCompile(`^in_port=1,.*nw_proto=17,tp_dst=\S+, packets:2, bytes:` + strconv.Itoa(wantBytes) + `, used:\d+\.\d{3}s, actions:2$`)
	if !fwd.MatchString(lines[0]) {
		t.Errorf("forwarding megaflow %q, want to match %s", lines[0], fwd)
	}
	drop := regexp.MustCompile(`^in_port=1,.*tp_dst=53.*, packets:0, bytes:0, .*actions:drop$`)
	if !drop.MatchString(lines[1]) {
		t.Errorf("drop megaflow %q, want to match %s", lines[1], drop)
	}

	out = r.do(t, "dpctl/dump-flows", "reasons")
	if !strings.HasPrefix(out, "# every megaflow matches in_port and recirc_id exactly") {
		t.Errorf("dump-flows reasons do not explain in_port and recirc_id:\n%s", out)
	}
	// The forwarding megaflow matches tp_dst because table 1 had to rule
	// out the port-53 rule.
	if !regexp.MustCompile(`(?m)^    tp_dst/\S+: table 1 ruled out .*priority=200,.*tp_dst=53`).MatchString(out) {
		t.Errorf("dump-flows reasons: no reason naming the port-53 rule for tp_dst:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^    tp_dst/65535: table 1 matched .*priority=200,.*tp_dst=53`).MatchString(out) {
		t.Errorf("dump-flows reasons: no reason naming the matched port-53 rule:\n%s", out)
	}
	if _, err := r.cmds["dpctl/dump-flows"]([]string{"bogus"}); err == nil {
		t.Error("dpctl/dump-flows bogus: no error")
	}
}

func TestShow(t *testing.T) {
	r := newRig(t, testFlows)
	for i := range 3 {
		r.send(t, 1, 2, udpFrame(1000, 80, i))
	}
	f := udpFrame(80, 1000, 5)
	r.send(t, 2, 1, f)
	r.settle(t, map[uint32]uint64{1: 1, 2: 3})
	for _, cmd := range []string{"dpctl/show", "dpif/show"} {
		out := r.do(t, cmd)
		for _, want := range []string{
			"govn@switch:\n",
			"  lookups: hit:2 missed:2 lost:0\n",
			"  flows: 2\n",
			"  port 1: p1 (channel)\n    RX packets:3 ",
			"    TX packets:1 bytes:" + strconv.Itoa(len(f)) + " ",
			"  port 2: p2 (channel)\n    RX packets:1 bytes:" + strconv.Itoa(len(f)) + " ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s", cmd, want, out)
			}
		}
		if strings.Index(out, "port 1:") > strings.Index(out, "port 2:") {
			t.Errorf("%s: ports out of order:\n%s", cmd, out)
		}
	}
	if out := r.do(t, "dpctl/show", "system@ovs-system", "-s"); !strings.Contains(out, "port 1:") {
		t.Errorf("dpctl/show with a datapath name: %q", out)
	}
	tables := r.do(t, "dump-tables")
	// 4 packets matched in table 0 and 3 of them in table 1; the slow path
	// looked up only the 2 upcalls' (hits never reach the tables), one of
	// which went on to table 1.
	for _, want := range []string{
		"table 0: active=2 matched=4 missed=0 slow_path_lookups=2 slow_path_matched=2\n",
		"table 1: active=2 matched=3 missed=0 slow_path_lookups=1 slow_path_matched=1\n",
	} {
		if !strings.Contains(tables, want) {
			t.Errorf("dump-tables: no %q in\n%s", want, tables)
		}
	}
}

func TestTrace(t *testing.T) {
	r := newRig(t, testFlows)
	tests := []struct {
		args []string
		want []string // regexps, in order
	}{
		{[]string{"in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_dst=80"}, []string{
			`(?m)^Flow: in_port=1,.*nw_dst=10\.0\.0\.2.*tp_dst=80`,
			`(?m)^0\. cookie=0x0, table=0, priority=100,in_port=1, actions=goto_table:1$`,
			`(?m)^ *1\. cookie=0x0, table=1, priority=100,eth_type=0x800, actions=output:2$`,
			`(?m)^Megaflow: in_port=1,recirc_id=0,eth_type=0x800,nw_proto=17,tp_dst=\S+ actions:2$`,
			`(?m)^  tp_dst/\S+: table 1 ruled out`,
			`(?m)^Datapath actions: 2$`,
		}},
		// A bridge name first, the flow in two words as a shell splits it.
		{[]string{"govn", "in_port=1,udp,tp_dst=53", "nw_dst=10.0.0.2"}, []string{
			`(?m)^ *1\. cookie=0x0, table=1, priority=200,.*tp_dst=53, actions=drop$`,
			`(?m)^Megaflow: in_port=1,recirc_id=0,eth_type=0x800,nw_proto=17,tp_dst=53 actions:drop$`,
			`(?m)^Datapath actions: drop$`,
		}},
		// OVS's bridge name, and a shorthand as a word of its own.
		{[]string{"br0", "udp", "in_port=1,tp_dst=53"}, []string{
			`(?m)^Flow: in_port=1,eth_type=0x800,nw_proto=17,tp_dst=53$`,
			`(?m)^Datapath actions: drop$`,
		}},
		{[]string{"in_port=7"}, []string{`(?m)^0\. no match$`, `(?m)^Datapath actions: drop$`}},
	}
	for _, tt := range tests {
		out := r.do(t, "ofproto/trace", tt.args...)
		pos := 0
		for _, re := range tt.want {
			loc := regexp.MustCompile(re).FindStringIndex(out[pos:])
			if loc == nil {
				t.Errorf("ofproto/trace %q: no %s after offset %d in\n%s", tt.args, re, pos, out)
				break
			}
			pos += loc[1]
		}
	}
	for _, bad := range [][]string{nil, {"in_port=1 actions=drop"}, {"nw_src=10.0.0.0/8"}, {"nosuchfield=1"}, {"table=3"}} {
		if _, err := r.cmds["ofproto/trace"](bad); err == nil {
			t.Errorf("ofproto/trace %q: no error", bad)
		}
	}
}

func TestFlowCommands(t *testing.T) {
	r := newRig(t, testFlows)
	// dump-flows prints rules that the flow file parser reads back.
	out := r.do(t, "dump-flows")
	rules, err := ParseFlows(strings.NewReader(out))
	if err != nil {
		t.Fatalf("dump-flows output does not parse: %v\n%s", err, out)
	}
	want, _ := ParseFlows(strings.NewReader(testFlows))
	if len(rules) != len(want) {
		t.Fatalf("dump-flows: %d rules, want %d:\n%s", len(rules), len(want), out)
	}
	for i := range rules {
		if rules[i].String() != want[i].String() {
			t.Errorf("dump-flows rule %d: %s, want %s", i, rules[i].String(), want[i].String())
		}
	}
	if strings.Count(out, " n_packets=0, n_bytes=0, ") != len(want) {
		t.Errorf("dump-flows before any packet: want every rule at n_packets=0, n_bytes=0:\n%s", out)
	}
	if t1 := r.do(t, "dump-flows", "1"); strings.Count(t1, "table=1,") != 2 || strings.Contains(t1, "table=0,") {
		t.Errorf("dump-flows 1:\n%s", t1)
	}

	// A megaflow, then a rule that changes its translation: the megaflow
	// goes at once and the next packet is dropped.
	r.send(t, 1, 2, udpFrame(1000, 80, 0))
	res := r.do(t, "add-flow", "table=1,priority=300,udp,tp_dst=80", "actions=drop")
	if !strings.Contains(res, "megaflows revalidated: 1, removed: 1") {
		t.Errorf("add-flow: %q, want one megaflow revalidated and removed", res)
	}
	if mf := r.do(t, "dpctl/dump-flows"); mf != "" {
		t.Errorf("megaflows after add-flow:\n%s", mf)
	}
	r.send(t, 1, 0, udpFrame(1000, 80, 0))

	// replace-flows is atomic: a file with a bad line changes nothing.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.flows")
	os.WriteFile(bad, []byte("in_port=1 actions=output:2\nin_port=2 actions=bogus\n"), 0o644)
	before := r.do(t, "dump-flows")
	if _, err := r.cmds["replace-flows"]([]string{bad}); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("replace-flows with a bad line 2: %v", err)
	}
	if after := r.do(t, "dump-flows"); after != before {
		t.Errorf("a failed replace-flows changed the tables:\n%s", after)
	}
	good := filepath.Join(dir, "good.flows")
	os.WriteFile(good, []byte("priority=10,in_port=1 actions=output:2\npriority=10,in_port=2 actions=output:1\n"), 0o644)
	if res := r.do(t, "replace-flows", good); !strings.Contains(res, "replaced by 2 rules") {
		t.Errorf("replace-flows: %q", res)
	}
	f := udpFrame(1000, 80, 0)
	r.send(t, 1, 2, f)
	if got := r.do(t, "dump-flows"); strings.Count(got, "\n") != 2 ||
		!strings.Contains(got, "table=0, n_packets=0, n_bytes=0, priority=10,in_port=2 actions=output:1\n") ||
		!strings.Contains(got, fmt.Sprintf("table=0, n_packets=1, n_bytes=%d, priority=10,in_port=1 actions=output:2\n", len(f))) {
		t.Errorf("dump-flows after replace-flows and one packet from port 1:\n%s", got)
	}
	// Replacing again changes only what differs, as ovs-ofctl does: the
	// unchanged rule and the one whose actions changed keep their counts.
	os.WriteFile(good, []byte("priority=10,in_port=1 actions=output:2\npriority=10,in_port=2 actions=drop\npriority=5 actions=drop\n"), 0o644)
	if res := r.do(t, "replace-flows", good); !strings.Contains(res, "replaced by 3 rules (2 added or changed, 0 deleted)") {
		t.Errorf("replace-flows: %q", res)
	}
	if got := r.do(t, "dump-flows"); strings.Count(got, "\n") != 3 ||
		!strings.Contains(got, fmt.Sprintf("table=0, n_packets=1, n_bytes=%d, priority=10,in_port=1 actions=output:2\n", len(f))) ||
		!strings.Contains(got, "table=0, n_packets=0, n_bytes=0, priority=5 actions=drop\n") {
		t.Errorf("dump-flows after a second replace-flows:\n%s", got)
	}

	if res := r.do(t, "del-flows"); !strings.Contains(res, "3 rules deleted") || !strings.Contains(res, "removed: 1") {
		t.Errorf("del-flows: %q", res)
	}
	if got := r.do(t, "dump-flows"); got != "" {
		t.Errorf("dump-flows after del-flows:\n%s", got)
	}
	r.send(t, 1, 0, udpFrame(1000, 80, 0))

	for _, c := range []struct {
		cmd  string
		args []string
	}{
		{"add-flow", nil}, {"add-flow", []string{"in_port=1"}}, {"add-flow", []string{"table=300 actions=drop"}},
		{"del-flows", []string{"in_port=1"}}, {"replace-flows", nil}, {"replace-flows", []string{filepath.Join(dir, "none")}},
		{"dump-flows", []string{"x"}}, {"dump-flows", []string{"255"}}, {"dump-flows", []string{"1", "2"}},
	} {
		if _, err := r.cmds[c.cmd](c.args); err == nil {
			t.Errorf("%s %q: no error", c.cmd, c.args)
		}
	}
}

func TestConntrackCommands(t *testing.T) {
	r := newRig(t, `
in_port=1,udp actions=ct(commit,zone=5),output:2
in_port=2,udp actions=ct(commit,zone=6),output:1
`)
	r.send(t, 1, 2, udpFrame(1000, 80, 0))
	r.send(t, 2, 1, udpFrame(2000, 90, 0))
	all := r.do(t, "conntrack/dump")
	if strings.Count(all, "\n") != 2 || !strings.Contains(all, "zone=5") || !strings.Contains(all, "zone=6") {
		t.Errorf("conntrack/dump:\n%s", all)
	}
	z5 := r.do(t, "dpctl/dump-conntrack", "zone=5")
	want := regexp.MustCompile(`^udp,orig=\(src=10\.0\.0\.1,dst=10\.0\.0\.2,sport=1000,dport=80\),reply=\(.*\),zone=5,`)
	if strings.Count(z5, "\n") != 1 || !want.MatchString(z5) {
		t.Errorf("conntrack/dump zone=5: %q", z5)
	}
	r.do(t, "conntrack/flush", "zone=5")
	if got := r.do(t, "conntrack/dump", "zone=5"); got != "" {
		t.Errorf("zone 5 after its flush: %q", got)
	}
	if got := r.do(t, "conntrack/dump", "zone=6"); got == "" {
		t.Error("zone 6 emptied by zone 5's flush")
	}
	r.do(t, "dpctl/flush-conntrack")
	if got := r.do(t, "conntrack/dump"); got != "" {
		t.Errorf("conntrack after flushing all: %q", got)
	}
	for _, bad := range [][]string{{"zone=70000"}, {"5"}, {"zone=1", "zone=2"}} {
		if _, err := r.cmds["conntrack/dump"](bad); err == nil {
			t.Errorf("conntrack/dump %q: no error", bad)
		}
	}
}

func TestExitCommand(t *testing.T) {
	r := newRig(t, testFlows)
	r.do(t, "exit")
	select {
	case <-r.stop:
	default:
		t.Fatal("exit did not call stop")
	}
}

// TestControlSocket runs the switch with its control socket and drives it
// with unixctl.Call and, if installed, the real ovs-appctl; "exit" over
// the socket stops Run.
func TestControlSocket(t *testing.T) {
	ch1, ch2 := port.NewChannel("p1", 8, false), port.NewChannel("p2", 8, false)
	rules, _ := ParseFlows(strings.NewReader(testFlows))
	sw, err := New(Config{Ports: []Port{{1, "channel", ch1}, {2, "channel", ch2}}, Rules: rules, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "switch.ctl")
	l, err := unixctl.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return")
		}
	})
	ch1.Inject(udpFrame(1, 80, 0), port.Offload{})
	select {
	case <-ch2.Out():
	case <-time.After(5 * time.Second):
		t.Fatal("no frame forwarded")
	}
	out, err := unixctl.Call(ctx, path, "dpctl/dump-flows", "reasons")
	if err != nil || !strings.Contains(out, "in_port=1,") || !strings.Contains(out, "ruled out") {
		t.Errorf("dpctl/dump-flows over the socket: %q, %v", out, err)
	}
	_, err = unixctl.Call(ctx, path, "ofproto/trace", "in_port=1,ip,nw_src=10.0.0.0/8")
	var ce *unixctl.CommandError
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "masks") {
		t.Errorf("bad trace over the socket: %v", err)
	}
	if bin, err := exec.LookPath("ovs-appctl"); err == nil {
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "-t", path, "ofproto/trace", "in_port=1,udp,tp_dst=80")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "Datapath actions: 2") {
			t.Errorf("ovs-appctl ofproto/trace: %v\n%s%s", err, stdout.String(), stderr.String())
		}
	} else {
		t.Log("ovs-appctl not installed; only govn's client tested")
	}
	if _, err := unixctl.Call(ctx, path, "exit"); err != nil {
		t.Fatalf("exit: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after exit: %v", err)
		}
		done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running after exit")
	}
}

// TestFlowLimitCommands: upcall/set-flow-limit caps the megaflows; at the
// cap frames are still forwarded, uncached, and upcall/show and
// dpctl/show count them; lowering the cap evicts.
func TestFlowLimitCommands(t *testing.T) {
	r := newRig(t, testFlows)
	if out := r.do(t, "upcall/show"); !strings.Contains(out, "(current 0) (limit 200000)") {
		t.Errorf("upcall/show before any traffic:\n%s", out)
	}
	if out := r.do(t, "upcall/set-flow-limit", "1"); out != "set flow_limit to 1 (0 megaflows evicted)\n" {
		t.Errorf("upcall/set-flow-limit 1: %q", out)
	}
	// Three frames that make three different megaflows, each sent twice.
	for range 2 {
		r.send(t, 1, 2, udpFrame(1000, 80, 0))
		r.send(t, 1, 0, udpFrame(1000, 53, 0))
		r.send(t, 2, 1, udpFrame(80, 1000, 0))
	}
	r.settle(t, map[uint32]uint64{1: 2, 2: 2})
	// The first megaflow was installed and hit once; the other two
	// frames went to the slow path both times.
	if out := r.do(t, "upcall/show"); !strings.Contains(out, "(current 1) (limit 1)") || !strings.Contains(out, "installed:1 flow_limit_hits:4 ") {
		t.Errorf("upcall/show at the limit:\n%s", out)
	}
	if out := r.do(t, "dpctl/show"); !strings.Contains(out, "flow_limit: 1 hits:4 evicted:0") {
		t.Errorf("dpctl/show at the limit:\n%s", out)
	}
	if out := r.do(t, "upcall/set-flow-limit", "0"); out != "set flow_limit to 0 (1 megaflows evicted)\n" {
		t.Errorf("upcall/set-flow-limit 0: %q", out)
	}
	if out := r.do(t, "upcall/show"); !strings.Contains(out, "(current 0) (limit 0)") || !strings.Contains(out, "evicted       : 1 ") {
		t.Errorf("upcall/show after lowering the limit:\n%s", out)
	}
	for _, args := range [][]string{{}, {"-1"}, {"many"}, {"1", "2"}} {
		if _, err := r.cmds["upcall/set-flow-limit"](args); err == nil {
			t.Errorf("upcall/set-flow-limit %q: no error", args)
		}
	}
}
