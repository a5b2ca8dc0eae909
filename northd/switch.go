package northd

import (
	"fmt"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

// switchPipeline generates the flows of a logical switch that do not
// belong to any one port, ACL or load balancer.
func switchPipeline(g *gen, sw *logicalSwitch) {
	dp := sw.dp
	for st := LSInCheckPortSec; st <= LSOutApplyPortSec; st++ {
		switch st {
		case LSInL2Lkup, LSInL2Unknown, LSOutApplyPortSec:
			continue
		}
		g.Flow(dp, st, 0, "1", "next;")
	}
	g.Flow(dp, LSInL2Lkup, 70, "eth.mcast", `outport = "_MC_flood"; output;`)
	g.Flow(dp, LSInL2Unknown, 50, `outport == "none"`, `outport = "_MC_unknown"; output;`)
	g.Flow(dp, LSInL2Unknown, 0, "1", "output;")
	g.Flow(dp, LSOutApplyPortSec, 0, "1", "output;")
}

// switchPort generates a logical switch port's Port_Binding and flows.
func switchPort(g *gen, sw *logicalSwitch, lsp *nb.LogicalSwitchPort) {
	key := g.PortKey(sw.nb.UUID, lsp.Name, requestedKey(g, lsp.Options))
	cols := map[string]ovsdb.Datum{
		"logical_port":  dString(lsp.Name),
		"datapath":      dUUID(g.Ref("Datapath_Binding", sw.nb.UUID.String())),
		"tunnel_key":    dInt(int64(key)),
		"type":          dString(portBindingType(lsp.Type)),
		"options":       dMap(lsp.Options),
		"mac":           dStrings(lsp.Addresses),
		"port_security": dStrings(lsp.PortSecurity),
		"external_ids":  dMap(lsp.ExternalIDs),
	}
	if lsp.ParentName != nil {
		cols["parent_port"] = dStrings([]string{*lsp.ParentName})
	}
	g.Record("Port_Binding", lsp.Name, cols)

	for _, a := range lsp.Addresses {
		f := strings.Fields(a)
		if len(f) == 0 || f[0] == "unknown" || f[0] == "router" || f[0] == "dynamic" {
			continue
		}
		g.FlowHint(sw.dp, LSInL2Lkup, 50, fmt.Sprintf("eth.dst == %s", f[0]), fmt.Sprintf("outport = %q; output;", lsp.Name), lsp.UUID)
	}
}

// portBindingType maps a logical switch port type to its Port_Binding type.
func portBindingType(t string) string {
	if t == "router" {
		return "patch"
	}
	return t
}
