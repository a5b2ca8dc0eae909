package unixctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// maxReply is the largest reply Call accepts.
const maxReply = 1 << 30

// CommandError is a command's failure as the daemon reported it: the
// text ovs-appctl would print to stderr.
type CommandError struct {
	Command string
	Message string
}

func (e *CommandError) Error() string { return e.Message }

// Call connects to the control socket at path, runs command with args and
// returns its output. A failure of the command itself is a *CommandError;
// other errors say what failed to reach the daemon.
func Call(ctx context.Context, path, command string, args ...string) (string, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return "", fmt.Errorf("unixctl: connect to %s: %w", path, err)
	}
	// Dumps of a busy datapath run to tens of megabytes.
	c := jsonrpc.NewConn(ctx, nc, jsonrpc.Options{MaxMessageSize: maxReply})
	defer c.Close()
	if args == nil {
		args = []string{} // ovs-appctl's daemons want an array, never null
	}
	raw, err := c.CallRaw(ctx, command, args)
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		msg := je.Name()
		if msg == "" {
			msg = string(je.Value)
		}
		return "", &CommandError{Command: command, Message: msg}
	}
	if err != nil {
		return "", fmt.Errorf("unixctl: %s: %w", path, err)
	}
	var out string
	if string(raw) == "null" {
		return "", nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		// Not text: show the JSON as the daemon sent it.
		return string(raw) + "\n", nil
	}
	return out, nil
}
