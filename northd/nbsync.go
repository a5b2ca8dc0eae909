package northd

import (
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/nb"
	"github.com/govn/govn/schema/sb"
)

// The largest datapath tunnel key with Geneve (24 bits, less the range
// ovn-northd keeps for itself) and with VXLAN (12 bits), which ovn-northd
// publishes as NB_Global:options:max_tunid.
const (
	maxTunIDGeneve = 1<<24 - 1<<16
	maxTunIDVXLAN  = 1<<12 - 1
)

// nbSync is what WriteNB remembers between calls.
type nbSync struct {
	now func() time.Time
	// stampedCfg is the nb_cfg whose nb_cfg_timestamp has been written.
	stampedCfg int64
	stamped    bool
	// ports are the switch ports whose up column may be stale since the
	// last WriteNB; unless portsSynced, every port's may be (at the
	// start, after ResyncNB, after a Chassis change). tagsSynced says no
	// container port changed since writeTags last ran. So a write costs
	// what changed, not every port of the cluster.
	ports       map[ovsdb.UUID]bool
	portsSynced bool
	tagsSynced  bool
	// writtenCfg is SB_Global's nb_cfg as the last WriteSB left it, and
	// committedCfg that value once its transaction committed (Committed),
	// until the Southbound's own update of SB_Global is applied. So
	// WriteNB right after a commit writes sb_cfg without waiting for
	// the commit's updates to come back through Apply and another
	// engine run, as ovn-northd does from its IDL after a commit.
	writtenCfg, committedCfg   int64
	haveWritten, haveCommitted bool
}

// ResyncNB makes the next WriteNB look at every switch port again (the
// last Northbound transaction failed).
func (s *State) ResyncNB() {
	s.nbw.portsSynced, s.nbw.tagsSynced = false, false
}

// noteNB records what a change means for WriteNB's ports.
func (s *State) noteNB(ev Event) {
	w := &s.nbw
	if w.ports == nil {
		w.ports = make(map[ovsdb.UUID]bool)
	}
	rows := []*ovsdb.Row{ev.Old, ev.New}
	switch {
	case ev.DB == NB && ev.Table == nb.LogicalSwitchPortTable:
		t := s.nb.table(ev.Table)
		for _, r := range rows {
			if r == nil {
				continue
			}
			w.ports[r.UUID] = true
			if p := r.Get(t.Column("parent_name")); len(p.Keys) == 1 && p.Keys[0].Str() != "" {
				w.tagsSynced = false
			}
		}
	case ev.DB == NB && ev.Table == nb.LogicalSwitchTable:
		// The ports that joined or left the switch.
		col := s.nb.table(ev.Table).Column("ports")
		var before, after ovsdb.Datum
		if ev.Old != nil {
			before = ev.Old.Get(col)
		}
		if ev.New != nil {
			after = ev.New.Get(col)
		}
		for _, a := range before.Difference(after).Keys {
			w.ports[a.UUID()] = true
		}
		for _, a := range after.Difference(before).Keys {
			w.ports[a.UUID()] = true
		}
	case ev.DB == SB && ev.Table == sb.PortBindingTable:
		t := s.sb.table(ev.Table)
		for _, r := range rows {
			if r == nil {
				continue
			}
			if name := r.Get(t.Column("logical_port")); len(name.Keys) == 1 {
				for _, id := range s.nb.names[nb.LogicalSwitchPortTable][name.Keys[0].Str()] {
					w.ports[id] = true
				}
			}
		}
	case ev.DB == SB && ev.Table == sb.ChassisTable:
		w.portsSynced = false // is-remote decides for every port bound there
	case ev.DB == SB && ev.Table == sb.SBGlobalTable:
		w.haveCommitted = false // the snapshot has it now
	}
}

// notedWrite records SB_Global's nb_cfg as WriteSB leaves it: what its
// record says (written now, or already in the Southbound).
func (s *State) notedWrite() {
	w := &s.nbw
	w.haveWritten = false
	r := s.records[recordKey{sb.SBGlobalTable, ""}]
	if r == nil {
		return
	}
	for _, c := range r.cols {
		if c.name == "nb_cfg" && len(c.val.Keys) == 1 {
			w.writtenCfg, w.haveWritten = c.val.Keys[0].Int(), true
		}
	}
}

// notedCommit is Committed's part for WriteNB.
func (s *State) notedCommit() {
	w := &s.nbw
	w.committedCfg, w.haveCommitted = w.writtenCfg, w.haveWritten
}

func (w *nbSync) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// SouthboundTables lists the Southbound tables northd reads or writes:
// what the daemon monitors. Chassis-only tables (Controller_Event,
// Connection, SSL) are left out.
func SouthboundTables() []string {
	t := slices.Clone(recordTables)
	t = append(t, "Logical_Flow", "Logical_DP_Group", "Chassis", "Chassis_Private", "Encap",
		"Gateway_Chassis", "HA_Chassis", "Meter_Band", "MAC_Binding", "FDB", "IGMP_Group",
		"Chassis_Template_Var", "Mirror")
	slices.Sort(t)
	return slices.Compact(t)
}

// WriteNB adds to b the Northbound updates northd is responsible for,
// computed from the snapshot of both databases, and returns how many
// operations it added:
//
//   - NB_Global itself, inserted if the Northbound has none, and its
//     options mac_prefix and svc_monitor_mac (made up once, then kept),
//     max_tunid and northd_internal_version;
//   - nb_cfg_timestamp when a new nb_cfg is seen, and sb_cfg (with
//     sb_cfg_timestamp) once SB_Global.nb_cfg shows the Southbound reflects
//     it: the daemon writes the Southbound before it calls WriteNB, so
//     ovn-nbctl --wait=sb returns only once the Southbound is up to date;
//   - hv_cfg and hv_cfg_timestamp, the smallest nb_cfg any chassis has
//     caught up with (Chassis_Private; remote chassis are not waited for),
//     for ovn-nbctl --wait=hv;
//   - Logical_Switch_Port.up: from its Port_Binding's up (a port bound to a
//     remote chassis is up), always true for router ports.
//
// Call it only while holding the Southbound lock, as WriteSB. Like WriteSB
// it writes only differences: with nothing to change it adds nothing.
func (s *State) WriteNB(b TxnBuilder) int {
	ops := 0
	globals := sortedRows(s.nb.rows[nb.NBGlobalTable])
	if len(globals) == 0 {
		b.Insert(nb.NBGlobalTable, map[string]ovsdb.Datum{
			"options": dMap(s.nbOptions(nil)),
		})
		return 1 + s.writePortsUp(b) + s.writeTags(b)
	}
	var glob nb.NBGlobal
	glob.LoadRow(s.nb.table(nb.NBGlobalTable), globals[0])
	upd := make(map[string]ovsdb.Datum)
	if opts := s.nbOptions(glob.Options); !maps.Equal(opts, glob.Options) {
		upd["options"] = dMap(opts)
	}
	now := s.nbw.clock().UnixMilli()
	sbCfg, haveSB := s.southboundCfg()
	if haveSB && sbCfg != glob.NBCfg && (!s.nbw.stamped || s.nbw.stampedCfg != glob.NBCfg) {
		upd["nb_cfg_timestamp"] = dInt(now)
		s.nbw.stamped, s.nbw.stampedCfg = true, glob.NBCfg
	}
	if haveSB && sbCfg != 0 && glob.SBCfg != sbCfg {
		upd["sb_cfg"] = dInt(sbCfg)
		upd["sb_cfg_timestamp"] = dInt(now)
	}
	if hv, ts := s.chassisCfg(glob.NBCfg); glob.HVCfg != hv {
		upd["hv_cfg"] = dInt(hv)
		upd["hv_cfg_timestamp"] = dInt(ts)
	}
	if len(upd) > 0 {
		b.Update(nb.NBGlobalTable, glob.UUID, upd)
		ops++
	}
	return ops + s.writePortsUp(b) + s.writeTags(b)
}

// maxVLANTag is the largest tag a container port may have.
const maxVLANTag = 4095

// writeTags writes Logical_Switch_Port.tag of the container ports
// (parent_name set): tag_request when it is above 0, and for tag_request
// 0 a tag of its own under its parent, the lowest free from 1 on, kept
// once given. Ports are taken in UUID order so that every run hands out
// the same tags.
func (s *State) writeTags(b TxnBuilder) int {
	t := s.nb.table(nb.LogicalSwitchPortTable)
	if t == nil || s.nbw.tagsSynced {
		return 0
	}
	s.nbw.tagsSynced = true
	parentCol := t.Column("parent_name")
	var containers []*ovsdb.Row
	for _, r := range s.nb.rows[nb.LogicalSwitchPortTable] {
		if p := r.Get(parentCol); len(p.Keys) == 1 && p.Keys[0].Str() != "" {
			containers = append(containers, r)
		}
	}
	slices.SortFunc(containers, func(a, b *ovsdb.Row) int { return a.UUID.Compare(b.UUID) })
	var ports []nb.LogicalSwitchPort
	for _, r := range containers {
		var lsp nb.LogicalSwitchPort
		lsp.LoadRow(s.nb.schema.Tables[nb.LogicalSwitchPortTable], r)
		ports = append(ports, lsp)
	}
	used := map[string]map[int64]bool{}
	mark := func(parent string, tag int64) {
		if used[parent] == nil {
			used[parent] = map[int64]bool{}
		}
		used[parent][tag] = true
	}
	ops := 0
	set := func(lsp *nb.LogicalSwitchPort, tag int64) {
		if lsp.Tag == nil || *lsp.Tag != tag {
			b.Update(nb.LogicalSwitchPortTable, lsp.UUID, map[string]ovsdb.Datum{"tag": dInt(tag)})
			ops++
		}
	}
	var wanting []*nb.LogicalSwitchPort
	for i := range ports {
		lsp := &ports[i]
		switch {
		case lsp.TagRequest == nil:
		case *lsp.TagRequest > 0:
			mark(*lsp.ParentName, *lsp.TagRequest)
			set(lsp, *lsp.TagRequest)
		case lsp.Tag != nil && *lsp.Tag >= 1 && *lsp.Tag <= maxVLANTag && !used[*lsp.ParentName][*lsp.Tag]:
			mark(*lsp.ParentName, *lsp.Tag)
		default:
			wanting = append(wanting, lsp)
		}
	}
	for _, lsp := range wanting {
		tag := int64(1)
		for tag <= maxVLANTag && used[*lsp.ParentName][tag] {
			tag++
		}
		if tag > maxVLANTag {
			s.log.Warn("no free tag left under the parent port", "port", lsp.Name, "parent", *lsp.ParentName)
			continue
		}
		mark(*lsp.ParentName, tag)
		set(lsp, tag)
	}
	return ops
}

// nbOptions returns NB_Global's options with those northd fills in.
func (s *State) nbOptions(cur map[string]string) map[string]string {
	opts := maps.Clone(cur)
	if opts == nil {
		opts = make(map[string]string)
	}
	if !validMACPrefix(opts["mac_prefix"]) {
		m := randomMAC()
		opts["mac_prefix"] = m[:8]
	}
	if _, ok := opts["svc_monitor_mac"]; !ok {
		opts["svc_monitor_mac"] = randomMAC()
	}
	maxTunID := maxTunIDGeneve
	for _, r := range s.sb.rows[sb.EncapTable] {
		if stringColumn(s.sb, sb.EncapTable, r, "type") == "vxlan" {
			maxTunID = maxTunIDVXLAN
			break
		}
	}
	opts["max_tunid"] = strconv.Itoa(maxTunID)
	opts["northd_internal_version"] = northdInternalVersion
	return opts
}

// validMACPrefix says whether p is three hex octets ("0a:1b:2c"), what
// ovn-northd accepts in mac_prefix; anything else is replaced.
func validMACPrefix(p string) bool {
	var a, b, c uint8
	n, err := fmt.Sscanf(p, "%2x:%2x:%2x", &a, &b, &c)
	return err == nil && n == 3 && len(p) == 8
}

// randomMAC returns a random unicast, locally administered MAC address.
func randomMAC() string {
	var m [6]byte
	_, _ = rand.Read(m[:]) // crypto/rand.Read never fails
	m[0] = m[0]&^1 | 2
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

// southboundCfg returns SB_Global.nb_cfg: the nb_cfg whose changes the
// Southbound holds (committed by the last WriteSB's transaction, or in
// the snapshot).
func (s *State) southboundCfg() (int64, bool) {
	if s.nbw.haveCommitted {
		return s.nbw.committedCfg, true
	}
	rows := sortedRows(s.sb.rows[sb.SBGlobalTable])
	if len(rows) == 0 {
		return 0, false
	}
	return intColumn(s.sb, sb.SBGlobalTable, rows[0], "nb_cfg"), true
}

// chassisCfg returns the nb_cfg every chassis has caught up with and the
// time the last of those that are at it got there: nbCfg itself when there
// is no chassis (nothing to wait for).
func (s *State) chassisCfg(nbCfg int64) (cfg, ts int64) {
	cfg = nbCfg
	table := s.sb.table(sb.ChassisPrivateTable)
	for _, r := range sortedRows(s.sb.rows[sb.ChassisPrivateTable]) {
		var cp sb.ChassisPrivate
		cp.LoadRow(table, r)
		if cp.Chassis == nil {
			continue // a chassis that is going or not yet there
		}
		ch := s.sb.row(sb.ChassisTable, *cp.Chassis)
		if ch == nil {
			continue
		}
		var c sb.Chassis
		c.LoadRow(s.sb.table(sb.ChassisTable), ch)
		if c.OtherConfig["is-remote"] == "true" {
			continue // another availability zone's: nothing to wait for
		}
		switch {
		case cp.NBCfg < cfg:
			cfg, ts = cp.NBCfg, cp.NBCfgTimestamp
		case cp.NBCfg == cfg && cp.NBCfgTimestamp > ts:
			ts = cp.NBCfgTimestamp
		}
	}
	return cfg, ts
}

// writePortsUp writes Logical_Switch_Port.up for the ports on a switch.
// It runs on every write, so it looks the columns up once and reads rows
// through them.
func (s *State) writePortsUp(b TxnBuilder) int {
	lsp := s.nb.table(nb.LogicalSwitchPortTable)
	pb, ch := s.sb.table(sb.PortBindingTable), s.sb.table(sb.ChassisTable)
	if lsp == nil || pb == nil || ch == nil {
		return 0
	}
	lspName, lspType, lspUp := lsp.Column("name"), lsp.Column("type"), lsp.Column("up")
	pbChassis, pbUp := pb.Column("chassis"), pb.Column("up")
	chOther := ch.Column("other_config")
	bindingUp := func(port string) bool {
		for _, id := range s.sb.names[sb.PortBindingTable][port] {
			r := s.sb.row(sb.PortBindingTable, id)
			chassis := r.Get(pbChassis)
			if len(chassis.Keys) != 1 {
				continue
			}
			// A remote chassis is another availability zone's: its
			// ports are up as far as this one can tell.
			if c := s.sb.row(sb.ChassisTable, chassis.Keys[0].UUID()); c != nil {
				if v, ok := c.Get(chOther).Lookup(ovsdb.String("is-remote")); ok && v.Str() == "true" {
					return true
				}
			}
			up := r.Get(pbUp)
			return len(up.Keys) == 1 && up.Keys[0].Bool()
		}
		return false
	}
	ops := 0
	rows := s.nb.rows[nb.LogicalSwitchPortTable]
	if s.nbw.portsSynced {
		rows = make(map[ovsdb.UUID]*ovsdb.Row, len(s.nbw.ports))
		for id := range s.nbw.ports {
			if r := s.nb.rows[nb.LogicalSwitchPortTable][id]; r != nil {
				rows[id] = r
			}
		}
	}
	clear(s.nbw.ports)
	s.nbw.portsSynced = true
	for _, r := range rows {
		if len(s.nb.referrers[refKey{nb.LogicalSwitchTable, "ports", r.UUID}]) == 0 {
			continue // on no switch: no Port_Binding, nothing to report
		}
		typ := r.Get(lspType)
		up := len(typ.Keys) == 1 && typ.Keys[0].Str() == "router"
		if !up {
			if name := r.Get(lspName); len(name.Keys) == 1 {
				up = bindingUp(name.Keys[0].Str())
			}
		}
		if cur := r.Get(lspUp); len(cur.Keys) != 1 || cur.Keys[0].Bool() != up {
			b.Update(nb.LogicalSwitchPortTable, r.UUID, map[string]ovsdb.Datum{"up": dBool(up)})
			ops++
		}
	}
	return ops
}

// sortedRows returns the rows of a table in UUID order.
func sortedRows(rows map[ovsdb.UUID]*ovsdb.Row) []*ovsdb.Row {
	out := make([]*ovsdb.Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *ovsdb.Row) int { return a.UUID.Compare(b.UUID) })
	return out
}
