package difftest

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// step is one command of a scripted session. In args, "{db}" stands for
// the server's remote and "{last}" for the trimmed standard output of the
// previous command on the same server, so a script can use a UUID it just
// created. sort, if set, reorders the command's standard output where the
// tool prints rows in hash order. A step with during runs its command in
// the background (a monitor), waits for its first line of output, runs
// the during steps, then collects what it printed until it shows until.
type step struct {
	args   []string
	sort   func(string) string
	during []step
	until  string
}

func cmd(args ...string) step     { return step{args: args} }
func listing(args ...string) step { return step{args: args, sort: sortBlocks} }
func lineSet(args ...string) step { return step{args: args, sort: sortLines} }
func tree(args ...string) step    { return step{args: args, sort: sortTree} }
func bareUUIDs(args ...string) step {
	return step{args: append([]string{"--bare", "--columns=_uuid"}, args...), sort: sortLines}
}

// monitor runs args in the background while the during steps run, and
// collects its output until it contains until (the last step's update;
// at most 10s) and then stays quiet for a moment.
func monitor(until string, args []string, during ...step) step {
	return step{args: args, during: during, until: until}
}

// sortedMonitor is monitor for table-format output of updates with many
// rows, which come in hash order: the lines of each table are sorted.
func sortedMonitor(until string, args []string, during ...step) step {
	return step{args: args, during: during, until: until, sort: sortLinesInBlocks}
}

// session runs one program's steps against one server.
type session struct {
	ctx    context.Context
	dir    string
	prog   string
	remote string
	dbFlag string // e.g. "--db=": prepended with the remote to every command; "" for none
	last   string
	b      strings.Builder
}

// runSession runs prog's steps against the server at remote and returns
// the transcript with UUIDs normalized.
func runSession(ctx context.Context, dir, prog, remote, dbFlag string, steps []step) string {
	s := &session{ctx: ctx, dir: dir, prog: prog, remote: remote, dbFlag: dbFlag}
	s.run(steps)
	return normalizeUUIDs(normalizeNoise(s.b.String()))
}

func (s *session) args(st step) []string {
	var args []string
	if s.dbFlag != "" {
		args = append(args, s.dbFlag+s.remote)
	}
	for _, a := range st.args {
		a = strings.ReplaceAll(a, "{db}", s.remote)
		args = append(args, strings.ReplaceAll(a, "{last}", s.last))
	}
	return args
}

func (s *session) run(steps []step) {
	for _, st := range steps {
		if st.during != nil {
			s.runMonitor(st)
			continue
		}
		out, stdout := runOut(s.ctx, s.dir, s.prog, s.args(st)...)
		if st.sort != nil && stdout != "" {
			out = strings.Replace(out, stdout, st.sort(stdout), 1)
		}
		s.last = strings.TrimSpace(stdout)
		s.b.WriteString(strings.ReplaceAll(out, s.remote, "<db>"))
	}
}

// runMonitor starts st's command, waits for its first line (the initial
// contents, so it is surely registered), runs st.during, waits until the
// output shows st.until and has then been quiet for a moment, stops the
// command and records all it printed after the during steps' transcripts.
func (s *session) runMonitor(st step) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	args := s.args(st)
	c := exec.CommandContext(ctx, s.prog, args...)
	c.Env = runEnv(s.dir)
	pipe, err := c.StdoutPipe()
	if err != nil {
		fmt.Fprintf(&s.b, "[monitor error] %v\n", err)
		return
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		fmt.Fprintf(&s.b, "[monitor error] %v\n", err)
		return
	}
	lines := readLines(bufio.NewReader(pipe))
	var out strings.Builder
	collect := func(quiet time.Duration) {
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return
				}
				out.WriteString(l)
			case <-time.After(quiet):
				return
			}
		}
	}
	select {
	case l, ok := <-lines:
		if ok {
			out.WriteString(l)
		}
	case <-time.After(10 * time.Second):
		out.WriteString("[no initial output in 10s]\n")
	}
	collect(300 * time.Millisecond) // the rest of the initial contents
	initial := out.Len()
	s.run(st.during)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String()[initial:], st.until) && time.Now().Before(deadline) {
		collect(100 * time.Millisecond)
	}
	collect(300 * time.Millisecond) // anything after it would be a difference too
	c.Process.Kill()
	c.Wait()
	text := out.String()
	if st.sort != nil {
		text = st.sort(text)
	}
	fmt.Fprintf(&s.b, "$ %s %s & (output while the steps above ran)\n%s", s.prog,
		strings.ReplaceAll(strings.Join(args, " "), s.remote, "<db>"), text)
	if stderr.Len() > 0 {
		fmt.Fprintf(&s.b, "[stderr] %s", stderr.String())
	}
}

// compareSessions runs the same session against the real ovsdb-server and
// the target, concurrently, and compares the transcripts.
func compareSessions(t *testing.T, what, short, prog, dbFlag string, steps []step) {
	t.Helper()
	ref := startServer(t, kindReal, short)
	got := startServer(t, target(), short)
	var refOut, gotOut string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); refOut = runSession(t.Context(), ref.dir, prog, ref.remote(), dbFlag, steps) }()
	go func() { defer wg.Done(); gotOut = runSession(t.Context(), got.dir, prog, got.remote(), dbFlag, steps) }()
	wg.Wait()
	if strings.Count(refOut, "[exit]") > len(steps)/4 {
		t.Errorf("%s: the reference session itself failed often; the script is wrong:\n%s", what, refOut)
	}
	diffTranscripts(t, what, refOut, gotOut)
}

// nbctlScript exercises the ovn-nbctl commands OVN users run most.
var nbctlScript = []step{
	cmd("init"),
	cmd("ls-add", "sw0"),
	cmd("ls-add", "sw1"),
	cmd("ls-add", "sw0"), // duplicate: an error
	cmd("--may-exist", "ls-add", "sw0"),
	cmd("lsp-add", "sw0", "p1"),
	cmd("lsp-add", "sw0", "p2"),
	cmd("lsp-add", "sw1", "p3"),
	cmd("lsp-add", "nosuch", "p9"), // unknown switch: an error
	cmd("lsp-set-addresses", "p1", "50:54:00:00:00:01 10.0.0.11", "50:54:00:00:00:11 10.0.0.111"),
	cmd("lsp-set-addresses", "p2", "50:54:00:00:00:02 10.0.0.12 aef0::12"),
	cmd("lsp-set-addresses", "p3", "unknown"),
	cmd("lsp-set-port-security", "p1", "50:54:00:00:00:01 10.0.0.11"),
	cmd("lsp-get-addresses", "p1"),
	cmd("lsp-get-port-security", "p1"),
	cmd("lsp-add", "sw0", "lp0"),
	cmd("lsp-set-type", "lp0", "localport"),
	cmd("lsp-get-type", "lp0"),
	cmd("lsp-set-options", "lp0", "foo=bar", "baz=qux"),
	cmd("lsp-get-options", "lp0"),
	cmd("lsp-set-enabled", "p2", "disabled"),
	cmd("lsp-get-enabled", "p2"),
	cmd("lsp-list", "sw0"),
	cmd("lr-add", "lr0"),
	cmd("lrp-add", "lr0", "lr0-sw0", "00:00:00:00:ff:01", "10.0.0.1/24", "aef0::1/64"),
	cmd("lrp-add", "lr0", "lr0-sw1", "00:00:00:00:ff:02", "20.0.0.1/24"),
	cmd("lrp-add", "lr0", "lr0-bad", "zz:00:00:00:ff:02", "20.0.0.1/24"), // bad MAC
	cmd("lsp-add", "sw0", "sw0-lr0", "--", "lsp-set-type", "sw0-lr0", "router", "--", "lsp-set-addresses", "sw0-lr0", "router",
		"--", "lsp-set-options", "sw0-lr0", "router-port=lr0-sw0"),
	cmd("lrp-list", "lr0"),
	cmd("lr-route-add", "lr0", "0.0.0.0/0", "20.0.0.254"),
	cmd("lr-route-add", "lr0", "192.168.0.0/16", "10.0.0.100", "lr0-sw0"),
	cmd("--ecmp", "lr-route-add", "lr0", "172.16.0.0/16", "20.0.0.2"),
	cmd("--ecmp", "lr-route-add", "lr0", "172.16.0.0/16", "20.0.0.3"),
	cmd("lr-route-list", "lr0"),
	cmd("lr-route-del", "lr0", "192.168.0.0/16"),
	cmd("lr-policy-add", "lr0", "100", "ip4.src == 10.0.0.11", "drop"),
	cmd("lr-policy-add", "lr0", "90", "ip4.src == 10.0.0.12", "reroute", "20.0.0.3"),
	cmd("lr-policy-add", "lr0", "80", "ip4.src == 10.0.0.0/24", "allow", "pkt_mark=7"),
	cmd("lr-policy-list", "lr0"),
	cmd("lr-nat-add", "lr0", "snat", "20.0.0.1", "10.0.0.0/24"),
	cmd("lr-nat-add", "lr0", "dnat_and_snat", "20.0.0.50", "10.0.0.11", "p1", "30:54:00:00:00:03"),
	cmd("lr-nat-add", "lr0", "dnat", "20.0.0.60", "10.0.0.12"),
	cmd("lr-nat-add", "lr0", "snat", "20.0.0.1", "10.0.0.0/24"), // duplicate: an error
	cmd("lr-nat-list", "lr0"),
	cmd("lr-nat-del", "lr0", "dnat", "20.0.0.60"),
	cmd("lb-add", "lb0", "30.0.0.1", "10.0.0.11,10.0.0.12"),
	cmd("lb-add", "lb1", "30.0.0.2:80", "10.0.0.11:8080,10.0.0.12:8080", "tcp"),
	cmd("lb-add", "lb1", "30.0.0.3:53", "10.0.0.11:53", "udp"),
	cmd("lb-add", "lb2", "[aef0::100]:80", "[aef0::12]:80", "tcp"),
	cmd("lb-list"),
	cmd("ls-lb-add", "sw0", "lb0"),
	cmd("ls-lb-add", "sw0", "lb1"),
	cmd("ls-lb-list", "sw0"),
	cmd("lr-lb-add", "lr0", "lb1"),
	cmd("lr-lb-list", "lr0"),
	cmd("lb-del", "lb2"),
	cmd("acl-add", "sw0", "from-lport", "1002", "ip4 && tcp.dst == 80", "allow-related"),
	cmd("acl-add", "sw0", "to-lport", "1001", "ip4.src == $as1", "drop"),
	cmd("--log", "--severity=alert", "--name=web", "acl-add", "sw1", "to-lport", "100", "tcp", "reject"),
	cmd("acl-add", "sw0", "sideways", "1", "ip", "drop"), // bad direction
	cmd("acl-list", "sw0"),
	cmd("acl-list", "sw1"),
	cmd("pg-add", "pg1", "p1", "p2"),
	cmd("pg-add", "pg2"),
	cmd("pg-set-ports", "pg2", "p3", "p1"),
	cmd("acl-add", "pg1", "to-lport", "1000", "outport == @pg1 && ip4", "allow"),
	cmd("acl-list", "pg1"),
	cmd("create", "Address_Set", "name=as1", `addresses="10.0.0.11","10.0.0.12"`),
	cmd("create", "Address_Set", "name=as1"), // duplicate index value: an error
	cmd("add", "Address_Set", "as1", "addresses", `"10.0.0.13"`),
	cmd("remove", "Address_Set", "as1", "addresses", `"10.0.0.11"`),
	cmd("get", "Address_Set", "as1", "addresses"),
	cmd("dhcp-options-create", "10.0.0.0/24", "foo=bar"),
	bareUUIDs("find", "DHCP_Options", `cidr="10.0.0.0/24"`),
	cmd("dhcp-options-set-options", "{last}", "lease_time=3600", "router=10.0.0.1", "server_id=10.0.0.1", "server_mac=c0:ff:ee:00:00:01"),
	lineSet("dhcp-options-list"),
	bareUUIDs("find", "DHCP_Options", `cidr="10.0.0.0/24"`),
	cmd("dhcp-options-get-options", "{last}"),
	bareUUIDs("find", "DHCP_Options", `cidr="10.0.0.0/24"`),
	cmd("lsp-set-dhcpv4-options", "p1", "{last}"),
	cmd("lsp-get-dhcpv4-options", "p1"),
	cmd("set", "Logical_Switch", "sw0", "other_config:subnet=10.0.0.0/24", `external_ids:owner="team a"`),
	cmd("set", "Logical_Switch_Port", "p1", "external_ids:iface-id=vm1", "tag_request=7"),
	cmd("set", "Logical_Switch_Port", "p1", "tag_request=5000"), // out of range: an error
	cmd("get", "Logical_Switch_Port", "p1", "external_ids:iface-id", "tag_request"),
	cmd("add", "Logical_Switch", "sw1", "other_config", "mcast_snoop=true"),
	cmd("remove", "Logical_Switch", "sw0", "external_ids", "owner"),
	cmd("clear", "Logical_Switch_Port", "p1", "tag_request"),
	cmd("set", "Logical_Switch", "nosuch", "other_config:x=y"), // unknown row: an error
	cmd("set", "No_Such_Table", "x", "a=b"),                    // unknown table: an error
	listing("list", "Logical_Switch"),
	listing("list", "Logical_Switch_Port"),
	listing("list", "Logical_Router"),
	listing("list", "Logical_Router_Port"),
	listing("list", "Logical_Router_Static_Route"),
	listing("list", "NAT"),
	listing("list", "Load_Balancer"),
	listing("list", "ACL"),
	listing("list", "Port_Group"),
	listing("list", "DHCP_Options"),
	listing("list", "Address_Set"),
	listing("list", "NB_Global"),
	listing("find", "Logical_Switch_Port", "type=localport"),
	listing("find", "ACL", "priority>1000"),
	listing("--columns=name,addresses", "find", "Logical_Switch_Port", `addresses{>=}"unknown"`),
	lineSet("--bare", "--columns=name", "find", "Logical_Switch_Port", "enabled=false"),
	lineSet("--format=csv", "--columns=name,type", "list", "Logical_Switch_Port"),
	listing("--format=json", "--columns=name", "list", "Logical_Router"),
	cmd("get", "Logical_Router", "lr0", "name"),
	cmd("--if-exists", "get", "Logical_Router", "nosuch", "name"),
	tree("show"),
	tree("show", "sw0"),
	cmd("pg-del", "pg2"),
	cmd("lsp-del", "p3"),
	cmd("destroy", "Address_Set", "as1"),
	cmd("ls-lb-del", "sw0", "lb0"),
	cmd("lr-del", "lr0"),
	cmd("ls-del", "sw1"),
	cmd("--if-exists", "ls-del", "sw1"),
	listing("list", "Logical_Router_Static_Route"), // garbage-collected with lr0
	listing("list", "NAT"),
	listing("list", "Load_Balancer"),
	listing("list", "ACL"),
	tree("show"),
	cmd("--wait=none", "sync"),
}

// TestNbctlSession runs a scripted ovn-nbctl session against the target
// and the real ovsdb-server and compares the transcripts.
func TestNbctlSession(t *testing.T) {
	need(t, "ovn-nbctl", "ovsdb-server", "ovsdb-tool")
	compareSessions(t, "ovn-nbctl", "nb", "ovn-nbctl", "--db=", nbctlScript)
}
