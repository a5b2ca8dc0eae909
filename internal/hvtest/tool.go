package hvtest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/govn/govn/internal/lab"
)

// toolEnv marks a test binary re-executed inside a VM to run a tool.
const toolEnv = "GOVN_HVTEST_TOOL"

// RunToolIfAsked runs a VM tool (lab.RunTool) and exits if this process
// is a test binary that a VM helper re-executed; otherwise it returns at
// once. Call it first thing in TestMain of every package that uses
// VM.HTTPServe, VM.Curl or VM.DHCP.
func RunToolIfAsked() {
	if os.Getenv(toolEnv) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := lab.RunTool(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// vmTool is how VMs run lab's tools: this test binary, re-executed with
// toolEnv set.
func vmTool() (lab.Tool, error) {
	self, err := os.Executable()
	if err != nil {
		return lab.Tool{}, fmt.Errorf("hvtest: %w", err)
	}
	return lab.Tool{Argv: []string{self}, Env: []string{toolEnv + "=1"}}, nil
}
