package ctbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/govn/govn/datapath/conntrack"
	"golang.org/x/sys/unix"
)

// OVSReport is the side-by-side zone flush on OVS's userspace datapath.
type OVSReport struct {
	Method        string  `json:"method"`
	FillSeconds   float64 `json:"fill_seconds"`
	PacketsSent   int     `json:"packets_sent"`
	Entries       int     `json:"entries"` // all zones, before the flushes
	Zones         int     `json:"zones"`
	ZoneEntries   int     `json:"zone_entries"` // entries of each flushed zone
	Flush         Dist    `json:"flush"`        // dpctl/flush-conntrack zone=N over unixctl, one call each
	FlushEmpty    Dist    `json:"flush_empty"`  // same call for a zone without entries
	GovnFlush     Dist    `json:"govn_flush"`   // govn, same layout
	GovnEmpty     Dist    `json:"govn_flush_empty"`
	Ratio         float64 `json:"ratio_p50"` // OVS p50 / govn p50, same zone flush
	RatioNetOfRPC float64 `json:"ratio_p50_net_of_rpc"`
}

const (
	ovsZones   = 10
	ovsFlushes = 5
)

// runOVS brings up ovsdb-server and ovs-vswitchd (userspace datapath) in a
// private network namespace, fills conntrack by sending UDP packets with many
// source addresses and ports into the bridge's internal port through a
// ct(commit,zone=N) flow, and times dpctl/flush-conntrack of a zone.
func runOVS(ctx context.Context, opts *Options) (*OVSReport, string, error) {
	if os.Geteuid() != 0 {
		return nil, "needs root (network namespace, raw socket)", nil
	}
	for _, bin := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, bin + " not installed", nil
		}
	}
	schema := "/usr/share/openvswitch/vswitch.ovsschema"
	if _, err := os.Stat(schema); err != nil {
		return nil, "vswitch.ovsschema not found", nil
	}
	dir, err := os.MkdirTemp("", "govn-ctbench-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	ns := fmt.Sprintf("govnct%d", os.Getpid())
	env := append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVS_DBDIR="+dir, "OVS_SYSCONFDIR="+dir)
	run := func(name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run("ip", "netns", "add", ns); err != nil {
		return nil, "", err
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	db := filepath.Join(dir, "conf.db")
	sock := filepath.Join(dir, "db.sock")
	if _, err := run("ovsdb-tool", "create", db, schema); err != nil {
		return nil, "", err
	}
	var procs []*exec.Cmd
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Process.Kill()
			procs[i].Wait()
		}
	}()
	start := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		procs = append(procs, cmd)
		return nil
	}
	if err := start("ovsdb-server", db, "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, "ovsdb.ctl"),
		"--pidfile="+filepath.Join(dir, "ovsdb.pid"), "--log-file="+filepath.Join(dir, "ovsdb.log"), "--no-chdir"); err != nil {
		return nil, "", err
	}
	if err := waitFor(ctx, 10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		return nil, "", fmt.Errorf("ovsdb-server socket: %w", err)
	}
	vsctl := []string{"--db=unix:" + sock, "--timeout=20"}
	if _, err := run("ovs-vsctl", append(vsctl, "--no-wait", "init")...); err != nil {
		return nil, "", err
	}
	ctl := filepath.Join(dir, "vswitchd.ctl")
	if err := start("ip", "netns", "exec", ns, "ovs-vswitchd", "unix:"+sock, "--disable-system",
		"--unixctl="+ctl, "--pidfile="+filepath.Join(dir, "vswitchd.pid"),
		"--log-file="+filepath.Join(dir, "vswitchd.log"), "--no-chdir"); err != nil {
		return nil, "", err
	}
	if _, err := run("ovs-vsctl", append(vsctl, "add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")...); err != nil {
		return nil, "", err
	}
	inNS := func(args ...string) (string, error) {
		return run("ip", append([]string{"netns", "exec", ns}, args...)...)
	}
	if err := waitFor(ctx, 20*time.Second, func() bool { _, err := inNS("ip", "link", "show", "br0"); return err == nil }); err != nil {
		return nil, "", fmt.Errorf("bridge port br0 did not appear: %w", err)
	}
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "set", "br0", "up"},
		{"ip", "addr", "add", "10.77.0.1/16", "dev", "br0"},
		{"ip", "neigh", "replace", "10.77.0.2", "lladdr", "02:00:00:00:00:02", "dev", "br0", "nud", "permanent"},
	} {
		if _, err := inNS(args...); err != nil {
			return nil, "", err
		}
	}
	var flows strings.Builder
	flows.WriteString("priority=0,actions=drop\n")
	for z := 1; z <= ovsZones; z++ {
		fmt.Fprintf(&flows, "priority=10,udp,tp_dst=%d,actions=ct(commit,zone=%d)\n", 2000+z, z)
	}
	flowFile := filepath.Join(dir, "flows.txt")
	if err := os.WriteFile(flowFile, []byte(flows.String()), 0o644); err != nil {
		return nil, "", err
	}
	if _, err := run("ovs-ofctl", "replace-flows", "br0", flowFile); err != nil {
		return nil, "", err
	}
	rpc, err := dialUnixctl(ctl)
	if err != nil {
		return nil, "", err
	}
	defer rpc.Close()

	rep := &OVSReport{Zones: ovsZones,
		Method: "raw-socket UDP packets (many source addresses and ports) into br0's internal port of a netdev bridge; flows udp,tp_dst=2000+N -> ct(commit,zone=N); flush via unixctl dpctl/flush-conntrack zone=N"}
	opts.logf("filling OVS conntrack for up to %v...", opts.OVSFill)
	t0 := time.Now()
	sent, err := sendInNS(ctx, ns, opts.OVSFill, func() int {
		s, err := rpc.call("dpctl/ct-get-nconns")
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.TrimSpace(s))
		return n
	})
	if err != nil {
		return nil, "", err
	}
	rep.FillSeconds = time.Since(t0).Seconds()
	rep.PacketsSent = sent
	time.Sleep(500 * time.Millisecond)
	s, err := rpc.call("dpctl/ct-get-nconns")
	if err != nil {
		return nil, "", err
	}
	rep.Entries, _ = strconv.Atoi(strings.TrimSpace(s))
	rep.ZoneEntries = rep.Entries / ovsZones
	opts.logf("OVS has %d conntrack entries after %d packets in %.1fs", rep.Entries, sent, rep.FillSeconds)
	if rep.Entries == 0 {
		return nil, "", errors.New("no conntrack entries were created in OVS")
	}

	var flush, empty []time.Duration
	timeCall := func(args ...string) (time.Duration, error) {
		t := time.Now()
		_, err := rpc.call("dpctl/flush-conntrack", args...)
		return time.Since(t), err
	}
	for z := 1; z <= ovsFlushes; z++ {
		d, err := timeCall(fmt.Sprintf("zone=%d", 100+z))
		if err != nil {
			return nil, "", err
		}
		empty = append(empty, d)
		d, err = timeCall(fmt.Sprintf("zone=%d", z))
		if err != nil {
			return nil, "", err
		}
		flush = append(flush, d)
	}
	rep.Flush, rep.FlushEmpty = dist(flush), dist(empty)

	// govn with the same layout: the same number of entries, in the same
	// zones, flushed the same way.
	tr := conntrack.New(conntrack.Config{})
	defer tr.Close()
	pkts := make([][]byte, rep.ZoneEntries)
	for i := range pkts {
		pkts[i] = udpPacket(i)
	}
	fill(tr, pkts, 1, ovsZones, 1)
	var gf, ge []time.Duration
	for z := 1; z <= ovsFlushes; z++ {
		t := time.Now()
		tr.Flush(uint16(100 + z))
		ge = append(ge, time.Since(t))
		reclaimed := tr.Stats().Reclaimed
		t = time.Now()
		tr.Flush(uint16(z))
		gf = append(gf, time.Since(t))
		waitReclaimed(tr, reclaimed+int64(len(pkts)))
	}
	rep.GovnFlush, rep.GovnEmpty = dist(gf), dist(ge)
	if rep.GovnFlush.P50 > 0 {
		rep.Ratio = rep.Flush.P50 / rep.GovnFlush.P50
		rep.RatioNetOfRPC = max(rep.Flush.P50-rep.FlushEmpty.P50, 0) / rep.GovnFlush.P50
	}
	return rep, "", nil
}

func waitFor(ctx context.Context, d time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// sendInNS sends UDP packets from a raw socket opened inside namespace ns,
// for at most d, pacing itself on the entry count OVS reports so the tap
// queue does not overflow. It returns the number of packets sent.
func sendInNS(ctx context.Context, ns string, d time.Duration, nconns func() int) (int, error) {
	fd, err := rawSocketIn(ns)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	dst := &unix.SockaddrInet4{Addr: [4]byte{10, 77, 0, 2}}
	pkt := make([]byte, 28)
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], 28)
	pkt[8] = 64
	pkt[9] = unix.IPPROTO_UDP
	copy(pkt[16:], dst.Addr[:])
	binary.BigEndian.PutUint16(pkt[24:], 8)
	deadline := time.Now().Add(d)
	sent, burst := 0, 2000
	stall := 0
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil && i < 60000*250; {
		before := nconns()
		for range burst {
			// Entry i: source 10.78.x.y, source port from i, zone from i.
			src := i / 60000
			copy(pkt[12:], []byte{10, 78, byte(src >> 8), byte(src)})
			binary.BigEndian.PutUint16(pkt[20:], uint16(1024+i%60000))
			binary.BigEndian.PutUint16(pkt[22:], uint16(2001+i%ovsZones))
			if err := unix.Sendto(fd, pkt, 0, dst); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return sent, fmt.Errorf("sendto: %w", err)
			}
			i++
			sent++
		}
		// Let OVS catch up: its main thread reads the tap device.
		for range 100 {
			if n := nconns(); n < 0 || n >= before+burst*9/10 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if after := nconns(); after < before+burst/2 {
			stall++
			if stall > 20 {
				return sent, nil
			}
		}
	}
	return sent, nil
}

// rawSocketIn opens an IPPROTO_RAW socket in network namespace ns; the
// socket stays in that namespace after the thread returns to its own.
func rawSocketIn(ns string) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open own netns: %w", err)
	}
	defer unix.Close(self)
	target, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return -1, fmt.Errorf("setns %s: %w", ns, err)
	}
	fd, serr := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the other namespace: keep it locked so
		// it dies with its goroutine instead of running others.
		runtime.LockOSThread()
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("setns back: %w", err)
	}
	if serr != nil {
		return -1, fmt.Errorf("raw socket: %w", serr)
	}
	return fd, nil
}

// unixctl is a JSON-RPC connection to an OVS daemon's control socket.
type unixctl struct {
	conn net.Conn
	r    *bufio.Reader
	dec  *json.Decoder
	id   int
}

func dialUnixctl(path string) (*unixctl, error) {
	var c net.Conn
	var err error
	for range 200 {
		if c, err = net.Dial("unix", path); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	return &unixctl{conn: c, dec: json.NewDecoder(c)}, nil
}

func (u *unixctl) Close() error { return u.conn.Close() }

func (u *unixctl) call(method string, params ...string) (string, error) {
	u.id++
	if params == nil {
		params = []string{}
	}
	req, _ := json.Marshal(map[string]any{"method": method, "params": params, "id": u.id})
	u.conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := u.conn.Write(req); err != nil {
		return "", fmt.Errorf("unixctl %s: %w", method, err)
	}
	var resp struct {
		Result any `json:"result"`
		Error  any `json:"error"`
	}
	if err := u.dec.Decode(&resp); err != nil {
		return "", fmt.Errorf("unixctl %s: %w", method, err)
	}
	if resp.Error != nil {
		return "", fmt.Errorf("unixctl %s: %v", method, resp.Error)
	}
	s, _ := resp.Result.(string)
	return s, nil
}
