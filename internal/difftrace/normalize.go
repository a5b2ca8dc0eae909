package difftrace

import (
	"regexp"
	"strconv"
	"strings"
)

// What the comparison ignores, and why.
//
// The harness compares what ovn-trace --minimal prints: the packet's
// outputs and the changes made to its fields on the way, nested under the
// transformations (ct_next, ct_lb, ct_dnat, arp, nd_na, icmp4, clone...)
// that produced them. It is normalized first:
//
//   - Registers. Assignments to registers (reg0..reg15, xreg*, xxreg*, and
//     the logical fields that live in them: flags.*, inport, outport) are
//     dropped, and a register named inside a line that is kept (eth.src =
//     xreg0[0..47]; the packet dump of a LOG line) becomes REG. Which
//     register carries which intermediate result is northd's own business;
//     what reaches the packet and where it goes is what must agree.
//   - Port and datapath tunnel keys. The microflow ovn-trace echoes names
//     the inport by its key (reg14=0x3) and metadata by the datapath's key;
//     northd allocates those freely, so they are removed from the echo.
//   - UUIDs: become UUID.
//   - Generated names: the address sets ovn-northd makes for router load
//     balancers ($_rtr_lb_N_ip4) are numbered in hash order; N becomes N.
//   - ECMP member numbering: the ids of a select() are arbitrary (ovn-northd
//     23.03 numbers members in hash order). Each member is traced
//     (--select-id), the id in "select: REG = id" becomes ID, and the
//     members' traces are compared as a sorted set, not by id.
//   - Load-balancer backends: ovn-trace picks one at random unless told
//     (--lb-dst). Each backend is traced and the traces, labelled by the
//     backend address, are compared as a sorted set, so the order in which
//     northd lists backends does not matter but the backends do.
//   - The ovn-trace 23.03 abort: tracing nd_na_router or put_nd_ra_opts
//     fails an assertion and kills ovn-trace (it casts the action to the
//     wrong type). Before tracing, the harness rewrites those actions in
//     each Southbound (northd stopped, so nothing rewrites them back), the
//     same way on both: nd_na_router { A } becomes nd_na { pkt.mark = M; A }
//     with M a fixed marker, and R = put_nd_ra_opts(O) becomes R = 1;
//     pkt.mark = K with K a marker for the options O (ovn-trace itself only
//     sets R to 1 there). ovn-trace executes nd_na and nd_na_router alike,
//     so the traces are those ovn-trace would print without the bug. The
//     markers are then turned back into text: the nd_na holding marker M
//     reads nd_na_router, and "pkt.mark = K" reads put_nd_ra_opts(O), with
//     O as that side's northd wrote it. A packet that still crashes
//     ovn-trace compares as "<ovn-trace aborted>".
//
// Nothing else is normalized: every output, every field change, every
// drop that ovn-trace shows, and the structure that nests them, must be
// the same on both Southbounds.

// ndRouterMark is the pkt.mark that stands for nd_na_router; the marks
// of put_nd_ra_opts count up from raOptsMark.
const (
	ndRouterMark = 0xfe00_0000
	raOptsMark   = 0xfe00_0001
)

var (
	regValue     = regexp.MustCompile(`\b(x{0,2}reg\d+|metadata)=0x[0-9a-fA-F]+,?`)
	regName      = regexp.MustCompile(`\bx{0,2}reg\d+(\[\d+(\.\.\d+)?\])?`)
	regOnly      = regexp.MustCompile(`^(REG|flags\.[a-z_]+|inport|outport)\s*(=|<->)\s*(.*?);?$`)
	regOperand   = regexp.MustCompile(`^(REG|flags\.[a-z_]+|inport|outport)$`)
	uuidRE       = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	rtrLBName    = regexp.MustCompile(`_rtr_lb_\d+_ip`)
	selectChoice = regexp.MustCompile(`select: (.*) = \d+`)
	markLine     = regexp.MustCompile(`^pkt\.mark = (\d+|0x[0-9a-fA-F]+);?$`)
)

// normalize brings one trace into the form that is compared; marks maps
// the put_nd_ra_opts markers of the trace's Southbound to their options.
func normalize(t traceText, marks map[int64]string) string {
	var b strings.Builder
	b.WriteString(regValue.ReplaceAllString(t.header, ""))
	b.WriteByte('\n')
	var out []string
	for _, line := range strings.Split(strings.TrimRight(t.minimal, "\n"), "\n") {
		line = regValue.ReplaceAllString(line, "")
		line = regName.ReplaceAllString(line, "REG")
		line = uuidRE.ReplaceAllString(line, "UUID")
		line = rtrLBName.ReplaceAllString(line, "_rtr_lb_N_ip")
		line = selectChoice.ReplaceAllString(line, "select: $1 = ID")
		text := strings.TrimSpace(line)
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		if m := regOnly.FindStringSubmatch(text); m != nil && (m[2] == "=" || regOperand.MatchString(m[3])) {
			continue
		}
		if m := markLine.FindStringSubmatch(text); m != nil {
			v, _ := strconv.ParseInt(m[1], 0, 64)
			if v == ndRouterMark && len(out) > 0 && strings.HasSuffix(out[len(out)-1], "nd_na {") {
				out[len(out)-1] = strings.TrimSuffix(out[len(out)-1], "nd_na {") + "nd_na_router {"
				continue
			}
			if opts, ok := marks[v]; ok {
				out = append(out, indent+"put_nd_ra_opts("+opts+");")
				continue
			}
		}
		if text == "" {
			continue
		}
		out = append(out, line)
	}
	b.WriteString(strings.Join(out, "\n"))
	return b.String()
}
