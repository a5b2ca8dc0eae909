package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/govn/govn/ovsdb/jsonrpc"
)

// serverMonitorID names the session's monitor of _Server.Database.
const serverMonitorID = "govn-server-database"

// serverRow is the part of a _Server.Database row the client watches
// (plain-monitor JSON: a boolean column is a bare true or false).
type serverRow struct {
	Name      *string `json:"name"`
	Model     string  `json:"model"`
	Connected *bool   `json:"connected"`
	Leader    *bool   `json:"leader"`
}

// serverRowUpdate is one row's change in a plain monitor update: New is
// absent when the row was deleted.
type serverRowUpdate struct {
	New *serverRow `json:"new"`
}

// watchServer starts the session's monitor of its database's row in
// _Server.Database, as the OVS IDL does, and checks the row it starts
// with. The monitor lasts as long as the session: when the server later
// reports the database gone, disconnected from its cluster or (with
// LeaderOnly) no longer led by this server, the client drops the session
// and tries the next endpoint (see watchUpdate). A server without _Server
// (older than OVS 2.9) is used without watching.
func (c *Client) watchServer(ctx context.Context, s *session) error {
	params := json.RawMessage(`["_Server","` + serverMonitorID + `",{"Database":{"columns":["name","model","connected","leader"]}}]`)
	raw, err := s.conn.CallRaw(ctx, "monitor", params)
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		c.log.Debug("server has no _Server database to watch", "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("monitoring _Server: %w", err)
	}
	if err := s.watchUpdate(raw, c.opts.Database, c.opts.LeaderOnly); err != nil {
		return err
	}
	if s.serverRowID == "" {
		return fmt.Errorf("server does not serve database %s", c.opts.Database)
	}
	return nil
}

// watchUpdate applies a _Server.Database update (or the monitor's initial
// reply) and returns why the session's server can no longer be used for
// database db, or nil.
func (s *session) watchUpdate(raw json.RawMessage, db string, leaderOnly bool) error {
	var u struct {
		Database map[string]serverRowUpdate `json:"Database"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return fmt.Errorf("_Server.Database update: %w", err)
	}
	for id, ru := range u.Database {
		switch {
		case ru.New == nil:
			if id == s.serverRowID {
				return fmt.Errorf("server no longer serves database %s", db)
			}
		case ru.New.Name != nil && *ru.New.Name == db:
			s.serverRowID = id
			if err := usable(ru.New, db, leaderOnly); err != nil {
				return err
			}
		}
	}
	return nil
}

// usable says why a server whose _Server.Database row for db is r cannot
// be used, or returns nil. Columns the server does not report pass.
func usable(r *serverRow, db string, leaderOnly bool) error {
	if r.Connected != nil && !*r.Connected {
		return fmt.Errorf("server is not connected to the cluster of %s", db)
	}
	if leaderOnly && r.Leader != nil && !*r.Leader {
		return fmt.Errorf("server is not the leader for %s", db)
	}
	return nil
}
