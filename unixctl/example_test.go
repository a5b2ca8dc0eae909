package unixctl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/govn/govn/unixctl"
)

// A daemon serves its commands; a client (govn appctl, ovs-appctl) calls
// them.
func Example() {
	dir, _ := os.MkdirTemp("", "unixctl-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "daemon.ctl")

	l, err := unixctl.Listen(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmds := map[string]unixctl.Command{
		"greet": func(args []string) (string, error) {
			if len(args) != 1 {
				return "", fmt.Errorf("greet: want one name, have %d", len(args))
			}
			return "hello, " + args[0] + "\n", nil
		},
		"exit": func([]string) (string, error) { cancel(); return "", nil },
	}
	done := make(chan error)
	go func() { done <- unixctl.Serve(ctx, l, cmds) }()

	out, _ := unixctl.Call(ctx, path, "greet", "world")
	fmt.Print(out)
	_, err = unixctl.Call(ctx, path, "greet")
	fmt.Println("error:", err)
	out, _ = unixctl.Call(ctx, path, "list-commands")
	fmt.Print(strings.ReplaceAll(out, "  ", "- "))
	unixctl.Call(context.Background(), path, "exit")
	fmt.Println("Serve returned", <-done)
	// Output:
	// hello, world
	// error: greet: want one name, have 0
	// The available commands are:
	// - exit
	// - greet
	// - list-commands
	// Serve returned <nil>
}
