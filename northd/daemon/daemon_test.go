package daemon

import (
	"testing"

	"github.com/govn/govn/northd"
	"github.com/govn/govn/ovsdb"
)

func row(id ovsdb.UUID, v int64) *ovsdb.Row {
	return &ovsdb.Row{UUID: id, Data: []ovsdb.Datum{ovsdb.Scalar(ovsdb.Integer(v))}}
}

func TestChangesCoalesce(t *testing.T) {
	a, b := ovsdb.NewUUID(), ovsdb.NewUUID()
	k := tableKey{northd.NB, "T"}
	type step struct {
		old, new *ovsdb.Row
	}
	for _, tc := range []struct {
		name     string
		steps    []step
		old, new *ovsdb.Row // the one event left; both nil for none
	}{
		{"insert", []step{{nil, row(a, 1)}}, nil, row(a, 1)},
		{"insert then update", []step{{nil, row(a, 1)}, {row(a, 1), row(a, 2)}}, nil, row(a, 2)},
		{"insert then delete", []step{{nil, row(a, 1)}, {row(a, 1), nil}}, nil, nil},
		{"updates", []step{{row(a, 1), row(a, 2)}, {row(a, 2), row(a, 3)}}, row(a, 1), row(a, 3)},
		{"update then delete", []step{{row(a, 1), row(a, 2)}, {row(a, 2), nil}}, row(a, 1), nil},
		{"delete then insert", []step{{row(a, 1), nil}, {nil, row(a, 5)}}, row(a, 1), row(a, 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through add, and through merge of one change at a time (the
			// queue taken into the batch).
			direct, merged := make(changes), make(changes)
			for _, s := range tc.steps {
				direct.add(k, s.old, s.new)
				q := make(changes)
				q.add(k, s.old, s.new)
				merged.merge(q)
			}
			for name, c := range map[string]changes{"add": direct, "merge": merged} {
				evs := c.take(k)
				if tc.old == nil && tc.new == nil {
					if len(evs) != 0 {
						t.Errorf("%s: %d events, want none", name, len(evs))
					}
					continue
				}
				if len(evs) != 1 || evs[0].Old != tc.old && !sameRow(evs[0].Old, tc.old) || !sameRow(evs[0].New, tc.new) {
					t.Errorf("%s: events %+v, want old %v new %v", name, evs, tc.old, tc.new)
				}
				if !c.empty() {
					t.Errorf("%s: not empty after take", name)
				}
			}
		})
	}
	// Rows of a table come out in UUID order.
	c := make(changes)
	c.add(k, nil, row(b, 1))
	c.add(k, nil, row(a, 1))
	evs := c.takeAll()
	if len(evs) != 2 || evs[0].New.UUID.Compare(evs[1].New.UUID) >= 0 {
		t.Errorf("takeAll order: %+v", evs)
	}
}

func sameRow(a, b *ovsdb.Row) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UUID == b.UUID && a.Data[0].Equal(b.Data[0])
}

// TestCommandsBeforeConnecting checks the control socket's answers of a
// daemon that has not reached its databases: standby, as ovn-northd says.
func TestCommandsBeforeConnecting(t *testing.T) {
	d, err := New(Config{NB: []string{"unix:/nonexistent/nb"}, SB: []string{"unix:/nonexistent/sb"}})
	if err != nil {
		t.Fatal(err)
	}
	cmds := d.Commands()
	for _, tc := range []struct {
		cmd  string
		args []string
		want string
		err  string
	}{
		{cmd: "status", want: "Status: standby\n"},
		{cmd: "is-paused", want: "false\n"},
		{cmd: "sb-connection-status", want: "not connected\n"},
		{cmd: "pause"},
		{cmd: "status", want: "Status: paused\n"},
		{cmd: "is-paused", want: "true\n"},
		{cmd: "resume"},
		{cmd: "status", want: "Status: standby\n"},
		{cmd: "status", args: []string{"x"}, err: `"status" command takes at most 0 arguments`},
		{cmd: "inc-engine/show-stats", args: []string{"northd", "recompute"}, want: "0\n"},
	} {
		got, err := cmds[tc.cmd](tc.args)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%s %q: error %v, want %q", tc.cmd, tc.args, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s %q: %q, %v; want %q", tc.cmd, tc.args, got, err, tc.want)
		}
	}
}
