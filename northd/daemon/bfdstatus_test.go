package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/govn/govn/internal/refovn"
	"github.com/govn/govn/northd"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema"
)

func TestBFDWant(t *testing.T) {
	for _, tc := range []struct {
		nb, sb         string
		haveSB, inUse  bool
		wantNB, wantSB string
	}{
		{"", "", false, false, "admin_down", ""},
		{"", "", false, true, "down", ""},
		{"admin_down", "admin_down", true, true, "down", "down"},
		{"down", "up", true, true, "up", "up"},           // the chassis saw it come up
		{"up", "down", true, true, "down", "down"},       // and go down
		{"init", "down", true, true, "down", "down"},     // the Southbound wins
		{"admin_down", "up", true, true, "down", "down"}, // the CMS turned it off: on again while in use
		{"down", "admin_down", true, true, "down", "down"},
		{"", "init", true, true, "down", "down"},
		{"down", "up", true, false, "admin_down", "admin_down"}, // no route uses it
		{"admin_down", "up", true, false, "admin_down", "admin_down"},
		{"up", "up", true, true, "up", "up"},
	} {
		name := fmt.Sprintf("nb=%s,sb=%s,haveSB=%v,inUse=%v", tc.nb, tc.sb, tc.haveSB, tc.inUse)
		t.Run(name, func(t *testing.T) {
			nb, sb := bfdWant(tc.nb, tc.sb, tc.haveSB, tc.inUse)
			if nb != tc.wantNB || sb != tc.wantSB {
				t.Errorf("got nb %q sb %q, want %q %q", nb, sb, tc.wantNB, tc.wantSB)
			}
		})
	}
}

// fakeDB is a database's rows in memory, read as a client's cache is.
type fakeDB struct {
	schema *ovsdb.Schema
	rows   map[string]map[ovsdb.UUID]*ovsdb.Row
}

func newFakeDB(t *testing.T, name string) *fakeDB {
	s, err := ovsdb.ParseSchema(schema.MustLookup(name))
	if err != nil {
		t.Fatal(err)
	}
	return &fakeDB{schema: s, rows: map[string]map[ovsdb.UUID]*ovsdb.Row{}}
}

func (f *fakeDB) Schema() *ovsdb.Schema                      { return f.schema }
func (f *fakeDB) Row(table string, id ovsdb.UUID) *ovsdb.Row { return f.rows[table][id] }
func (f *fakeDB) Rows(table string) []*ovsdb.Row {
	var out []*ovsdb.Row
	for _, r := range f.rows[table] {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *ovsdb.Row) int { return a.UUID.Compare(b.UUID) })
	return out
}
func (f *fakeDB) Lookup(table, column string, v ovsdb.Datum) []*ovsdb.Row {
	col := f.schema.Tables[table].Column(column)
	var out []*ovsdb.Row
	for _, r := range f.Rows(table) {
		if r.Get(col).Equal(v) {
			out = append(out, r)
		}
	}
	return out
}

// put stores a row of table with the given columns and returns it.
func (f *fakeDB) put(t *testing.T, table string, id ovsdb.UUID, cols map[string]ovsdb.Datum) *ovsdb.Row {
	t.Helper()
	ts := f.schema.Tables[table]
	r := ovsdb.NewRow(ts, id)
	for name, d := range cols {
		col := ts.Column(name)
		if col == nil {
			t.Fatalf("%s has no column %s", table, name)
		}
		r.Data[col.Index] = d
	}
	if f.rows[table] == nil {
		f.rows[table] = map[ovsdb.UUID]*ovsdb.Row{}
	}
	f.rows[table][id] = r
	return r
}

func sessionCols(port, dst, status string) map[string]ovsdb.Datum {
	cols := map[string]ovsdb.Datum{"logical_port": ovsdb.Scalar(ovsdb.String(port)), "dst_ip": ovsdb.Scalar(ovsdb.String(dst))}
	if status != "" {
		cols["status"] = ovsdb.Scalar(ovsdb.String(status))
	}
	return cols
}

// TestBFDStatusIncremental: after the first look at every session, a
// Southbound status change makes a write of that session's Northbound row
// only, even when another session's rows differ too (they are not looked
// at: nothing about them changed); a route that starts using a session
// makes that session's rows down.
func TestBFDStatusIncremental(t *testing.T) {
	nbDB, sbDB := newFakeDB(t, "nb"), newFakeDB(t, "sb")
	n1, n2, s1, s2 := ovsdb.NewUUID(), ovsdb.NewUUID(), ovsdb.NewUUID(), ovsdb.NewUUID()
	route := ovsdb.NewUUID()
	nbDB.put(t, bfdTable, n1, sessionCols("rp1", "10.0.0.2", "down"))
	nbDB.put(t, bfdTable, n2, sessionCols("rp1", "10.0.0.3", "admin_down"))
	nbDB.put(t, routeTable, route, map[string]ovsdb.Datum{"ip_prefix": ovsdb.Scalar(ovsdb.String("192.168.0.0/24")),
		"nexthop": ovsdb.Scalar(ovsdb.String("10.0.0.2")), "bfd": ovsdb.Scalar(ovsdb.UUIDAtom(n1))})
	sbDB.put(t, bfdTable, s1, sessionCols("rp1", "10.0.0.2", "down"))
	sbDB.put(t, bfdTable, s2, sessionCols("rp1", "10.0.0.3", "admin_down"))
	b := newBFDStatus()
	if ups := b.plan(nbDB, sbDB); len(ups) != 0 {
		t.Fatalf("first look at sessions in step: %+v", ups)
	}
	// The chassis says session 1 is up; meanwhile session 2's Southbound
	// row changes behind northd's back without an event (it is not
	// looked at).
	old := sbDB.rows[bfdTable][s1]
	up := sbDB.put(t, bfdTable, s1, sessionCols("rp1", "10.0.0.2", "up"))
	sbDB.put(t, bfdTable, s2, sessionCols("rp1", "10.0.0.3", "init"))
	c := make(changes)
	c.add(tableKey{northd.SB, bfdTable}, old, up)
	b.note(c, nbDB, sbDB)
	want := []statusUpdate{{northd.NB, n1, "up"}}
	if ups := b.plan(nbDB, sbDB); !slices.Equal(ups, want) {
		t.Errorf("after session 1 came up: %+v, want %+v", ups, want)
	}
	if ups := b.plan(nbDB, sbDB); len(ups) != 0 {
		t.Errorf("nothing changed since: %+v", ups)
	}
	// A route starts using session 2: both its rows become down.
	r2 := ovsdb.NewUUID()
	newRoute := nbDB.put(t, routeTable, r2, map[string]ovsdb.Datum{"ip_prefix": ovsdb.Scalar(ovsdb.String("192.168.1.0/24")),
		"nexthop": ovsdb.Scalar(ovsdb.String("10.0.0.3")), "bfd": ovsdb.Scalar(ovsdb.UUIDAtom(n2))})
	c = make(changes)
	c.add(tableKey{northd.NB, routeTable}, nil, newRoute)
	b.note(c, nbDB, sbDB)
	want = []statusUpdate{{northd.NB, n2, "down"}, {northd.SB, s2, "down"}}
	if ups := b.plan(nbDB, sbDB); !slices.Equal(ups, want) {
		t.Errorf("after a route uses session 2: %+v, want %+v", ups, want)
	}
	// The route goes: session 2 is admin_down again.
	nbDB.put(t, bfdTable, n2, sessionCols("rp1", "10.0.0.3", "down"))
	sbDB.put(t, bfdTable, s2, sessionCols("rp1", "10.0.0.3", "down"))
	delete(nbDB.rows[routeTable], r2)
	c = make(changes)
	c.add(tableKey{northd.NB, routeTable}, newRoute, nil)
	b.note(c, nbDB, sbDB)
	want = []statusUpdate{{northd.NB, n2, "admin_down"}, {northd.SB, s2, "admin_down"}}
	if ups := b.plan(nbDB, sbDB); !slices.Equal(ups, want) {
		t.Errorf("after the route went: %+v, want %+v", ups, want)
	}
}

// inProcessNorthd runs govn northd's daemon in this process, as a
// refovn.Northd.
func inProcessNorthd(t *testing.T) refovn.Northd {
	return func(ctx context.Context, nbSock, sbSock string) (func(), error) {
		d, err := New(Config{NB: []string{"unix:" + nbSock}, SB: []string{"unix:" + sbSock},
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Run(ctx); err != nil {
				t.Errorf("govn northd: %v", err)
			}
		}()
		return func() { cancel(); wg.Wait() }, nil
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestBFDStatusDifferential: the same steps on the real ovn-northd and on
// govn northd, each with its own databases; after each, both BFD rows of
// both sessions must say what ovn-northd 23.03 makes them say. Session 1
// is used by a static route, session 2 by none. The Southbound changes
// are what a chassis running the session writes (ovn-sbctl here).
func TestBFDStatusDifferential(t *testing.T) {
	refovn.SkipUnlessInstalled(t)
	type step struct {
		what string
		db   string // "nb" or "sb": whose row the command changes
		args []string
		want string // "NB1 SB1 NB2 SB2"
	}
	steps := []step{
		{"start", "", nil, "down down admin_down admin_down"},
		{"the chassis sees session 1 up", "sb", []string{"set", "BFD", "{s1}", "status=up"}, "up up admin_down admin_down"},
		{"and down", "sb", []string{"set", "BFD", "{s1}", "status=down"}, "down down admin_down admin_down"},
		{"and init", "sb", []string{"set", "BFD", "{s1}", "status=init"}, "init init admin_down admin_down"},
		{"the CMS writes down over init", "nb", []string{"set", "BFD", "{n1}", "status=down"}, "init init admin_down admin_down"},
		{"the chassis sees session 1 up again", "sb", []string{"set", "BFD", "{s1}", "status=up"}, "up up admin_down admin_down"},
		{"the CMS turns session 1 off", "nb", []string{"set", "BFD", "{n1}", "status=admin_down"}, "down down admin_down admin_down"},
		{"the chassis writes admin_down", "sb", []string{"set", "BFD", "{s1}", "status=admin_down"}, "down down admin_down admin_down"},
		{"the CMS clears session 1's status", "nb", []string{"clear", "BFD", "{n1}", "status"}, "down down admin_down admin_down"},
		{"the chassis sees unused session 2 up", "sb", []string{"set", "BFD", "{s2}", "status=up"}, "down down admin_down admin_down"},
		{"the CMS sets unused session 2 up", "nb", []string{"set", "BFD", "{n2}", "status=up"}, "down down admin_down admin_down"},
		{"a route starts using session 2", "nb", []string{"--bfd={n2}", "lr-route-add", "r1", "192.168.1.0/24", "10.0.0.3"}, "down down down down"},
		{"the chassis sees session 2 up", "sb", []string{"set", "BFD", "{s2}", "status=up"}, "down down up up"},
		{"session 1's route stops using it", "nb", []string{"clear", "Logical_Router_Static_Route", "{r1}", "bfd"}, "admin_down admin_down up up"},
	}
	var results [2][]string
	for i, nd := range []struct {
		name   string
		northd refovn.Northd
	}{{"ovn-northd", refovn.RealNorthd}, {"govn-northd", inProcessNorthd(t)}} {
		t.Run(nd.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			e := refovn.Start(t, nd.northd)
			ctl := func(db string, args ...string) string {
				t.Helper()
				run := e.NBCtl
				if db == "sb" {
					run = e.SBCtl
				}
				out, err := run(ctx, args...)
				if err != nil {
					t.Fatalf("%s %q: %v: %s", db, args, err, out)
				}
				return strings.TrimSpace(out)
			}
			ctl("nb", "lr-add", "r1", "--", "lrp-add", "r1", "rp1", "00:00:00:00:00:01", "10.0.0.1/24")
			ids := map[string]string{
				"{n1}": ctl("nb", "create", "BFD", "logical_port=rp1", "dst_ip=10.0.0.2"),
				"{n2}": ctl("nb", "create", "BFD", "logical_port=rp1", "dst_ip=10.0.0.3"),
			}
			ctl("nb", "--bfd="+ids["{n1}"], "lr-route-add", "r1", "192.168.0.0/24", "10.0.0.2")
			if err := e.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			ids["{r1}"] = ctl("nb", "--bare", "--columns=_uuid", "find", "Logical_Router_Static_Route", "ip_prefix=192.168.0.0/24")
			sbID := func(dst string) string {
				return ctl("sb", "--bare", "--columns=_uuid", "find", "BFD", "logical_port=rp1", "dst_ip="+dst)
			}
			ids["{s1}"], ids["{s2}"] = sbID("10.0.0.2"), sbID("10.0.0.3")
			status := func(db, id string) string {
				if id == "" {
					return "-"
				}
				s := ctl(db, "--bare", "--columns=status", "list", "BFD", id)
				if s == "" {
					return "-"
				}
				return s
			}
			state := func() string {
				return strings.Join([]string{status("nb", ids["{n1}"]), status("sb", ids["{s1}"]),
					status("nb", ids["{n2}"]), status("sb", ids["{s2}"])}, " ")
			}
			for _, s := range steps {
				if s.db != "" {
					args := slices.Clone(s.args)
					for j, a := range args {
						for k, v := range ids {
							a = strings.ReplaceAll(a, k, v)
						}
						args[j] = a
					}
					ctl(s.db, args...)
				}
				got := ""
				deadline := time.Now().Add(10 * time.Second)
				for {
					if err := e.Sync(ctx); err != nil {
						t.Fatal(err)
					}
					if got = state(); got == s.want || time.Now().After(deadline) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				results[i] = append(results[i], s.what+": "+got)
				if got != s.want {
					t.Errorf("%s: NB1 SB1 NB2 SB2 = %s, want %s", s.what, got, s.want)
				}
			}
		})
	}
	if !t.Failed() && !slices.Equal(results[0], results[1]) {
		t.Errorf("ovn-northd:\n%s\ngovn northd:\n%s", strings.Join(results[0], "\n"), strings.Join(results[1], "\n"))
	}
}
