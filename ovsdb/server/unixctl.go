package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// UnixctlCommand is one command of the control socket: it gets the
// arguments and returns the text to print.
type UnixctlCommand func(args []string) (string, error)

// ServeUnixctl answers ovs-appctl style JSON-RPC requests on l (the
// --unixctl socket): each request's method is a command name and its
// params are string arguments. "list-commands" is built in.
func ServeUnixctl(ctx context.Context, l net.Listener, cmds map[string]UnixctlCommand) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	handler := func(ctx context.Context, c *jsonrpc.Conn, m *jsonrpc.Message) {
		if m.ID == nil {
			return
		}
		var args []string
		if len(m.Params) > 0 {
			if err := json.Unmarshal(m.Params, &args); err != nil {
				c.ReplyError(m.ID, "arguments must be strings")
				return
			}
		}
		if m.Method == "list-commands" {
			names := make([]string, 0, len(cmds))
			for n := range cmds {
				names = append(names, n)
			}
			sort.Strings(names)
			c.Reply(m.ID, "The available commands are:\n  "+strings.Join(names, "\n  ")+"\n")
			return
		}
		cmd, ok := cmds[m.Method]
		if !ok {
			c.ReplyError(m.ID, fmt.Sprintf("%q is not a valid command", m.Method))
			return
		}
		out, err := cmd(args)
		if err != nil {
			c.ReplyError(m.ID, err.Error())
			return
		}
		c.Reply(m.ID, out)
	}
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || !acceptErrorPasses(err) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		jsonrpc.NewConn(ctx, conn, jsonrpc.Options{Handler: handler})
	}
}

// MemoryShow renders Stats the way "memory/show" prints them.
func (s *Server) MemoryShow() string {
	st := s.Stats()
	var b strings.Builder
	fmt.Fprintf(&b, "sessions:%d monitors:%d", st.Sessions, st.Monitors)
	names := make([]string, 0, len(st.Rows))
	for n := range st.Rows {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, " rows(%s):%d", n, st.Rows[n])
	}
	return b.String() + "\n"
}
