package switchd

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestTranscript runs control commands whose output is deterministic on a
// switch that forwarded a known set of frames, and compares the
// transcript with testdata/transcript.golden (regenerate with -update).
func TestTranscript(t *testing.T) {
	r := newRig(t, testFlows)
	for i := range 3 {
		r.send(t, 1, 2, udpFrame(1000, 80, i))
	}
	r.send(t, 1, 0, udpFrame(1000, 53, 0))
	r.send(t, 2, 1, udpFrame(80, 1000, 0))
	r.settle(t, map[uint32]uint64{1: 1, 2: 3})
	script := [][]string{
		{"dpctl/show"},
		{"dump-tables"},
		{"dump-flows"},
		{"dump-flows", "table=1"},
		{"ofproto/trace", "in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=80"},
		{"ofproto/trace", "in_port=1,udp,nw_dst=10.0.0.2,tp_dst=53"},
		{"ofproto/trace", "in_port=1,tcp,nw_dst=10.0.0.2,tp_dst=53"},
		{"ofproto/trace", "in_port=1,arp"},
		{"ofproto/trace", "in_port=2,dl_dst=ff:ff:ff:ff:ff:ff"},
		{"ofproto/trace", "in_port=3"},
		{"add-flow", "table=1,priority=300,udp,tp_dst=81", "actions=drop"},
		{"dpctl/del-flows"},
		{"dpctl/show"},
		{"dpctl/del-flows", "in_port=1"},
		{"conntrack/dump"},
		{"nosuch"},
		{"dump-flows", "300"},
	}
	var b strings.Builder
	for _, cmd := range script {
		b.WriteString("$ " + strings.Join(cmd, " ") + "\n")
		f, ok := r.cmds[cmd[0]]
		if !ok {
			b.WriteString("error: no such command\n\n")
			continue
		}
		out, err := f(cmd[1:])
		if err != nil {
			b.WriteString("error: " + err.Error() + "\n")
		}
		b.WriteString(out + "\n")
	}
	golden := filepath.Join("testdata", "transcript.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("transcript differs from %s (run with -update to accept):\n%s", golden, got)
	}
}
