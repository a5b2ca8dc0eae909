package server

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/jsonrpc"
)

// FuzzRequest sends arbitrary params to every method of one session; the
// server must answer (or close the session) and never crash, and a second
// session must keep working.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`["Test",{"op":"insert","table":"Box","row":{"name":"a"}}]`,
		`["Test","m",{"Box":[{"columns":["name"],"where":[["n","<",3]]}]}]`,
		`["Test","m",{"Box":{"select":{"initial":false}}},"00000000-0000-0000-0000-000000000000"]`,
		`["m","m2",{"Box":[{"where":[true]}]}]`,
		`["L"]`, `[]`, `[null]`, `{}`, `["_Server"]`,
	} {
		f.Add(seed)
	}
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	if err := srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil); err != nil {
		f.Fatal(err)
	}
	methods := []string{"transact", "monitor", "monitor_cond", "monitor_cond_since", "monitor_cond_change", "monitor_cancel", "get_schema", "lock", "steal", "unlock", "echo", "cancel", "list_dbs"}
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) {
			return
		}
		a, b := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv.ServeConn(ctx, a)
		c := jsonrpc.NewConn(ctx, b, jsonrpc.Options{Logger: quietLogger()})
		defer c.Close()
		for _, m := range methods {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.CallRaw(cctx, m, json.RawMessage(params))
			ccancel()
			if err != nil {
				if _, ok := err.(*jsonrpc.Error); !ok {
					// The session may close on bad input; that is allowed.
					return
				}
			}
		}
	})
}
