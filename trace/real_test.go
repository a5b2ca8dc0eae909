package trace

import (
	"context"
	"testing"
	"time"

	"github.com/govn/govn/internal/refovn"
)

// TestRealNorthd traces the three golden packets on the Southbound the
// real ovn-northd writes for the sandbox's topology (served by the real
// ovsdb-server): each names the Northbound rows responsible and every
// megaflow field names a rule. No golden text: ovn-northd's flows are not
// govn's.
func TestRealNorthd(t *testing.T) {
	e := refovn.Start(t, refovn.RealNorthd)
	runScript(t, "testdata/sandbox-nb.sh", e.NBRemote(), e.SBRemote())
	runScript(t, "testdata/sandbox-sb.sh", e.NBRemote(), e.SBRemote())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, n, err := Load(ctx, e.SBRemote(), e.NBRemote())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Run(ctx, s, n, Options{Datapath: tc.datapath, Microflow: tc.microflow})
			if err != nil {
				t.Fatal(err)
			}
			checkNamed(t, tc.name, r)
			checkDelivered(t, tc.name, r)
		})
	}
}

// checkDelivered checks where each golden case's packet ends: the ACL's
// nowhere, the others at a VM.
func checkDelivered(t *testing.T, name string, r *Result) {
	t.Helper()
	last := r.Hops[len(r.Hops)-1]
	if name == "acl-drop" {
		if len(last.Outputs) != 0 {
			t.Errorf("the ACL's packet came out: %+v", last.Outputs)
		}
		return
	}
	if len(last.Outputs) != 1 || last.Outputs[0].Name == "(geneve tunnel)" {
		t.Errorf("outputs %+v, want delivery to a VM", last.Outputs)
	}
}
