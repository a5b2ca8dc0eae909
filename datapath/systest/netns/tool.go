package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"

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
