package northd

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/govn/govn/schema/nb"
)

// switchForwardingGroups writes the flows of a switch's forwarding groups:
// ARP replies for the group's VIP with its MAC, and the group's MAC sent
// to one of its live child ports (fwd_group).
func switchForwardingGroups(g *gen, sw *logicalSwitch) {
	for _, fg := range ReadAll[nb.ForwardingGroup](g, NB, g.Members(NB, nb.LogicalSwitchTable, sw.nb.UUID, "forwarding_groups")) {
		vip, err := netip.ParseAddr(fg.VIP)
		mac, ok := normalizeMAC(fg.VMAC)
		if err != nil || !vip.Is4() || !ok || len(fg.ChildPort) == 0 {
			g.Warn("bad forwarding group; skipping it", "name", fg.Name, "vip", fg.VIP, "vmac", fg.VMAC)
			continue
		}
		g.FlowHint(sw.dp, LSInARPRsp, 50, fmt.Sprintf("arp.tpa == %s && arp.op == 1", vip),
			fmt.Sprintf("eth.dst = eth.src; eth.src = %s; arp.op = 2; /* ARP reply */ arp.tha = arp.sha; arp.sha = %s; arp.tpa = arp.spa; arp.spa = %s; outport = inport; flags.loopback = 1; output;", mac, mac, vip), fg.UUID)
		children := make([]string, len(fg.ChildPort))
		for i, c := range fg.ChildPort {
			children[i] = fmt.Sprintf("%q", c)
		}
		liveness := ""
		if fg.Liveness {
			liveness = `liveness="true",`
		}
		g.FlowHint(sw.dp, LSInL2Lkup, 50, "eth.dst == "+mac, fmt.Sprintf("fwd_group(%schildports=%s);", liveness, strings.Join(children, ",")), fg.UUID)
	}
}
