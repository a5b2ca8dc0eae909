package northd

import (
	"fmt"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
)

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
