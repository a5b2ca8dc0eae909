// Package ovsref runs the real ovs-vswitchd, with a dummy bridge and no
// root, for differential tests: govn's flow extraction and megaflows are
// compared with what OVS's ofproto/trace reports for the same packets and
// flow tables. It is for tests only.
package ovsref

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/datapath/flow"
)

// Switch is a running ovs-vswitchd with bridge br0 and dummy ports p1, p2
// and p3 (OpenFlow ports 1, 2 and 3). Its processes end with the test.
type Switch struct {
	dir string
	env []string
}

// Start starts ovsdb-server and ovs-vswitchd in a temporary directory, or
// skips the test when OVS is not installed or -short is set.
func Start(t *testing.T, otherConfig ...string) *Switch {
	t.Helper()
	if testing.Short() {
		t.Skip("starts ovs-vswitchd")
	}
	for _, b := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed", b)
		}
	}
	schema := "/usr/share/openvswitch/vswitch.ovsschema"
	if _, err := os.Stat(schema); err != nil {
		t.Skip("vswitch.ovsschema not installed")
	}
	dir := t.TempDir()
	s := &Switch{dir: dir, env: append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVS_DBDIR="+dir)}
	s.run(t, "ovsdb-tool", "create", filepath.Join(dir, "conf.db"), schema)
	db := "unix:" + filepath.Join(dir, "db.sock")
	s.daemon(t, "ovsdb-server", filepath.Join(dir, "conf.db"), "--remote=punix:"+filepath.Join(dir, "db.sock"),
		"--unixctl="+filepath.Join(dir, "ovsdb.ctl"), "--log-file="+filepath.Join(dir, "ovsdb.log"), "--no-chdir")
	s.waitFor(t, filepath.Join(dir, "db.sock"))
	s.run(t, "ovs-vsctl", "--db="+db, "--no-wait", "init")
	if len(otherConfig) > 0 {
		args := []string{"--db=" + db, "--no-wait", "set", "Open_vSwitch", "."}
		for _, kv := range otherConfig {
			args = append(args, "other_config:"+kv)
		}
		s.run(t, "ovs-vsctl", args...)
	}
	s.daemon(t, "ovs-vswitchd", db, "--enable-dummy=override", "--disable-system",
		"--unixctl="+filepath.Join(dir, "vs.ctl"), "--log-file="+filepath.Join(dir, "vs.log"), "--no-chdir")
	s.waitFor(t, filepath.Join(dir, "vs.ctl"))
	s.run(t, "ovs-vsctl", "--db="+db, "--timeout=30", "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=dummy",
		"--", "add-port", "br0", "p1", "--", "set", "interface", "p1", "type=dummy", "ofport_request=1",
		"--", "add-port", "br0", "p2", "--", "set", "interface", "p2", "type=dummy", "ofport_request=2",
		"--", "add-port", "br0", "p3", "--", "set", "interface", "p3", "type=dummy", "ofport_request=3")
	s.waitFor(t, filepath.Join(dir, "br0.mgmt"))
	return s
}

func (s *Switch) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Env, c.Dir = s.env, s.dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (s *Switch) daemon(t *testing.T, name string, args ...string) {
	t.Helper()
	c := exec.Command(name, args...)
	c.Env, c.Dir = s.env, s.dir
	c.SysProcAttr = daemonAttr()
	if err := c.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
}

func (s *Switch) waitFor(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 1200; i++ { // 30 s: the machine may be busy
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}

// SetPrefixes chooses the fields (up to 3) whose prefixes br0's table 0
// tracks; OVS's default is nw_dst,nw_src.
func (s *Switch) SetPrefixes(t *testing.T, fields string) {
	t.Helper()
	db := "--db=unix:" + filepath.Join(s.dir, "db.sock")
	s.run(t, "ovs-vsctl", db, "--timeout=30", "--", "--id=@ft", "create", "Flow_Table", "prefixes="+fields,
		"--", "set", "Bridge", "br0", "flow_tables:0=@ft")
}

// SetFlows replaces br0's flows with rules in ovs-ofctl syntax.
func (s *Switch) SetFlows(t *testing.T, rules []string) {
	t.Helper()
	mgmt := "unix:" + filepath.Join(s.dir, "br0.mgmt")
	s.run(t, "ovs-ofctl", "del-flows", mgmt)
	f := filepath.Join(s.dir, "flows.txt")
	if err := os.WriteFile(f, []byte(strings.Join(rules, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.run(t, "ovs-ofctl", "add-flows", mgmt, f)
}

// Trace runs ofproto/trace with the given arguments (a flow, or a flow
// and a packet in hex) and returns its output.
func (s *Switch) Trace(t *testing.T, args ...string) string {
	t.Helper()
	return s.run(t, "ovs-appctl", append([]string{"-t", filepath.Join(s.dir, "vs.ctl"), "ofproto/trace", "br0"}, args...)...)
}

// Appctl runs an ovs-appctl command on ovs-vswitchd and returns its output.
func (s *Switch) Appctl(t *testing.T, args ...string) string {
	t.Helper()
	return s.run(t, "ovs-appctl", append([]string{"-t", filepath.Join(s.dir, "vs.ctl")}, args...)...)
}

// Ofctl runs an ovs-ofctl command (dump-flows, dump-tables, ...) on br0
// with the given extra arguments and returns its output.
func (s *Switch) Ofctl(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	mgmt := "unix:" + filepath.Join(s.dir, "br0.mgmt")
	return s.run(t, "ovs-ofctl", append([]string{cmd, mgmt}, args...)...)
}

// Line returns the rest of the first line of out that starts with prefix.
func Line(out, prefix string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(line, prefix); ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("no %q line in:\n%s", prefix, out)
}

// ParseFlow parses OVS's printed flow or megaflow ("tcp,in_port=1,...")
// into a Match. Fields OVS prints that govn's key does not have are
// returned as ignored; OVS's textual values (tcp_flags=syn|ack, nw_frag=no,
// dl_vlan=5) are converted.
func ParseFlow(s string) (m flow.Match, ignored []string, err error) {
	shorthand := map[string][][2]uint64{
		"ip": {{uint64(flow.EthType), 0x0800}}, "ipv6": {{uint64(flow.EthType), 0x86dd}},
		"arp": {{uint64(flow.EthType), 0x0806}}, "rarp": {{uint64(flow.EthType), 0x8035}},
		"tcp":   {{uint64(flow.EthType), 0x0800}, {uint64(flow.NWProto), 6}},
		"udp":   {{uint64(flow.EthType), 0x0800}, {uint64(flow.NWProto), 17}},
		"sctp":  {{uint64(flow.EthType), 0x0800}, {uint64(flow.NWProto), 132}},
		"icmp":  {{uint64(flow.EthType), 0x0800}, {uint64(flow.NWProto), 1}},
		"igmp":  {{uint64(flow.EthType), 0x0800}, {uint64(flow.NWProto), 2}},
		"tcp6":  {{uint64(flow.EthType), 0x86dd}, {uint64(flow.NWProto), 6}},
		"udp6":  {{uint64(flow.EthType), 0x86dd}, {uint64(flow.NWProto), 17}},
		"sctp6": {{uint64(flow.EthType), 0x86dd}, {uint64(flow.NWProto), 132}},
		"icmp6": {{uint64(flow.EthType), 0x86dd}, {uint64(flow.NWProto), 58}},
	}
	tcpFlags := map[string]uint64{"fin": 1, "syn": 2, "rst": 4, "psh": 8, "ack": 0x10, "urg": 0x20, "ece": 0x40, "cwr": 0x80, "ns": 0x100}
	var vlan, pcp, vlan1, pcp1 uint64
	hasVLAN, hasVLAN1 := false, false
	for _, term := range strings.Split(s, ",") {
		name, val, hasVal := strings.Cut(term, "=")
		if !hasVal {
			if sh, ok := shorthand[name]; ok {
				for _, fv := range sh {
					m.Set(flow.Field(fv[0]), fv[1])
				}
				continue
			}
			if name == "eth" {
				continue
			}
			ignored = append(ignored, term)
			continue
		}
		switch name {
		case "tcp_flags":
			var v uint64
			if val != "0" {
				for _, f := range strings.Split(val, "|") {
					b, ok := tcpFlags[f]
					if !ok {
						return m, nil, fmt.Errorf("tcp_flags %q", val)
					}
					v |= b
				}
			}
			m.Set(flow.TCPFlags, v)
			continue
		case "nw_frag":
			m.Set(flow.NWFrag, map[string]uint64{"no": 0, "first": 1, "later": 3}[val])
			continue
		case "dl_vlan":
			fmt.Sscan(val, &vlan)
			hasVLAN = true
			continue
		case "dl_vlan_pcp":
			fmt.Sscan(val, &pcp)
			continue
		case "dl_vlan1":
			fmt.Sscan(val, &vlan1)
			hasVLAN1 = true
			continue
		case "dl_vlan_pcp1":
			fmt.Sscan(val, &pcp1)
			continue
		case "vlan_tci1":
			name = "vlan_tci_inner"
		case "igmp_group_ip4":
			name = "igmp_group"
		case "igmp_type":
			name = "icmp_type"
		case "igmp_code":
			name = "icmp_code"
		}
		f, ok := flow.FieldByName(name)
		if !ok {
			ignored = append(ignored, term)
			continue
		}
		v, mask, err := flow.ParseValue(f, val)
		if err != nil {
			return m, nil, fmt.Errorf("%q: %w", term, err)
		}
		m.SetMaskedU128(f, v, mask)
	}
	if hasVLAN {
		m.Set(flow.VLANTCI, pcp<<13|0x1000|vlan)
	}
	if hasVLAN1 {
		m.Set(flow.VLANTCIInner, pcp1<<13|0x1000|vlan1)
	}
	return m, ignored, nil
}
