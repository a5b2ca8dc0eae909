package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// The control-socket commands of a member, as ovsdb-server's cluster/*
// commands (govn db registers them for each clustered database).

// short is the 4-digit abbreviation OVSDB uses for server and cluster ids.
func short(id string) string {
	if len(id) < 4 {
		return id
	}
	return id[:4]
}

// Status renders cluster/status DB in ovsdb-server's layout.
func (n *Node) Status() string {
	var b strings.Builder
	sid := n.sid.String()
	fmt.Fprintf(&b, "%s\nName: %s\n", short(sid), n.name)
	if c := n.cid.Load(); c != nil {
		fmt.Fprintf(&b, "Cluster ID: %s (%s)\n", short(c.String()), c)
	} else {
		b.WriteString("Cluster ID: not yet known\n")
	}
	fmt.Fprintf(&b, "Server ID: %s (%s)\nAddress: %s\n", short(sid), sid, n.local)
	cf := n.raft.GetConfiguration()
	var servers []raft.Server
	if cf.Error() == nil {
		servers = cf.Configuration().Servers
	}
	member := false
	for _, s := range servers {
		if string(s.ID) == sid {
			member = true
		}
	}
	switch {
	case n.left.Load():
		b.WriteString("Status: left cluster\n")
	case member:
		b.WriteString("Status: cluster member\n")
	case n.cid.Load() != nil && len(servers) > 0:
		b.WriteString("Status: removed from the cluster\n")
	default:
		b.WriteString("Status: joining cluster\n")
	}
	role := strings.ToLower(n.raft.State().String())
	fmt.Fprintf(&b, "Role: %s\nTerm: %d\n", role, n.raft.CurrentTerm())
	_, lid := n.raft.LeaderWithID()
	switch {
	case string(lid) == sid:
		b.WriteString("Leader: self\n")
	case lid != "":
		fmt.Fprintf(&b, "Leader: %s\n", short(string(lid)))
	default:
		b.WriteString("Leader: unknown\n")
	}
	vote := "unknown"
	if v, err := n.store.Get([]byte("LastVoteCand")); err == nil && len(v) > 0 {
		vote = string(v)
		for _, s := range servers {
			if string(s.Address) == vote || string(s.ID) == vote {
				vote = short(string(s.ID))
				if string(s.ID) == sid {
					vote = "self"
				}
			}
		}
	}
	fmt.Fprintf(&b, "Vote: %s\n\n", vote)
	if won := n.wonAt.Load(); won > 0 && role == "leader" {
		fmt.Fprintf(&b, "Last Election won: %d ms ago\n", time.Now().UnixMilli()-won)
	}
	fmt.Fprintf(&b, "Election timer: %d\n", n.timerMS.Load())
	first, _ := n.store.FirstIndex()
	last := n.raft.LastIndex()
	if first == 0 {
		first = last + 1
	}
	commit, applied := n.raft.CommitIndex(), max(n.appliedIndex(), n.raft.AppliedIndex())
	fmt.Fprintf(&b, "Log: [%d, %d]\n", first, last+1)
	fmt.Fprintf(&b, "Entries not yet committed: %d\n", sub(last, commit))
	fmt.Fprintf(&b, "Entries not yet applied: %d\n", sub(commit, applied))
	b.WriteString("Connections:")
	for _, s := range servers {
		if string(s.ID) != sid {
			fmt.Fprintf(&b, " ->%s <-%s", short(string(s.ID)), short(string(s.ID)))
		}
	}
	b.WriteString("\nDisconnections: 0\nServers:\n")
	scheme, _, _ := parsePeer(n.local) // every member's
	for _, s := range servers {
		id := string(s.ID)
		fmt.Fprintf(&b, "    %s (%s at %s:%s)", short(id), short(id), scheme, s.Address)
		if id == sid {
			b.WriteString(" (self)")
		}
		if s.Suffrage != raft.Voter {
			b.WriteString(" (non-voter)")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// CID returns the cluster's id, or "" while it is not known.
func (n *Node) CID() string {
	if c := n.cid.Load(); c != nil {
		return c.String()
	}
	return ""
}

// SID returns this server's id.
func (n *Node) SID() string { return n.sid.String() }

// Kick removes the member target (a server id, its first digits, or its
// tcp:IP:PORT or ssl:IP:PORT address) from the cluster, through the leader.
func (n *Node) Kick(ctx context.Context, target string) (string, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return "", err
	}
	var found []raft.Server
	addr, aerr := ParseAddress(target)
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == target || (len(target) >= 4 && strings.HasPrefix(string(s.ID), target)) || (aerr == nil && string(s.Address) == addr) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("unknown server %s", target)
	case 1:
	default:
		return "", fmt.Errorf("%s is ambiguous", target)
	}
	id := string(found[0].ID)
	if err := n.remove(ctx, id); err != nil {
		return "", err
	}
	return fmt.Sprintf("kicked %s\n", short(id)), nil
}

func (n *Node) remove(ctx context.Context, id string) error {
	if n.raft.State() == raft.Leader {
		return n.raft.RemoveServer(raft.ServerID(id), 0, 20*time.Second).Error()
	}
	_, err := n.toLeader(ctx, &request{Op: "remove", SID: id}, 2*time.Duration(n.timerMS.Load())*time.Millisecond+time.Second)
	return err
}

// Leave takes this server out of the cluster; it then serves the database
// no more (its _Server row says it is not connected).
func (n *Node) Leave(ctx context.Context) error {
	if n.left.Load() {
		return errors.New("already left the cluster")
	}
	if err := n.remove(ctx, n.sid.String()); err != nil {
		return fmt.Errorf("leaving the cluster: %w", err)
	}
	n.left.Store(true)
	if rep := n.rep.Load(); rep != nil {
		rep.Do(func() {
			n.writable = false
			n.rollbackLocked(rep)
		})
		rep.SetStatus(n.status())
	}
	return nil
}

// ChangeElectionTimer sets the cluster's election timer (in ms) through
// the leader; every member applies it when the change commits.
func (n *Node) ChangeElectionTimer(ctx context.Context, arg string) (string, error) {
	ms, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || ms < 100 || ms > 600000 {
		return "", fmt.Errorf("election timer must be between 100 and 600000 ms, not %q", arg)
	}
	if ms > 2*n.timerMS.Load() {
		return "", fmt.Errorf("election timer increase should not exceed the current value x 2 (%d)", 2*n.timerMS.Load())
	}
	if _, err := n.toLeader(ctx, &request{Op: "timer", MS: ms}, 2*time.Duration(n.timerMS.Load())*time.Millisecond+time.Second); err != nil {
		return "", err
	}
	return "change of election timer initiated.\n", nil
}
