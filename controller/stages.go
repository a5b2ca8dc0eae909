package controller

import (
	"sort"
	"strings"

	"github.com/govn/govn/lflow"
)

// TableStage names what datapath table t does in the layout of the
// package documentation ("physical to logical", "remote output", the
// lookup table of get_arp ...), and for the logical pipelines' tables
// the pipeline and logical table (ingress 3). Tools that explain rules
// (govn trace) use it.
func TableStage(t uint8) string {
	l := lflow.DefaultLayout()
	switch {
	case t == tablePhysToLog:
		return "physical to logical"
	case t >= tableIngress && t < tableLargeDetect:
		return "logical ingress"
	case t == tableLargeDetect, t == tableLargeProcess:
		return "output: packet size check"
	case t == tableRemoteOutput:
		return "remote output"
	case t == tableLocalOutput:
		return "local output"
	case t == tableLoopback:
		return "loopback check"
	case t >= tableEgress && t < tableSaveInport:
		return "logical egress"
	case t == tableSaveInport:
		return "save in_port (loopback)"
	case t == tableLogToPhys:
		return "logical to physical"
	}
	var names []string
	for name, lk := range l.Lookups {
		if lk.Table == t {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return "lookup table of " + strings.Join(names, ", ")
}
