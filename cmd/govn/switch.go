package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/govn/govn/datapath/switchd"
)

// runSwitch implements "govn switch": the userspace datapath on real
// ports, with an ovs-appctl control socket (package switchd).
func runSwitch(ctx context.Context, args []string) error {
	opts, err := switchd.ParseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(nil, switchd.Usage)
		return errHelp
	}
	if err != nil {
		return fmt.Errorf("%w: %v\n%s", errUsage, err, switchd.Usage)
	}
	return switchd.Main(ctx, opts, slog.Default())
}
