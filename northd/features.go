package northd

import (
	"github.com/govn/govn/ovsdb"
)

// Features are what every chassis's ovn-controller supports, as each says
// in its Chassis other_config. ovn-northd writes some flows differently
// when a feature is missing on any chassis (ct_lb and ct_label.blocked
// without ct-no-masked-label), so a Southbound with one old chassis works
// for all. With no chassis at all, every feature counts as supported.
type Features struct {
	CTNoMaskedLabel     bool // "ct-no-masked-label": ct_lb_mark and ct_mark.blocked
	CTLBRelated         bool // "ovn-ct-lb-related"
	MACBindingTimestamp bool // "mac-binding-timestamp"
	FDBTimestamp        bool // "fdb-timestamp"
	PortUpNotif         bool // "port-up-notif"
}

// featureNames are the other_config keys of the Features, in field order.
var featureNames = [...]string{"ct-no-masked-label", "ovn-ct-lb-related", "mac-binding-timestamp", "fdb-timestamp", "port-up-notif"}

// featureCount counts, per feature, the chassis that lack it.
type featureCount [len(featureNames)]int

func (c *featureCount) features() Features {
	return Features{
		CTNoMaskedLabel:     c[0] == 0,
		CTLBRelated:         c[1] == 0,
		MACBindingTimestamp: c[2] == 0,
		FDBTimestamp:        c[3] == 0,
		PortUpNotif:         c[4] == 0,
	}
}

// count adds (n = 1) or removes (n = -1) the features chassis row r lacks.
func (c *featureCount) count(d *rowDB, r *ovsdb.Row, n int) {
	if r == nil {
		return
	}
	oc, _ := d.column("Chassis", r, "other_config")
	for i, name := range featureNames {
		v, ok := oc.Lookup(ovsdb.String(name))
		if !ok || v.Str() != "true" {
			c[i] += n
		}
	}
}

// featuresDep is the dependency of every generator that reads Features:
// it is invalidated only when the features change, not whenever a chassis
// row does.
var featuresDep = depKey{db: SB, kind: depDerived, name: "features"}

// applyChassis updates the feature counts for a change of a Chassis row.
func (s *State) applyChassis(old, new *ovsdb.Row) {
	before := s.featureCount.features()
	s.featureCount.count(s.sb, old, -1)
	s.featureCount.count(s.sb, new, 1)
	if s.featureCount.features() != before {
		s.touch(featuresDep)
	}
}

// Features returns what every chassis supports.
func (g *gen) Features() Features {
	g.dep(featuresDep)
	return g.s.featureCount.features()
}
