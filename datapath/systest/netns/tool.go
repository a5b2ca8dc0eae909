package netns

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/govn/govn/datapath/systest/traffic"
)

// toolEnv marks a re-executed test binary that must run a traffic tool.
const toolEnv = "GOVN_NETNS_TRAFFIC_TOOL"

// RunToolIfAsked runs a traffic tool and exits if this process is a test
// binary re-executed by NS.Tool. Call it first thing in TestMain.
func RunToolIfAsked() {
	if os.Getenv(toolEnv) == "" {
		return
	}
	if err := traffic.Main(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Tool returns a command that runs a traffic tool (see traffic.Main) inside
// the namespace by re-executing the current test binary, whose TestMain
// must call RunToolIfAsked.
func (n *NS) Tool(ctx context.Context, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("netns tool: %w", err)
	}
	cmd := n.Command(ctx, append([]string{self}, args...)...)
	cmd.Env = append(os.Environ(), toolEnv+"=1")
	return cmd, nil
}

// Serve starts a traffic tool that listens on the TCP address addr (given
// as its only argument) inside the namespace, stops it when the test ends,
// and returns once the tool listens. It polls instead of sleeping: a
// re-executed test binary may take long to start on a busy machine.
func (n *NS) Serve(t testing.TB, tool, addr string) {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatalf("netns serve %s: %v", tool, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := n.Tool(ctx, tool, addr)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("netns serve %s: %v", tool, err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for !traffic.Listening(cmd.Process.Pid, "tcp", ap.Port()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s: not listening on %s after 20 s", tool, n.Name, addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
