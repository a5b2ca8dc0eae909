package daemon

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Credentials are the ids a daemon runs as after --user.
type Credentials struct {
	UID, GID int
	Groups   []int // supplementary groups
}

// LookupUser resolves an ovsdb-server --user spec, "USER[:GROUP]". Without
// GROUP the user's primary group is used, with GROUP only that group (the
// user's other groups are kept only when GROUP is its primary group).
func LookupUser(spec string) (Credentials, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" {
		return Credentials{}, fmt.Errorf("--user %q: no user name", spec)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return Credentials{}, fmt.Errorf("--user %q: %w", spec, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return Credentials{}, fmt.Errorf("--user %q: uid %q: %w", spec, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return Credentials{}, fmt.Errorf("--user %q: gid %q: %w", spec, u.Gid, err)
	}
	primary := gid
	if hasGroup && group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			return Credentials{}, fmt.Errorf("--user %q: %w", spec, err)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return Credentials{}, fmt.Errorf("--user %q: gid %q: %w", spec, g.Gid, err)
		}
	}
	c := Credentials{UID: uid, GID: gid, Groups: []int{gid}}
	if gid == primary {
		if ids, err := u.GroupIds(); err == nil {
			c.Groups = c.Groups[:0]
			for _, s := range ids {
				if n, err := strconv.Atoi(s); err == nil {
					c.Groups = append(c.Groups, n)
				}
			}
		}
	}
	return c, nil
}

// Drop switches the whole process to c: supplementary groups, then group,
// then user (after which it could no longer change groups). Every call
// goes through package syscall's all-threads path (unix.Setgroups is a raw
// per-thread call; a Go process has many threads).
func (c Credentials) Drop() error {
	if err := syscall.Setgroups(c.Groups); err != nil {
		return fmt.Errorf("setting groups %v: %w", c.Groups, err)
	}
	if err := unix.Setresgid(c.GID, c.GID, c.GID); err != nil {
		return fmt.Errorf("setting gid %d: %w", c.GID, err)
	}
	if err := unix.Setresuid(c.UID, c.UID, c.UID); err != nil {
		return fmt.Errorf("setting uid %d: %w", c.UID, err)
	}
	return nil
}
