package hvtest

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// mcastListen is run in a VM: with "join" it joins 239.1.1.1 on eth0
// (the kernel sends IGMP reports; closing the socket at exit, a leave);
// either way it watches eth0 itself (a packet socket, so a frame counts
// whether or not the VM is a member) and prints the payload of every
// UDP datagram to 239.1.1.1:5000 it sees, for argv[3] seconds.
const mcastListen = `import socket,struct,sys,time
me,join,secs=sys.argv[1],sys.argv[2]=="join",float(sys.argv[3])
raw=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0800));raw.bind(("eth0",0));raw.settimeout(0.2)
if join:
    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(("0.0.0.0",5000))
    s.setsockopt(socket.IPPROTO_IP,socket.IP_ADD_MEMBERSHIP,socket.inet_aton("239.1.1.1")+socket.inet_aton(me))
print("ready",flush=True)
end=time.time()+secs
while time.time()<end:
    try: f=raw.recv(2048)
    except socket.timeout: continue
    ip=f[14:]
    if len(ip)<28 or ip[9]!=17 or ip[16:20]!=socket.inet_aton("239.1.1.1"): continue
    l4=ip[(ip[0]&15)*4:]
    if struct.unpack(">H",l4[2:4])[0]==5000: print(l4[8:].decode(errors="replace"),flush=True)
`

// igmpWatch is run in a VM: it prints "igmp TYPE from SRC ttl TTL" for
// each IGMP message it sees on eth0 within argv[1] seconds.
const igmpWatch = `import socket,sys,time
raw=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0800));raw.bind(("eth0",0));raw.settimeout(0.2)
end=time.time()+float(sys.argv[1])
while time.time()<end:
    try: f=raw.recv(2048)
    except socket.timeout: continue
    ip=f[14:]
    if len(ip)<28 or ip[9]!=2: continue
    print("igmp %#x from"%ip[(ip[0]&15)*4],socket.inet_ntoa(ip[12:16]),"ttl",ip[8],flush=True)
`

// mcastSend is run in a VM: it sends argv[2] datagrams to
// 239.1.1.1:5000 from argv[1], 100 ms apart.
const mcastSend = `import socket,sys,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP,socket.IP_MULTICAST_IF,socket.inet_aton(sys.argv[1]))
s.setsockopt(socket.IPPROTO_IP,socket.IP_MULTICAST_TTL,1)
for i in range(int(sys.argv[2])):
    s.sendto(b"hello-%d"%i,("239.1.1.1",5000));time.sleep(0.1)
`

// TestGovnChassisIGMP: IGMP snooping on govn chassis, with the real
// ovn-northd. On a switch with mcast_snoop, vm1 joins 239.1.1.1: govn
// chassis writes an IGMP_Group row with vm1's port; ovn-northd makes a
// Multicast_Group of it; multicast vm3 sends to the group reaches vm1
// and not vm2, which did not join (with snooping, traffic to a group
// no one joined is not flooded). When vm1 leaves, the row goes. With
// mcast_querier and its source addresses set, the switch sends IGMP
// general queries from them every mcast_query_interval, which the VMs
// see. An MLD join of ff05::1:3 makes an IGMP_Group row too; a second
// member updates its ports. A port with mcast_flood_reports gets the
// reports of the others.
func TestGovnChassisIGMP(t *testing.T) {
	python(t)
	c := govnChassisCluster(t, 1)
	hv := c.Hypervisor(1)
	c.NBCtl(t, "ls-add", "ls1", "--", "set", "Logical_Switch", "ls1", "other_config:mcast_snoop=true")
	var vms []*VM
	for i, name := range []string{"vm1", "vm2", "vm3"} {
		mac := "0a:00:00:00:00:0" + string(rune('1'+i))
		ip := "10.0.0.1" + string(rune('1'+i))
		c.NBCtl(t, "lsp-add", "ls1", name, "--", "lsp-set-addresses", name, mac+" "+ip)
		vms = append(vms, c.AddVM(t, hv, VMSpec{Name: name, LSP: name, MAC: mac, Addr: ip + "/24"}))
	}
	for _, vm := range vms {
		c.WaitPortUp(t, vm.LSP)
	}
	c.NBCtl(t, "--wait=hv", "sync")
	vm1, vm2, vm3 := vms[0], vms[1], vms[2]
	defer func() {
		if t.Failed() {
			for _, cmd := range []string{"pinctrl/show", "dpctl/dump-flows"} {
				out, err := run(context.Background(), ovsEnv(hv.Dir), inNS(hv.NS, "ovs-appctl", "-t", hv.Dir+"/chassis.ctl", cmd)...)
				t.Logf("%s (%v):\n%s", cmd, err, out)
			}
			t.Logf("IGMP_Group:\n%s\nMulticast_Group:\n%s", c.SBCtl(t, "list", "IGMP_Group"), c.SBCtl(t, "list", "Multicast_Group"))
		}
	}()
	if out := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "IGMP_Group", "address!=mrouters")); out != "" {
		t.Fatalf("IGMP_Group rows before any join: %s", out)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := func(vm *VM, mode string, secs string) (*exec.Cmd, *bytes.Buffer) {
		var out bytes.Buffer
		cmd := vm.Command(ctx, "python3", "-u", "-c", mcastListen, vm.IP(), mode, secs)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}
	l1, out1 := listen(vm1, "join", "25")
	l2, out2 := listen(vm2, "watch", "25")
	defer l1.Wait()
	defer l2.Wait()
	defer cancel()

	vm1Port := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Port_Binding", "logical_port=vm1"))
	var rows string
	if err := waitFor(20*time.Second, "an IGMP_Group row for 239.1.1.1", func() bool {
		rows = strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=ports", "find", "IGMP_Group", "address=239.1.1.1"))
		return rows != ""
	}); err != nil {
		t.Fatal(err)
	}
	if rows != vm1Port {
		t.Errorf("IGMP_Group 239.1.1.1 ports %q, want vm1's Port_Binding %s", rows, vm1Port)
	}
	chassis := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=chassis", "find", "IGMP_Group", "address=239.1.1.1"))
	if want := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "list", "Chassis")); chassis != want {
		t.Errorf("IGMP_Group chassis %q, want %q", chassis, want)
	}

	t.Run("delivery", func(t *testing.T) {
		if err := waitFor(20*time.Second, "ovn-northd's Multicast_Group 239.1.1.1", func() bool {
			return strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=name", "find", "Multicast_Group", "name=239.1.1.1")) != ""
		}); err != nil {
			t.Fatal(err)
		}
		c.NBCtl(t, "--wait=hv", "sync")
		sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
		defer scancel()
		if out, err := vm3.Command(sctx, "python3", "-c", mcastSend, vm3.IP(), "20").CombinedOutput(); err != nil {
			t.Fatalf("sending: %v: %s", err, out)
		}
		time.Sleep(time.Second)
		cancel()
		l1.Wait()
		l2.Wait()
		got1 := strings.Count(out1.String(), "hello-")
		got2 := strings.Count(out2.String(), "hello-")
		t.Logf("vm1 (member) saw %d of 20, vm2 (not a member) %d", got1, got2)
		if got1 < 15 {
			t.Errorf("the member vm1 saw %d of 20 datagrams to the group:\n%s", got1, out1)
		}
		if got2 != 0 {
			t.Errorf("vm2, not a member, saw %d datagrams to the group:\n%s", got2, out2)
		}
	})

	// vm1's listener has ended (at the latest when the delivery test
	// cancelled it): its socket closed, the kernel sent a leave.
	cancel()
	l1.Wait()
	if err := waitFor(20*time.Second, "the IGMP_Group row to go after vm1 left", func() bool {
		return strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "IGMP_Group", "address=239.1.1.1")) == ""
	}); err != nil {
		t.Error(err)
	}

	t.Run("mld", func(t *testing.T) {
		mctx, mcancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer mcancel()
		// joinMLD enables IPv6 on vm and joins ff05::1:3 there (the
		// kernel sends MLDv2 reports) until mctx ends.
		joinMLD := func(vm *VM) {
			if out, err := vm.Command(mctx, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0",
				"net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.eth0.disable_ipv6=0").CombinedOutput(); err != nil {
				t.Fatalf("enabling IPv6 on %s: %v: %s", vm.Name, err, out)
			}
			time.Sleep(time.Second) // the link-local address MLD reports come from
			join := vm.Command(mctx, "python3", "-c", `import socket,struct,time
s=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_JOIN_GROUP,socket.inet_pton(socket.AF_INET6,"ff05::1:3")+struct.pack("@I",socket.if_nametoindex("eth0")))
time.sleep(60)`)
			if err := join.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mcancel(); join.Wait() })
		}
		// waitPorts waits for the group's row to name want's ports.
		waitPorts := func(want ...string) {
			var ports []string
			if err := waitFor(20*time.Second, "IGMP_Group ff05::1:3 with "+strings.Join(want, ", "), func() bool {
				ports = strings.Fields(c.SBCtl(t, "--bare", "--columns=ports", "find", "IGMP_Group", `address="ff05::1:3"`))
				slices.Sort(ports)
				return slices.Equal(ports, want)
			}); err != nil {
				t.Fatalf("%v: ports %v", err, ports)
			}
		}
		joinMLD(vm1)
		waitPorts(vm1Port)
		// A second member updates the row.
		vm2Port := strings.TrimSpace(c.SBCtl(t, "--bare", "--columns=_uuid", "find", "Port_Binding", "logical_port=vm2"))
		joinMLD(vm2)
		both := []string{vm1Port, vm2Port}
		slices.Sort(both)
		waitPorts(both...)
	})

	t.Run("querier", func(t *testing.T) {
		c.NBCtl(t, "--wait=hv", "set", "Logical_Switch", "ls1", "other_config:mcast_querier=true",
			"other_config:mcast_eth_src=0a:00:00:00:00:fe", "other_config:mcast_ip4_src=10.0.0.254",
			"other_config:mcast_query_interval=2") // the first may come before the watch starts
		qctx, qcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer qcancel()
		out, err := vm2.Command(qctx, "python3", "-u", "-c", igmpWatch, "6").CombinedOutput()
		if err != nil {
			t.Fatalf("watching for queries: %v: %s", err, out)
		}
		n := strings.Count(string(out), "igmp 0x11 from 10.0.0.254 ttl 1")
		t.Logf("vm2 saw %d queries in 6 s", n)
		if n < 2 || n > 4 {
			t.Errorf("vm2 saw %d IGMP queries from 10.0.0.254 in 6 s, want one every 2 s: %q", n, out)
		}
	})

	t.Run("flood-reports", func(t *testing.T) {
		// vm3's port gets every report; vm2 joins 239.2.2.2.
		c.NBCtl(t, "--wait=hv", "lsp-set-options", "vm3", "mcast_flood_reports=true")
		fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer fcancel()
		var out bytes.Buffer
		watch := vm3.Command(fctx, "python3", "-u", "-c", igmpWatch, "5")
		watch.Stdout, watch.Stderr = &out, &out
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		join := vm2.Command(fctx, "python3", "-c", `import socket,sys,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP,socket.IP_ADD_MEMBERSHIP,socket.inet_aton("239.2.2.2")+socket.inet_aton(sys.argv[1]))
time.sleep(6)`, vm2.IP())
		if err := join.Start(); err != nil {
			t.Fatal(err)
		}
		defer join.Wait()
		if err := watch.Wait(); err != nil {
			t.Fatalf("watching for reports: %v: %s", err, out.String())
		}
		if !strings.Contains(out.String(), "igmp 0x22 from "+vm2.IP()) {
			t.Errorf("vm3 (mcast_flood_reports) saw no IGMPv3 report from vm2: %q", out.String())
		}
	})
}
