package northd

import (
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// genHAChassisGroup copies a Northbound HA chassis group to the
// Southbound, its chassis named by their Southbound Chassis rows (left
// out while a chassis has not registered).
func genHAChassisGroup(g *gen) {
	grp, ok := Read[nb.HAChassisGroup](g, NB, g.ID())
	if !ok {
		return
	}
	var rows []map[string]ovsdb.Datum
	for _, hc := range ReadAll[nb.HAChassis](g, NB, grp.HAChassis) {
		var ch ovsdb.Datum
		if ids := g.ByName(SB, "Chassis", hc.ChassisName); len(ids) > 0 {
			ch = dUUID(ids[0])
		}
		rows = append(rows, map[string]ovsdb.Datum{
			"chassis":      ch,
			"priority":     dInt(hc.Priority),
			"external_ids": dMap(map[string]string{"chassis-name": hc.ChassisName}),
		})
	}
	g.RecordWithChildren("HA_Chassis_Group", grp.Name, map[string]ovsdb.Datum{
		"name":         dString(grp.Name),
		"external_ids": dMap(grp.ExternalIDs),
	}, map[string]childRows{"ha_chassis": {table: "HA_Chassis", rows: rows}})
}
