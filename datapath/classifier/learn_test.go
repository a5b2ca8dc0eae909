package classifier

import (
	"testing"

	"github.com/govn/govn/datapath/flow"
)

// TestLearnForget: learning a rule that is already there changes nothing
// (no new generation); Forget removes only the rule that was learned.
func TestLearnForget(t *testing.T) {
	ts := NewTables()
	r, err := flow.ParseRule("table=5,priority=10,ip,nw_src=10.0.0.1 actions=load:0x7->reg1")
	if err != nil {
		t.Fatal(err)
	}
	gen, changed, err := ts.Learn([]flow.Rule{r})
	if err != nil || !changed || gen != 1 {
		t.Fatalf("first learn: gen %d changed %v err %v", gen, changed, err)
	}
	if gen, changed, _ := ts.Learn([]flow.Rule{r}); changed || gen != 1 {
		t.Errorf("re-learning: gen %d changed %v", gen, changed)
	}
	// Someone replaces the rule: Forget leaves theirs alone.
	other := r
	other.Actions = []flow.Action{flow.Load{Dst: flow.Whole(flow.Reg1), Value: flow.U128{Lo: 8}}}
	var b flow.Bundle
	b.Modify(other)
	if _, err := ts.Apply(b); err != nil {
		t.Fatal(err)
	}
	if _, changed, _ := ts.Forget([]flow.Rule{r}); changed || len(ts.Dump(5)) != 1 {
		t.Errorf("forgot a rule that was not the learned one")
	}
	// Learning again replaces it; Forget then removes it.
	if _, changed, _ := ts.Learn([]flow.Rule{r}); !changed {
		t.Errorf("learn did not restore the learned rule")
	}
	if _, changed, _ := ts.Forget([]flow.Rule{r}); !changed || len(ts.Dump(5)) != 0 {
		t.Errorf("forget left %d rules", len(ts.Dump(5)))
	}
	bad := r
	bad.Table = 255
	if _, _, err := ts.Learn([]flow.Rule{bad}); err == nil {
		t.Error("bad learned rule accepted")
	}
}
