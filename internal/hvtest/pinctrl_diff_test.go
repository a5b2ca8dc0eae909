package hvtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// dhcpDiscoverPy sends a DHCPDISCOVER from the VM's eth0 (MAC argv[1])
// through a packet socket and prints the IP packet of the first offer in
// hex.
const dhcpDiscoverPy = `import socket,struct,sys,time
mac=bytes.fromhex(sys.argv[1].replace(':',''))
s=socket.socket(socket.AF_PACKET,socket.SOCK_DGRAM,socket.htons(0x0800));s.bind(('eth0',0x0800));s.settimeout(1)
b=struct.pack('>BBBBIHH',1,1,6,0,0x1234abcd,0,0)+bytes(16)+mac+bytes(10)+bytes(192)+bytes([99,130,83,99,53,1,1,55,4,1,3,6,26,255])
b+=bytes(300-len(b))
u=struct.pack('>HHHH',68,67,8+len(b),0)+b
ip=struct.pack('>BBHHHBBH4s4s',0x45,0,20+len(u),0,0,64,17,0,bytes(4),bytes([255]*4))
w=struct.unpack('>10H',ip);c=sum(w);c=(c>>16)+(c&0xffff);c+=c>>16
ip=ip[:10]+struct.pack('>H',~c&0xffff)+ip[12:]
for i in range(15):
    s.sendto(ip+u,('eth0',0x0800,0,0,b'\xff'*6))
    end=time.time()+1
    while time.time()<end:
        try: d=s.recv(2000)
        except socket.timeout: break
        if len(d)>28 and d[9]==17 and d[22:24]==b'\x00\x44' and d[28]==2: print(d.hex()); sys.exit(0)
sys.exit(1)`

// dhcpOfferFields decodes an offer's IP packet into named fields for
// comparison; self-dependent fields (the VM's address and MAC) are
// checked against want and left out.
func dhcpOfferFields(t *testing.T, pkt []byte, wantIP string) map[string]string {
	t.Helper()
	if len(pkt) < 28+240 {
		t.Fatalf("offer of %d bytes", len(pkt))
	}
	f := map[string]string{}
	ip := func(b []byte) string { return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]) }
	f["ip.ttl"] = fmt.Sprint(pkt[8])
	f["ip.tos"] = fmt.Sprint(pkt[1])
	f["ip.flags/frag"] = hex.EncodeToString(pkt[6:8])
	f["ip.src"] = ip(pkt[12:16])
	if got := ip(pkt[16:20]); got != wantIP && got != "255.255.255.255" {
		t.Errorf("offer to %s, want %s or broadcast", got, wantIP)
	} else {
		f["ip.dst is broadcast"] = fmt.Sprint(got == "255.255.255.255")
	}
	f["udp.ports"] = hex.EncodeToString(pkt[20:24])
	m := pkt[28:]
	f["op htype hlen hops"] = hex.EncodeToString(m[0:4])
	f["xid"] = hex.EncodeToString(m[4:8])
	f["secs flags"] = hex.EncodeToString(m[8:12])
	f["ciaddr"] = ip(m[12:16])
	if got := ip(m[16:20]); got != wantIP {
		t.Errorf("yiaddr %s, want %s", got, wantIP)
	}
	f["siaddr"] = ip(m[20:24])
	f["giaddr"] = ip(m[24:28])
	for p := 240; p < len(m) && m[p] != 255; {
		if m[p] == 0 {
			p++
			continue
		}
		if p+2 > len(m) || p+2+int(m[p+1]) > len(m) {
			t.Fatalf("bad option at %d", p)
		}
		f[fmt.Sprintf("option %d", m[p])] = hex.EncodeToString(m[p+2 : p+2+int(m[p+1])])
		p += 2 + int(m[p+1])
	}
	return f
}

// TestDHCPDifferential: a DHCP offer from govn chassis and one from the
// real ovn-controller, for the same Southbound (one logical switch, a
// VM on each kind of hypervisor, the same DHCP options with every kind of
// value), agree field by field: IP and UDP header, BOOTP fields and every
// option.
func TestDHCPDifferential(t *testing.T) {
	python(t)
	c := govnChassisMix(t, 2, 2) // hv1 govn chassis, hv2 the real one
	c.NBCtl(t, "ls-add", "ls0")
	d := strings.TrimSpace(c.NBCtl(t, "create", "DHCP_Options", "cidr=10.0.0.0/24"))
	c.NBCtl(t, "dhcp-options-set-options", d, "lease_time=3600", "router=10.0.0.1", "server_id=10.0.0.1",
		"server_mac=0a:00:00:00:00:fe", "dns_server={8.8.8.8,7.7.7.7}", "mtu=1400", `domain_name="ovn.org"`,
		"classless_static_route={30.0.0.0/24,10.0.0.10,0.0.0.0/0,10.0.0.1}", `domain_search_list="ovn.org,example.com"`,
		"ip_forward_enable=1", "T1=1800", "T2=3000", `hostname="vm"`, "ntp_server={10.0.0.2}", `tftp_server="tftp.ovn.org"`)
	vms := map[int]*VM{}
	for i := 1; i <= 2; i++ {
		name, mac := fmt.Sprintf("vm%d", i), fmt.Sprintf("0a:00:00:00:00:0%d", i)
		c.NBCtl(t, "lsp-add", "ls0", name, "--", "lsp-set-addresses", name, fmt.Sprintf("%s 10.0.0.1%d", mac, i),
			"--", "lsp-set-dhcpv4-options", name, d)
		vms[i] = c.AddVM(t, c.Hypervisor(i), VMSpec{Name: name, LSP: name, MAC: mac})
	}
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	c.NBCtl(t, "--wait=hv", "sync")
	offers := map[int]map[string]string{}
	for i, vm := range vms {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := vm.Command(ctx, "python3", "-c", dhcpDiscoverPy, vm.MAC).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("DHCPDISCOVER from %s: %v: %s", vm.Name, err, out)
		}
		pkt, err := hex.DecodeString(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatal(err)
		}
		offers[i] = dhcpOfferFields(t, pkt, fmt.Sprintf("10.0.0.1%d", i))
	}
	govn, real := offers[1], offers[2]
	var keys []string
	for k := range real {
		keys = append(keys, k)
	}
	for k := range govn {
		if _, ok := real[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	same := 0
	for _, k := range keys {
		if govn[k] != real[k] {
			t.Errorf("%s: govn chassis %q, ovn-controller %q", k, govn[k], real[k])
		} else {
			same++
		}
	}
	t.Logf("%d of %d fields agree", same, len(keys))
}

// ttlProbePy sends a UDP datagram of 100 bytes with TTL 1 to argv[1]
// and prints, in hex, the first ICMP packet that comes back (IP header
// included, as a raw socket receives it).
const ttlProbePy = `import socket,sys,time
r=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_ICMP);r.settimeout(1)
u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);u.setsockopt(socket.IPPROTO_IP,socket.IP_TTL,1)
for i in range(15):
    u.sendto(b'p'*100,(sys.argv[1],33434))
    try: d=r.recv(2000)
    except socket.timeout: continue
    print(d.hex());sys.exit(0)
sys.exit(1)`

// TestICMPDifferential: the "time exceeded" a router sends for a TTL 1
// datagram, from govn chassis and from the real ovn-controller, agree
// field by field (addresses aside, the two senders being different VMs):
// IP header, ICMP type and code, and how much of the datagram is quoted.
func TestICMPDifferential(t *testing.T) {
	python(t)
	c := govnChassisMix(t, 2, 2)
	c.NBCtl(t, "lr-add", "lr1")
	for _, n := range []struct{ ls, mac, cidr string }{
		{"ls1", "0a:00:00:00:ff:11", "10.0.1.1/24"},
		{"ls2", "0a:00:00:00:ff:12", "10.0.2.1/24"},
	} {
		lrp, lsp := "lr1-"+n.ls, n.ls+"-lr1"
		c.NBCtl(t, "ls-add", n.ls, "--", "lrp-add", "lr1", lrp, n.mac, n.cidr,
			"--", "lsp-add", n.ls, lsp, "--", "lsp-set-type", lsp, "router",
			"--", "lsp-set-addresses", lsp, "router", "--", "lsp-set-options", lsp, "router-port="+lrp)
	}
	vms := map[int]*VM{}
	for i := 1; i <= 2; i++ {
		name, mac, ip := fmt.Sprintf("vm%d", i), fmt.Sprintf("0a:00:00:00:01:0%d", i), fmt.Sprintf("10.0.1.1%d", i)
		c.NBCtl(t, "lsp-add", "ls1", name, "--", "lsp-set-addresses", name, mac+" "+ip)
		vms[i] = c.AddVM(t, c.Hypervisor(i), VMSpec{Name: name, LSP: name, MAC: mac, Addr: ip + "/24", Gateway: "10.0.1.1"})
	}
	c.NBCtl(t, "lsp-add", "ls2", "far", "--", "lsp-set-addresses", "far", "0a:00:00:00:02:09 10.0.2.9")
	c.WaitPortUp(t, "vm1")
	c.WaitPortUp(t, "vm2")
	c.NBCtl(t, "--wait=hv", "sync")
	fields := map[int]map[string]string{}
	for i, vm := range vms {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := vm.Command(ctx, "python3", "-c", ttlProbePy, "10.0.2.9").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("TTL 1 probe from %s: %v: %s", vm.Name, err, out)
		}
		p, err := hex.DecodeString(strings.TrimSpace(string(out)))
		if err != nil || len(p) < 28 {
			t.Fatalf("probe reply %q", out)
		}
		hl := int(p[0]&0xf) * 4
		f := map[string]string{
			"ip.version/ihl": fmt.Sprintf("%02x", p[0]), "ip.tos": fmt.Sprint(p[1]), "ip.total_length": fmt.Sprint(int(p[2])<<8 | int(p[3])),
			"ip.flags/frag": hex.EncodeToString(p[6:8]), "ip.ttl": fmt.Sprint(p[8]), "ip.proto": fmt.Sprint(p[9]),
			"ip.src":         fmt.Sprintf("%d.%d.%d.%d", p[12], p[13], p[14], p[15]),
			"icmp.type/code": hex.EncodeToString(p[hl : hl+2]), "icmp.unused": hex.EncodeToString(p[hl+4 : hl+8]),
			"quoted bytes": fmt.Sprint(len(p) - hl - 8),
		}
		if len(p) >= hl+8+20 {
			q := p[hl+8:]
			f["quoted ip.ttl"] = fmt.Sprint(q[8])
			f["quoted ip.dst"] = fmt.Sprintf("%d.%d.%d.%d", q[16], q[17], q[18], q[19])
		}
		fields[i] = f
	}
	same := 0
	for k, real := range fields[2] {
		if g := fields[1][k]; g != real {
			t.Errorf("%s: govn chassis %q, ovn-controller %q", k, g, real)
		} else {
			same++
		}
	}
	t.Logf("%d of %d fields agree", same, len(fields[2]))
}
