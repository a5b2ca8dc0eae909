package ovsdb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestIndexMatchesScan checks indexed condition evaluation against a plain
// scan while rows come and go.
func TestIndexMatchesScan(t *testing.T) {
	db := newTestDB(t)
	rng := rand.New(rand.NewPCG(1, 2))
	ts := db.Schema.Table("Child")
	label := ts.Column("label")
	names := []string{"a", "b", "c", "d"}
	conds := [][]Condition{
		{{Column: label, Function: FuncEqual, Arg: Scalar(String("a"))}},
		{{Column: label, Function: FuncEqual, Arg: Scalar(String("a"))}, {Column: label, Function: FuncIncludes, Arg: Scalar(String("c"))}},
		{{Column: label, Function: FuncNotEqual, Arg: Scalar(String("b"))}},
		{{Function: FuncFalse}},
		nil,
	}
	for round := 0; round < 30; round++ {
		// Keep rows alive through a root that references them all.
		ops := `[{"op":"delete","table":"Root","where":[]},{"op":"insert","table":"Root","row":{"name":"r","children":["set",[`
		n := rng.IntN(8)
		for i := 0; i < n; i++ {
			if i > 0 {
				ops += ","
			}
			ops += fmt.Sprintf(`["named-uuid","c%d"]`, i)
		}
		ops += `]]}}`
		for i := 0; i < n; i++ {
			ops += fmt.Sprintf(`,{"op":"insert","table":"Child","uuid-name":"c%d","row":{"label":"%s"}}`, i, names[rng.IntN(len(names))])
		}
		ops += "]"
		reply, _ := run(t, db, ops, TxnOptions{})
		if e := errorTag(reply); e != "" {
			t.Fatalf("round %d: %v", round, reply)
		}
		tbl := db.Table("Child")
		for ci, cs := range conds {
			var got, want []string
			tbl.ForEachMatchAny(cs, func(r *Row) { got = append(got, r.UUID.String()) })
			for _, r := range tbl.Rows {
				if MatchAny(cs, r) {
					want = append(want, r.UUID.String())
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d conds %d: index gives %v, scan %v", round, ci, got, want)
			}
		}
	}
}
