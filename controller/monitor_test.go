package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// The chassis asks for the port bindings that can make a datapath local,
// and then for the local datapaths' rows; ovn-monitor-all asks for all.
func TestMonitorConditions(t *testing.T) {
	ch, dp, group := uid(1), uid(2), uid(3)
	for _, tc := range []struct {
		name       string
		dps        []ovsdb.UUID
		groups     []ovsdb.UUID
		monitorAll bool
		// want is each table's condition, as condKey prints it.
		want map[string]string
	}{
		{"nothing local yet", nil, nil, false, map[string]string{
			sb.PortBindingTable: `type == {[patch] []};type == {[chassisredirect] []};options includes {[l3gateway-chassis] [hv1]};` +
				`chassis == {[` + ch.String() + `] []};logical_port == {[vm1] []};`,
			sb.LogicalFlowTable:    " false {[] []};",
			sb.MulticastGroupTable: " false {[] []};",
			sb.MACBindingTable:     " false {[] []};",
		}},
		{"a local datapath in a group", []ovsdb.UUID{dp}, []ovsdb.UUID{group}, false, map[string]string{
			sb.LogicalFlowTable:    "logical_datapath == {[" + dp.String() + "] []};logical_dp_group == {[" + group.String() + "] []};",
			sb.MulticastGroupTable: "datapath == {[" + dp.String() + "] []};",
			sb.MACBindingTable:     "datapath == {[" + dp.String() + "] []};",
		}},
		{"ovn-monitor-all", []ovsdb.UUID{dp}, nil, true, map[string]string{
			sb.PortBindingTable: "all", sb.LogicalFlowTable: "all", sb.MulticastGroupTable: "all", sb.MACBindingTable: "all",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := monitorConditions("hv1", ch, []string{"vm1"}, tc.dps, tc.groups, tc.monitorAll)
			for table, want := range tc.want {
				if k := condKey(got[table]); k != want {
					t.Errorf("%s:\n got %s\nwant %s", table, k, want)
				}
			}
		})
	}
	pb := condKey(monitorConditions("hv1", ch, nil, []ovsdb.UUID{dp}, nil, false)[sb.PortBindingTable])
	if want := "datapath == {[" + dp.String() + "] []};"; !strings.HasSuffix(pb, want) {
		t.Errorf("port bindings of a local datapath not monitored: %s", pb)
	}
}

// A switch's patch port makes the router at its peer local, and so the
// router's datapath group: the conditions the chassis then sends.
func TestLocalDatapathsThroughPatch(t *testing.T) {
	tr, err := NewTranslator()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(1)
	e := NewEngine(tr, nil)
	e.Load(w.snapshot())
	runEngine(t, e)
	dps, _ := e.LocalDatapaths()
	if slices.Contains(dps, uid(wLR)) {
		t.Fatalf("router local before any patch port: %v", dps)
	}
	w.togglePatch(0)
	w.in.DPGroups = append(w.in.DPGroups, sb.LogicalDPGroup{UUID: uid(wGroup + 1), Datapaths: []ovsdb.UUID{uid(wLR)}})
	e.Load(w.snapshot())
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dps, groups := e.LocalDatapaths()
	if !slices.Contains(dps, uid(wLR)) || !slices.Contains(groups, uid(wGroup+1)) {
		t.Errorf("after the patch ports: datapaths %v, groups %v; want the router and its group", dps, groups)
	}
}
