package systest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/packet"
	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/datapath/systest/netns"
)

// switchEnv makes a re-executed test binary run govn switch with its
// arguments: TestTunnels starts one in each chassis namespace.
const switchEnv = "GOVN_SYSTEST_SWITCH"

// init runs govn switch instead of the tests when asked; it must come
// before TestMain, which belongs to the rest of the package.
func init() {
	if os.Getenv(switchEnv) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts, err := switchd.ParseArgs(os.Args[1:])
	if err == nil {
		err = switchd.Main(ctx, opts, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// chassis is a namespace with an underlay address and a govn switch
// whose port 1 is a host's veth and port 9 a tunnel.
type chassis struct {
	ns       *netns.NS
	underlay string // device name in ns
	ip       string
	host     *netns.Veth
}

// TestTunnels joins two chassis namespaces with a veth (the underlay) and
// gives each a host namespace behind a govn switch process. The switches
// encapsulate toward each other as OVN's physical flows do (set tun_id,
// tun_dst, output to the tunnel port; on receipt match the tunnel fields,
// before and after a conntrack recirculation): ping and a TCP transfer
// between the hosts must work, and a raw capture on the underlay must see
// Geneve or VXLAN datagrams with the VNI.
func TestTunnels(t *testing.T) {
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	for i, c := range []struct {
		kind string
		port uint16
		md   string // tun_metadata0 to carry, Geneve only
	}{
		{switchd.KindGeneve, packet.GenevePort, "0x10002"},
		{switchd.KindVXLAN, packet.VXLANPort, ""},
	} {
		t.Run(c.kind, func(t *testing.T) {
			vni := uint64(0x5000 + i)
			cs := underlay(t, i)
			for j, ch := range cs {
				startSwitch(t, ch, cs[1-j], c.kind, vni, c.md)
			}
			capture := captureTunnel(t, cs[1].ns, cs[1].underlay, c.port)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hosts := [2]host{{Veth: cs[0].host}, {Veth: cs[1].host}}
			snmpBefore := udpCounters(t, cs[1].ns)
			run(t, ctx, hosts[0], "ping", hosts[1].Addr, "3")
			hosts[1].NS.Serve(t, "tcp-sink", hosts[1].Addr+":5003")
			out := run(t, ctx, hosts[0], "tcp-send", hosts[1].Addr+":5003", "8000000")
			t.Logf("tcp-send over %s: %s", c.kind, strings.TrimSpace(out))

			// The receiving chassis' stack delivered UDP datagrams to its
			// only UDP socket, the switch's tunnel port, and none to a
			// closed port. The tunnel ports send a TCP segment run as
			// one UDP_SEGMENT message, which crosses the veth and
			// reaches the socket (UDP_GRO) as one frame of up to 64
			// datagrams: 8 MB are at least about 130 of them. What goes
			// back is the receiver's ACKs, which its stack sends for
			// joined segments (one for 64 KB or more), so fewer: 81 in
			// one CI run.
			snmp := udpCounters(t, cs[1].ns)
			in, out2 := snmp["InDatagrams"]-snmpBefore["InDatagrams"], snmp["OutDatagrams"]-snmpBefore["OutDatagrams"]
			if in < 100 || out2 < 20 || snmp["NoPorts"] != snmpBefore["NoPorts"] {
				t.Errorf("chassis UDP counters: %d in, %d out, NoPorts %d -> %d", in, out2, snmpBefore["NoPorts"], snmp["NoPorts"])
			}
			got := capture()
			t.Logf("%s: chassis UDP %d in / %d out; capture on the underlay: %+v", c.kind, in, out2, got)
			if got.frames < 100 || got.badVNI != 0 || got.undecodable != 0 {
				t.Errorf("underlay capture: %+v, want >= 100 %s frames with VNI %#x", got, c.kind, vni)
			}
			if c.md != "" && got.withMetadata != got.frames {
				t.Errorf("only %d of %d Geneve frames carried OVN's option", got.withMetadata, got.frames)
			}
			if got.vni != vni {
				t.Errorf("VNI %#x on the wire, want %#x", got.vni, vni)
			}
		})
	}
}

// underlay makes two chassis namespaces joined by a veth with addresses
// 192.168.(78+i).1 and .2, and a host namespace for each whose veth's
// outer end is in the chassis.
func underlay(t *testing.T, i int) [2]*chassis {
	t.Helper()
	var cs [2]*chassis
	a, b := netns.UniqueName("gvua"), netns.UniqueName("gvub")
	netns.Run(t, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	for j, dev := range []string{a, b} {
		ch := &chassis{ns: netns.New(t), underlay: dev, ip: fmt.Sprintf("192.168.%d.%d", 78+i, j+1)}
		netns.Run(t, "ip", "link", "set", dev, "netns", ch.ns.Name)
		ch.ns.Run(t, "ip", "addr", "add", ch.ip+"/24", "dev", dev)
		ch.ns.Run(t, "ip", "link", "set", dev, "up")
		hostNS := netns.New(t)
		mac := [6]byte{2, 0, 0, 0, byte(0x82 + i), byte(j + 1)}
		ch.host = netns.NewVeth(t, hostNS, fmt.Sprintf("10.%d.0.%d/24", 82+i, j+1), netHW(mac))
		// Room for the tunnel header in the underlay's 1500 bytes, as
		// OVN gives its VMs a smaller MTU.
		hostNS.Run(t, "ip", "link", "set", ch.host.Inner, "mtu", "1400")
		netns.Run(t, "ip", "link", "set", ch.host.Outer, "netns", ch.ns.Name)
		ch.ns.Run(t, "ip", "link", "set", ch.host.Outer, "up")
		cs[j] = ch
	}
	return cs
}

// startSwitch runs govn switch in ch's namespace with the host's veth as
// port 1 and a tunnel of kind toward peer as port 9, until the test ends.
func startSwitch(t *testing.T, ch, peer *chassis, kind string, vni uint64, md string) {
	t.Helper()
	setMD, matchMD := "", ""
	if md != "" {
		setMD, matchMD = ",set_field:"+md+"->tun_metadata0", ",tun_metadata0="+md
	}
	// IP from the tunnel goes through conntrack first, and table 1
	// matches the tunnel fields again after the recirculation: they must
	// survive it, as OVN's pipeline needs them after its ct() actions.
	tun := fmt.Sprintf("in_port=9,tun_id=%#x,tun_src=%s,tun_dst=%s%s", vni, peer.ip, ch.ip, matchMD)
	flows := fmt.Sprintf(`# OVN's physical flows, reduced to one logical switch
table=0,priority=100,in_port=1 actions=set_field:%#x->tun_id,set_field:%s->tun_dst%s,output:9
table=0,priority=100,%s,ip actions=ct(table=1,zone=1)
table=0,priority=90,%s actions=output:1
table=1,priority=100,%s,ct_state=+trk,ip actions=ct(commit,zone=1),output:1
`, vni, peer.ip, setMD, tun, tun, tun)
	file := filepath.Join(t.TempDir(), "flows")
	if err := os.WriteFile(file, []byte(flows), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := ch.ns.Command(context.Background(), self, "--unixctl=", "--flows="+file,
		"--port", ch.host.Outer+":1", "--port", "tun:9="+kind+":"+ch.ip)
	cmd.Env = append(os.Environ(), switchEnv+"=1")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("switch in %s:\n%s", ch.ns.Name, logs.String())
		}
	})
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), "switch running"); {
		select {
		case <-exited:
			t.Fatalf("switch in %s exited:\n%s", ch.ns.Name, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("switch in %s did not start:\n%s", ch.ns.Name, logs.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// udpCounters returns the Udp line of /proc/net/snmp in ns.
func udpCounters(t *testing.T, ns *netns.NS) map[string]uint64 {
	t.Helper()
	var names, values []string
	for _, line := range strings.Split(ns.Run(t, "cat", "/proc/net/snmp"), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "Udp:" {
			if names == nil {
				names = f[1:]
			} else {
				values = f[1:]
			}
		}
	}
	m := map[string]uint64{}
	for i := range min(len(names), len(values)) {
		m[names[i]], _ = strconv.ParseUint(values[i], 10, 64)
	}
	return m
}

// captured sums up the tunnel frames a capture saw.
type captured struct {
	frames       int    // datagrams to the tunnel's UDP port
	undecodable  int    // of which not a valid tunnel header
	vni          uint64 // the VNI of the last frame
	badVNI       int    // frames whose VNI differs from the first's
	withMetadata int    // Geneve frames with OVN's option
}

// captureTunnel captures the frames dev receives in ns (a raw AF_PACKET
// socket opened inside the namespace) and decodes those to UDP port
// udpPort with package packet's DecapFrame. Calling the returned function
// stops the capture and returns what it saw.
func captureTunnel(t *testing.T, ns *netns.NS, dev string, udpPort uint16) func() captured {
	t.Helper()
	fd, err := packetSocketIn(ns.Name, dev)
	if err != nil {
		t.Fatalf("capture on %s in %s: %v", dev, ns.Name, err)
	}
	var once sync.Once
	var c captured
	stop, done := make(chan struct{}), make(chan struct{})
	closeFd := func() { once.Do(func() { close(stop); <-done; unix.Close(fd) }) }
	t.Cleanup(closeFd)
	go func() {
		defer close(done)
		var first uint64
		buf := make([]byte, 65536)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // the receive timeout: look at stop
			}
			var outer flow.Key
			off := packet.Extract(buf[:n], &outer)
			if outer.Get(flow.NWProto) != packet.ProtoUDP || outer.Get(flow.TPDst) != uint64(udpPort) || off.L4 == 0 {
				continue
			}
			c.frames++
			var k flow.Key
			if _, _, err := packet.DecapFrame(buf[:n], &k); err != nil {
				c.undecodable++
				continue
			}
			c.vni = k.Get(flow.TunID)
			if c.frames-c.undecodable == 1 {
				first = c.vni
			} else if c.vni != first {
				c.badVNI++
			}
			if k.Get(flow.TunMetadata0) != 0 {
				c.withMetadata++
			}
		}
	}()
	return func() captured {
		closeFd()
		return c
	}
}

// packetSocketIn opens an AF_PACKET socket on dev in namespace name: the
// socket is made on a thread moved into the namespace and back, and stays
// in the namespace it was made in.
func packetSocketIn(name, dev string) (int, error) {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer unix.Close(orig)
	target, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("setns: %w", err)
	}
	fd, sockErr := func() (int, error) {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return -1, err
		}
		idx, err := ifindex(fd, dev)
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: idx}); err != nil {
			unix.Close(fd)
			return -1, err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
		return fd, nil
	}()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the namespace: let it die with the
		// goroutine rather than serve others.
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return fd, sockErr
}

func ifindex(fd int, dev string) (int, error) {
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, err
	}
	return int(ifr.Uint32()), nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
