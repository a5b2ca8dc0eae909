package xlate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/classifier"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/xlate"
)

// A resubmit that ends its rule's actions is a tail call: a pipeline of
// more tables than MaxDepth, each ending in resubmit (OVN's "next;"), gets
// through; the same tables nesting (an action after each resubmit) stop
// at MaxDepth.
func TestResubmitDepth(t *testing.T) {
	const n = 2 * xlate.MaxDepth
	for _, tc := range []struct {
		name, after string
		wantErr     bool
	}{
		{"tail", "", false},
		{"nested", ",load:0x1->reg0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tables := classifier.NewTables()
			var b flow.Bundle
			for i := 0; i < n; i++ {
				s := fmt.Sprintf("table=%d,priority=0 actions=resubmit(,%d)%s", i, i+1, tc.after)
				if i == n-1 {
					s = fmt.Sprintf("table=%d,priority=0 actions=output:2", i)
				}
				r, err := flow.ParseRule(s)
				if err != nil {
					t.Fatal(err)
				}
				b.Add(r)
			}
			if _, err := tables.Apply(b); err != nil {
				t.Fatal(err)
			}
			var k flow.Key
			k.Set(flow.InPort, 1)
			res := xlate.New(tables).Translate(&k, xlate.Options{})
			if hasErr := res.Err != nil && strings.Contains(res.Err.Error(), "depth exceeds"); hasErr != tc.wantErr {
				t.Errorf("error %v, want a depth error: %v", res.Err, tc.wantErr)
			}
			if out := len(res.Actions) == 1; out == tc.wantErr {
				t.Errorf("actions %v (want output unless cut off)", res.Actions)
			}
		})
	}
}
