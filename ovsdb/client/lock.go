package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Lock asks the server for the named lock (RFC 7047 §4.1.8) and reports
// whether it was granted at once. If not, the server grants it later and
// Options.OnLock is called; HasLock tells the current state. The client asks
// again after every reconnection until Unlock.
func (c *Client) Lock(ctx context.Context, name string) (held bool, err error) {
	return c.lockOp(ctx, "lock", name)
}

// Steal takes the named lock from whoever holds it.
func (c *Client) Steal(ctx context.Context, name string) (held bool, err error) {
	return c.lockOp(ctx, "steal", name)
}

// Unlock gives the named lock up (or stops waiting for it).
func (c *Client) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	held := c.locks[name]
	delete(c.locks, name)
	s := c.sess
	c.mu.Unlock()
	if held && c.opts.OnLock != nil {
		c.opts.OnLock(name, false)
	}
	if s == nil {
		return nil
	}
	_, err := c.lockRequest(ctx, s, "unlock", name)
	return err
}

// HasLock reports whether the client holds the named lock now.
func (c *Client) HasLock(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.locks[name]
}

// Locks returns the names of the locks the client holds or waits for.
func (c *Client) Locks() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.locks))
}

func (c *Client) lockOp(ctx context.Context, method, name string) (bool, error) {
	c.mu.Lock()
	if _, ok := c.locks[name]; !ok {
		c.locks[name] = false
	}
	c.mu.Unlock()
	s, err := c.session(ctx)
	if err != nil {
		return false, err
	}
	return c.lockRequest(ctx, s, method, name)
}

// lockRequest sends lock, steal or unlock on session s.
func (c *Client) lockRequest(ctx context.Context, s *session, method, name string) (bool, error) {
	var reply struct {
		Locked bool `json:"locked"`
	}
	if err := s.conn.Call(ctx, method, []string{name}, &reply); err != nil {
		return false, fmt.Errorf("%s %q: %w", method, name, err)
	}
	if method != "unlock" && reply.Locked {
		c.lockChanged(name, true)
	}
	return reply.Locked, nil
}

// lockChanged records a grant (locked) or a loss (stolen) of a lock.
func (c *Client) lockChanged(name string, held bool) {
	c.mu.Lock()
	was, wanted := c.locks[name]
	if wanted {
		c.locks[name] = held
	}
	c.mu.Unlock()
	if wanted && was != held && c.opts.OnLock != nil {
		c.opts.OnLock(name, held)
	}
}
