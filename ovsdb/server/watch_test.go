package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/govn/govn/ovsdb"
)

// TestRouteMatchesBruteForce checks that routing commits through the
// condition index gives every monitor exactly the updates that evaluating
// its conditions on every changed row gives.
func TestRouteMatchesBruteForce(t *testing.T) {
	srv := New(Options{Logger: quietLogger(), ProbeInterval: -1})
	srv.AddDatabase(ovsdb.NewDatabase(ovsdb.MustParseSchema([]byte(testSchema))), nil)
	d := srv.database("Test")
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"a", "b", "c", "d", "e"}
	where := []string{
		`[["name","==","a"]]`,
		`[["name","==","b"],["name","==","c"]]`,
		`[["tags","includes","x"]]`,
		`[["tags","includes","y"],["name","==","e"]]`,
		`[["n","<",2]]`,
		`[["name","!=","a"]]`,
		`[false]`,
		`[["name","==","d"],["n",">",1]]`,
		`[]`,
		`[true]`,
	}
	var mons []*monitor
	for i := 0; i < 40; i++ {
		version := monitorV2
		if i%3 == 0 {
			version = monitorV1
		}
		req := `{"Box":[{"columns":["name","n","tags"],"where":` + where[rng.IntN(len(where))] + `}]}`
		if version == monitorV1 {
			// Plain "monitor" has no "where", as in ovsdb-server.
			req = `{"Box":[{"columns":["name","n","tags"]}]}`
		}
		v, _ := ovsdb.DecodeJSON([]byte(req))
		tables, err := parseMonitorRequests(d.db, v, version)
		if err != nil {
			t.Fatal(err)
		}
		m := &monitor{d: d, id: json.RawMessage(fmt.Sprint(i)), version: version, tables: tables}
		m.computeShape()
		d.monitors[m] = struct{}{}
		d.watchLocked(m)
		mons = append(mons, m)
	}
	decode := func(b []byte) any {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("bad JSON %s: %v", b, err)
		}
		return v
	}
	for round := 0; round < 200; round++ {
		var ops string
		switch rng.IntN(3) {
		case 0:
			ops = fmt.Sprintf(`[{"op":"insert","table":"Box","row":{"name":"%s","n":%d,"tags":%s}}]`, names[rng.IntN(5)]+fmt.Sprint(round%2), rng.IntN(4), []string{`["set",[]]`, `"x"`, `["set",["x","y"]]`, `"y"`}[rng.IntN(4)])
		case 1:
			ops = fmt.Sprintf(`[{"op":"update","table":"Box","where":[["n","==",%d]],"row":{"name":"%s","tags":%s}}]`, rng.IntN(4), names[rng.IntN(5)], []string{`["set",[]]`, `"x"`, `["set",["x","y"]]`, `"y"`}[rng.IntN(4)])
		default:
			ops = fmt.Sprintf(`[{"op":"delete","table":"Box","where":[["n","==",%d]]}]`, rng.IntN(4))
		}
		v, _ := ovsdb.DecodeJSON([]byte(ops))
		res := d.db.Transact(v.([]any), ovsdb.TxnOptions{})
		if res.Changes == nil {
			continue
		}
		routed := d.route(res.Changes, true)
		for _, m := range mons {
			want, wantOK := m.appendUpdates(nil, res.Changes.Tables)
			var got []byte
			gotOK := false
			if tables, ok := routed[m]; ok {
				if tables == nil {
					tables = res.Changes.Tables
				}
				got, gotOK = m.appendUpdates(nil, tables)
			}
			if wantOK != gotOK || (wantOK && !reflect.DeepEqual(decode(want), decode(got))) {
				t.Fatalf("round %d monitor %s: routed %s (%v), brute force %s (%v)", round, m.id, got, gotOK, want, wantOK)
			}
		}
		d.db.Apply(res.Changes)
		// Now and then a monitor changes its conditions.
		if round%17 == 0 {
			m := mons[rng.IntN(len(mons))]
			d.unwatchLocked(m)
			c, _ := ovsdb.ParseConditions(mustJSON(t, where[rng.IntN(len(where))]), m.tables["Box"].ts, nil)
			if len(c) == 0 {
				c = nil
			} else {
				c = simplify(c)
			}
			m.tables["Box"].conds = c
			m.computeShape()
			d.watchLocked(m)
		}
	}
}

func mustJSON(t *testing.T, s string) any {
	v, err := ovsdb.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
