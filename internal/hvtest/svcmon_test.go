package hvtest

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/internal/lab"
)

// svcLab is a switch with a router, a client vm1 on hypervisor 1 and
// backends vm2 (hypervisor 1) and vm3 (hypervisor 2), each serving HTTP on
// 80; load balancers with health checks (interval 1 s, timeout 1 s,
// success_count 1, failure_count 2) are added by healthChecked.
type svcLab struct {
	c   *Cluster
	tl  lab.Tool
	vms map[string]*VM
}

func newSvcLab(t *testing.T, c *Cluster) *svcLab {
	c.NBCtl(t, "ls-add", "ls0")
	c.NBCtl(t, "lr-add", "lr0", "--", "lrp-add", "lr0", "lr0-ls0", "0a:00:00:00:00:fe", "10.0.0.1/24")
	c.NBCtl(t, "lsp-add", "ls0", "ls0-lr0", "--", "lsp-set-type", "ls0-lr0", "router",
		"--", "lsp-set-addresses", "ls0-lr0", "router", "--", "lsp-set-options", "ls0-lr0", "router-port=lr0-ls0")
	l := &svcLab{c: c, vms: map[string]*VM{}}
	for _, vm := range []struct {
		name, mac, ip string
		hv            int
	}{
		{"vm1", "0a:00:00:00:00:01", "10.0.0.11", 1},
		{"vm2", "0a:00:00:00:00:02", "10.0.0.12", 1},
		{"vm3", "0a:00:00:00:00:03", "10.0.0.13", 2},
	} {
		c.NBCtl(t, "lsp-add", "ls0", vm.name, "--", "lsp-set-addresses", vm.name, vm.mac+" "+vm.ip)
		l.vms[vm.name] = c.AddVM(t, c.Hypervisor(vm.hv), VMSpec{Name: vm.name, LSP: vm.name, MAC: vm.mac, Addr: vm.ip + "/24", Gateway: "10.0.0.1"})
	}
	for _, vm := range []string{"vm1", "vm2", "vm3"} {
		c.WaitPortUp(t, vm)
	}
	var err error
	l.tl, err = vmTool()
	must(t, err)
	return l
}

// serveHTTP starts vm's HTTP server on 80 (name: its log's).
func (l *svcLab) serveHTTP(t *testing.T, vm, name string) *lab.Daemon {
	t.Helper()
	d, err := l.tl.HTTPServe(t, l.c.Dir, l.vms[vm].NS, "vm-"+vm+"/"+name, 80, vm)
	must(t, err)
	return d
}

// healthChecked adds load balancer name on ls0 for vip (with port) and
// backends vm2 and vm3 at port, health-checked from 10.0.0.254.
func (l *svcLab) healthChecked(t *testing.T, name, vip, port, proto string) {
	t.Helper()
	l.c.NBCtl(t, "lb-add", name, vip, "10.0.0.12:"+port+",10.0.0.13:"+port, proto)
	l.c.NBCtl(t, "set", "load_balancer", name,
		`ip_port_mappings:10.0.0.12=vm2:10.0.0.254`, `ip_port_mappings:10.0.0.13=vm3:10.0.0.254`)
	l.c.NBCtl(t, "--id=@hc", "create", "Load_Balancer_Health_Check", `vip="`+vip+`"`,
		"options:interval=1", "options:timeout=1", "options:success_count=1", "options:failure_count=2",
		"--", "add", "Load_Balancer", name, "health_check", "@hc")
	l.c.NBCtl(t, "--wait=hv", "ls-lb-add", "ls0", name)
}

func (l *svcLab) status(t *testing.T, ip, proto string) string {
	return strings.TrimSpace(l.c.SBCtl(t, "--bare", "--columns=status", "find", "Service_Monitor", "ip="+ip, "protocol="+proto))
}

// waitStatus waits for the monitor of ip and proto to show want, then for
// northd and the chassis to have acted on it; it returns how long the
// status took.
func (l *svcLab) waitStatus(t *testing.T, ip, proto, want string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := lab.WaitFor(30*time.Second, "Service_Monitor "+ip+" "+proto+" "+want, func() bool { return l.status(t, ip, proto) == want }); err != nil {
		t.Fatalf("%v (status %q; Service_Monitor:\n%s)", err, l.status(t, ip, proto), l.c.SBCtl(t, "list", "Service_Monitor"))
	}
	took := time.Since(start).Round(10 * time.Millisecond)
	t.Logf("Service_Monitor %s %s %s after %v", ip, proto, want, took)
	l.c.NBCtl(t, "--wait=hv", "sync")
	return took
}

// noHalfOpen checks that every SYN-ACK the backends sent was answered
// with a RST: no SYN-RECV connection is left (one may be caught between
// its SYN-ACK and the RST: look thrice; without RSTs they stay a minute).
func (l *svcLab) noHalfOpen(t *testing.T, vms ...string) {
	t.Helper()
	for _, vm := range vms {
		var out string
		for range 3 {
			var err error
			out, err = run(context.Background(), nil, inNS(l.vms[vm].NS, "ss", "-Htn", "state", "syn-recv")...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) == "" {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if strings.TrimSpace(out) != "" {
			t.Errorf("%s has half-open connections:\n%s", vm, out)
		}
	}
}

// TestGovnChassisServiceMonitor: a switch load balancer with a health
// check and two backends on two govn chassis. Each chassis probes its
// backend and writes the Service_Monitor status; a backend whose server
// stops goes offline and the VIP reaches only the other; started again,
// it is online and the VIP reaches both. A UDP health check: the backend
// that listens is online, the other (ICMP port unreachable) offline.
//
// It runs with the real ovn-northd and with govn northd (govn alone).
func TestGovnChassisServiceMonitor(t *testing.T) {
	t.Run("ovn-northd", func(t *testing.T) { serviceMonitorScenario(t, govnChassisCluster(t, 2)) })
	t.Run("govn-northd", func(t *testing.T) {
		if why := Available(); why != "" {
			t.Skip(why)
		}
		var govn govnBinary
		t.Cleanup(govn.remove)
		bin := govn.get(t)
		govnHas(t, bin, "chassis")
		govnHas(t, bin, "northd")
		g := GovnChassis{Argv: []string{bin, "chassis"}}
		serviceMonitorScenario(t, New(t, Options{Hypervisors: 2, Northd: NorthdCommand{Argv: []string{bin, "northd"}},
			Chassis: func(int) Chassis { return g }}))
	})
}

func serviceMonitorScenario(t *testing.T, c *Cluster) {
	l := newSvcLab(t, c)
	vm2Server := l.serveHTTP(t, "vm2", "http-80")
	l.serveHTTP(t, "vm3", "http-80")
	l.healthChecked(t, "lb0", "172.16.0.100:80", "80", "tcp")
	_, err := l.tl.UDPServe(t, l.c.Dir, l.vms["vm2"].NS, "vm-vm2/udp-5353", 5353, "vm2")
	must(t, err)
	l.healthChecked(t, "lb1", "172.16.0.100:53", "5353", "udp")

	l.waitStatus(t, "10.0.0.12", "tcp", "online")
	l.waitStatus(t, "10.0.0.13", "tcp", "online")
	l.waitStatus(t, "10.0.0.12", "udp", "online")
	l.waitStatus(t, "10.0.0.13", "udp", "offline")
	l.noHalfOpen(t, "vm2", "vm3")
	vm1 := l.vms["vm1"]
	if missing := curlUntilAll(t, vm1, "http://172.16.0.100/", []string{"vm2", "vm3"}); len(missing) > 0 {
		t.Fatalf("backends %v never answered the VIP", missing)
	}

	vm2Server.Stop()
	l.waitStatus(t, "10.0.0.12", "tcp", "offline")
	if got := l.status(t, "10.0.0.13", "tcp"); got != "online" {
		t.Errorf("vm3's monitor is %q while its server runs", got)
	}
	for i := range 10 {
		body, err := vm1.Curl("http://172.16.0.100/")
		if err != nil || strings.TrimSpace(body) != "vm3" {
			t.Errorf("request %d to the VIP with vm2 offline: %q, %v", i+1, body, err)
		}
	}

	l.serveHTTP(t, "vm2", "http-80-again")
	l.waitStatus(t, "10.0.0.12", "tcp", "online")
	if missing := curlUntilAll(t, vm1, "http://172.16.0.100/", []string{"vm2", "vm3"}); len(missing) > 0 {
		t.Fatalf("backends %v never answered the VIP after vm2 came back", missing)
	}
}

// TestServiceMonitorDifferential: the same health checks with vm2 on govn
// chassis and vm3 on the real ovn-controller: both chassis find the same
// statuses (TCP and UDP, servers up, down, up again), in comparable
// times, which are logged, and their probes arrive alike field by field
// (found by it: ovn-controller's have TTL 63 and DF, its UDP datagram 8
// zero bytes).
func TestServiceMonitorDifferential(t *testing.T) {
	l := newSvcLab(t, govnChassisMix(t, 2, 2)) // hv1 govn chassis, hv2 the real one
	servers := []*lab.Daemon{l.serveHTTP(t, "vm2", "http-80"), l.serveHTTP(t, "vm3", "http-80")}
	l.healthChecked(t, "lb0", "172.16.0.100:80", "80", "tcp")
	l.healthChecked(t, "lb1", "172.16.0.100:53", "5353", "udp") // nobody listens
	// took waits for both monitors to show want, timing each from the
	// same start.
	took := func(want string) {
		t.Helper()
		start := time.Now()
		at := map[string]time.Duration{}
		err := lab.WaitFor(30*time.Second, "both TCP monitors "+want, func() bool {
			for _, ip := range []string{"10.0.0.12", "10.0.0.13"} {
				if _, ok := at[ip]; !ok && l.status(t, ip, "tcp") == want {
					at[ip] = time.Since(start).Round(10 * time.Millisecond)
				}
			}
			return len(at) == 2
		})
		if err != nil {
			t.Fatalf("%v: %v (Service_Monitor:\n%s)", err, at, l.c.SBCtl(t, "list", "Service_Monitor"))
		}
		t.Logf("tcp %s after: govn chassis %v, ovn-controller %v", want, at["10.0.0.12"], at["10.0.0.13"])
		l.c.NBCtl(t, "--wait=hv", "sync")
	}
	took("online")
	for _, ip := range []string{"10.0.0.12", "10.0.0.13"} {
		l.waitStatus(t, ip, "udp", "offline")
	}
	// The probes themselves, as the backends receive them: the same
	// but for what each probe makes up (source port, sequence number,
	// IP id, checksums).
	probes := map[string]map[string]string{}
	for _, vm := range []string{"vm2", "vm3"} {
		for _, proto := range []int{6, 17} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, err := l.vms[vm].Command(ctx, "python3", "-c", probeCapturePy, fmt.Sprint(proto)).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("capturing %s's probe (protocol %d): %v: %s", vm, proto, err, out)
			}
			pkt, err := hex.DecodeString(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range probeFields(t, pkt) {
				if probes[k] == nil {
					probes[k] = map[string]string{}
				}
				probes[k][vm] = v
			}
		}
	}
	for k, v := range probes {
		if v["vm2"] != v["vm3"] {
			t.Errorf("probe %s: govn chassis %s, ovn-controller %s", k, v["vm2"], v["vm3"])
		}
	}
	l.noHalfOpen(t, "vm2")
	for _, s := range servers {
		s.Stop()
	}
	took("offline")
	l.serveHTTP(t, "vm2", "http-80-again")
	l.serveHTTP(t, "vm3", "http-80-again")
	took("online")
}

// probeCapturePy prints, in hex, the first frame of IP protocol argv[1]
// from 10.0.0.254 the VM's eth0 receives.
const probeCapturePy = `import socket,sys
s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0800));s.bind(('eth0',0x0800));s.settimeout(15)
p=int(sys.argv[1])
while True:
    d=s.recv(2000)
    if len(d)>=34 and d[23]==p and d[26:30]==bytes([10,0,0,254]): print(d.hex()); sys.exit(0)`

// probeFields names the fields of a probe frame that do not vary from
// probe to probe, by its protocol.
func probeFields(t *testing.T, f []byte) map[string]string {
	t.Helper()
	ihl := int(f[14]&0xf) * 4
	if len(f) < 14+ihl+8 {
		t.Fatalf("probe of %d bytes", len(f))
	}
	proto := map[byte]string{6: "tcp", 17: "udp"}[f[23]]
	l4 := f[14+ihl:]
	m := map[string]string{
		"eth.src":       hex.EncodeToString(f[6:12]),
		"eth.dst":       hex.EncodeToString(f[0:6]),
		"ip.ihl/tos":    hex.EncodeToString(f[14:16]),
		"ip.len":        fmt.Sprint(int(f[16])<<8 | int(f[17])),
		"ip.flags/frag": hex.EncodeToString(f[20:22]),
		"ip.ttl":        fmt.Sprint(f[22]),
		"dst port":      hex.EncodeToString(l4[2:4]),
	}
	if proto == "tcp" && len(l4) >= 20 {
		m["tcp.ack"] = hex.EncodeToString(l4[8:12])
		m["tcp.off/flags"] = hex.EncodeToString(l4[12:14])
		m["tcp.window"] = hex.EncodeToString(l4[14:16])
		m["tcp.urg"] = hex.EncodeToString(l4[18:20])
		m["tcp.options"] = hex.EncodeToString(l4[20 : int(l4[12]>>4)*4])
	} else {
		m["udp.len/payload"] = hex.EncodeToString(l4[4:6]) + " " + hex.EncodeToString(l4[8:])
	}
	out := map[string]string{}
	for k, v := range m {
		if k == "eth.dst" {
			continue // each backend's own MAC
		}
		out[proto+" "+k] = v
	}
	return out
}
