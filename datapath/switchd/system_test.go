package switchd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/netns"
	"github.com/govn/govn/unixctl"
)

// runMainEnv makes a re-executed test binary run govn switch's entry point
// with its arguments instead of the tests.
const runMainEnv = "GOVN_SWITCHD_TEST_MAIN"

func TestMain(m *testing.M) {
	netns.RunToolIfAsked()
	if os.Getenv(runMainEnv) != "" {
		os.Exit(runMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runMain is what "govn switch" does with args.
func runMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	opts, err := ParseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := Main(ctx, opts, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSwitchProcess runs govn switch as a process on two namespaces' veths
// with flows from a file, pings across it and inspects it over the control
// socket.
func TestSwitchProcess(t *testing.T) {
	ns1, ns2 := netns.New(t), netns.New(t)
	v1 := netns.NewVeth(t, ns1, "10.81.0.1/24", "02:00:00:00:81:01")
	v2 := netns.NewVeth(t, ns2, "10.81.0.2/24", "02:00:00:00:81:02")
	dir := t.TempDir()
	flows := filepath.Join(dir, "switch.flows")
	if err := os.WriteFile(flows, []byte(`# a patch between the two ports, through table 1 for IP
table=0,priority=100,in_port=1,ip actions=goto_table:1
table=0,priority=50,in_port=1 actions=output:2
table=0,priority=50,in_port=2 actions=output:1
table=1,priority=100,ip,nw_dst=10.81.0.2 actions=output:2
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(dir, "run", "switch.ctl")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "--unixctl="+ctl, "--flows="+flows, "--port", v1.Outer, "--port", v2.Outer+":2")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("switch log:\n%s", logs.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(command string, args ...string) string {
		t.Helper()
		out, err := unixctl.Call(ctx, ctl, command, args...)
		if err != nil {
			t.Fatalf("%s: %v", command, err)
		}
		return out
	}
	// Wait for the control socket: the switch answers once its ports are
	// open and its flows loaded.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := unixctl.Call(ctx, ctl, "version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the switch's control socket did not answer within 20 s")
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the switch exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}

	ping, err := ns1.Tool(ctx, "ping", v2.Addr, "3")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := ping.CombinedOutput(); err != nil {
		t.Fatalf("ping across the switch: %v\n%s\ndatapath: %s", err, out, call("dpctl/show"))
	}

	mfs := call("dpctl/dump-flows", "reasons")
	hit := regexp.MustCompile(`(?m)^in_port=1,.*eth_type=0x800.*, packets:[1-9]\d*, bytes:[1-9]\d*, used:.*, actions:2$`)
	if !hit.MatchString(mfs) {
		t.Errorf("dpctl/dump-flows: no IPv4 megaflow from port 1 with packets:\n%s", mfs)
	}
	if !strings.Contains(mfs, "table 1 matched cookie=0x0, table=1, priority=100,eth_type=0x800,nw_dst=10.81.0.2, actions=output:2") {
		t.Errorf("dpctl/dump-flows reasons do not name table 1's rule:\n%s", mfs)
	}
	trace := call("ofproto/trace", "in_port=1,icmp,nw_src=10.81.0.1,nw_dst=10.81.0.2")
	for _, want := range []string{
		"0. cookie=0x0, table=0, priority=100,in_port=1,eth_type=0x800, actions=goto_table:1",
		"1. cookie=0x0, table=1, priority=100,eth_type=0x800,nw_dst=10.81.0.2, actions=output:2",
		"Datapath actions: 2",
	} {
		if !strings.Contains(trace, want) {
			t.Errorf("ofproto/trace: no %q in\n%s", want, trace)
		}
	}
	show := call("dpctl/show")
	for _, re := range []string{`port 1: ` + v1.Outer + ` \(afpacket\)\n    RX packets:[1-9]`, `port 2: ` + v2.Outer + ` \(afpacket\)\n    RX packets:[1-9]`, `lookups: hit:[1-9]\d* missed:[1-9]`} {
		if !regexp.MustCompile(re).MatchString(show) {
			t.Errorf("dpctl/show: no %s in\n%s", re, show)
		}
	}
	if bin, err := exec.LookPath("ovs-appctl"); err == nil {
		out, err := exec.CommandContext(ctx, bin, "-t", ctl, "dpctl/dump-flows").CombinedOutput()
		if err != nil || !hit.Match(out) {
			t.Errorf("ovs-appctl dpctl/dump-flows: %v\n%s", err, out)
		}
	}

	// exit stops the switch cleanly and removes its socket.
	call("exit")
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("switch exit status: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the switch did not exit after the exit command")
	}
	if _, err := os.Stat(ctl); err == nil {
		t.Error("the control socket is still there after exit")
	}
}

// TestMainInternalPort runs Main in this process with an internal port
// (a TAP device it creates) and a control socket: the device exists while
// the switch runs, dpctl/show lists it, and both go when ctx ends.
func TestMainInternalPort(t *testing.T) {
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun")
	}
	name := netns.UniqueName("gvint")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	ctl := filepath.Join(t.TempDir(), "switch.ctl")
	opts, err := ParseArgs([]string{"--unixctl=" + ctl, "--port", name + ":4=internal"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Main(ctx, opts, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Main did not return")
		}
	})
	var show string
	for deadline := time.Now().Add(10 * time.Second); ; {
		show, err = unixctl.Call(ctx, ctl, "dpctl/show")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("control socket: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(show, "port 4: "+name+" (internal)\n") {
		t.Errorf("dpctl/show does not list the internal port:\n%s", show)
	}
	if out, err := exec.Command("ip", "link", "show", name).CombinedOutput(); err != nil {
		t.Errorf("the internal port's device is missing: %v\n%s", err, out)
	}
	cancel()
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("Main: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Main did not return after its context ended")
	}
	if err := exec.Command("ip", "link", "show", name).Run(); err == nil {
		t.Error("the internal port's device outlived the switch")
	}
	if _, err := os.Stat(ctl); err == nil {
		t.Error("the control socket outlived the switch")
	}
}

// TestMainErrors checks that Main fails cleanly, leaving no socket, on a
// missing device, a bad flow file and a socket another switch holds.
func TestMainErrors(t *testing.T) {
	dir := t.TempDir()
	badFlows := filepath.Join(dir, "bad.flows")
	os.WriteFile(badFlows, []byte("in_port=1 actions=nosuch\n"), 0o644)
	ctl := filepath.Join(dir, "switch.ctl")
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"missing flow file", Options{Unixctl: ctl, Flows: filepath.Join(dir, "none")}, "no such file"},
		{"bad flow file", Options{Unixctl: ctl, Flows: badFlows}, "line 1"},
		{"missing device", Options{Unixctl: ctl, Ports: []PortSpec{{Name: "gvnodev0", Kind: KindAFPacket}}}, "gvnodev0"},
	}
	for _, tt := range tests {
		err := Main(t.Context(), tt.opts, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Main error %v, want one mentioning %q", tt.name, err, tt.want)
		}
		if _, err := os.Stat(ctl); err == nil {
			t.Errorf("%s: the control socket was left behind", tt.name)
		}
	}
	// A second switch on a live socket fails before touching devices.
	l, err := unixctl.Listen(ctl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go unixctl.Serve(ctx, l, nil)
	if err := Main(t.Context(), Options{Unixctl: ctl}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Errorf("second switch on a live socket: %v", err)
	}
}
