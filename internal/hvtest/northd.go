package hvtest

import (
	"path/filepath"
	"testing"
)

// Northd starts a northd that translates the cluster's Northbound (c.NB)
// into its Southbound (c.SB). Start runs it with c.Start (usually in
// c.Central) so that it is stopped when the test ends; it may skip the test
// when its program is missing.
type Northd interface {
	Start(t testing.TB, c *Cluster)
}

// NorthdFunc adapts a function to Northd.
type NorthdFunc func(t testing.TB, c *Cluster)

// Start calls f.
func (f NorthdFunc) Start(t testing.TB, c *Cluster) { f(t, c) }

// NorthdCommand is a northd program that takes ovn-northd's options
// (--ovnnb-db, --ovnsb-db, --unixctl, --log-file, --pidfile): Argv is the
// program and any leading arguments, e.g. {"ovn-northd"} or
// {"/path/govn", "northd"}.
type NorthdCommand struct {
	Argv []string
}

// RealNorthd is the real ovn-northd.
func RealNorthd() Northd { return NorthdCommand{Argv: []string{"ovn-northd"}} }

// NoNorthd starts nothing: for tests that write the Southbound themselves.
func NoNorthd() Northd { return NorthdFunc(func(testing.TB, *Cluster) {}) }

// Ctl is the path of the northd's control socket in a cluster.
func (NorthdCommand) Ctl(c *Cluster) string { return filepath.Join(c.Dir, "northd.ctl") }

// Start runs the program in the central namespace.
func (n NorthdCommand) Start(t testing.TB, c *Cluster) {
	t.Helper()
	needBinaries(t, n.Argv[0])
	args := append(append([]string{}, n.Argv...),
		"--ovnnb-db=unix:"+c.NB, "--ovnsb-db=unix:"+c.SB,
		"--unixctl="+n.Ctl(c),
		"--log-file="+filepath.Join(c.Dir, "northd.log"),
		"--pidfile="+filepath.Join(c.Dir, "northd.pid"))
	c.Start(t, c.Central, "central/northd", ovsEnv(c.Dir), args...)
	waitSocket(t, n.Ctl(c))
}
