package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/datapath/megaflow"
	"github.com/govn/govn/datapath/port"
	"github.com/govn/govn/datapath/switchd"
	"github.com/govn/govn/incproc"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/pinctrl"
	"github.com/govn/govn/schema/sb"
	"github.com/govn/govn/schema/vswitch"
	"github.com/govn/govn/unixctl"
)

// parseRule reads the physical rules this package writes.
var parseRule = flow.ParseRule

// Config configures Run.
type Config struct {
	// LocalDB is the local Open_vSwitch database ("unix:PATH").
	LocalDB string
	Logger  *slog.Logger
	// Commands, if not nil, receives the control commands (the
	// datapath's and the controller's) once the datapath runs; stop
	// ends Run.
	Commands func(cmds map[string]unixctl.Command)
	// Stop ends Run (the exit command calls it).
	Stop func()
	// Observe, if not nil, is given the parts of the running chassis
	// whose counters metrics read, once the datapath runs.
	Observe func(Sources)
	// Applied, if not nil, is told for each batch of Southbound changes
	// how long it took from its arrival until its flows were installed
	// and the bindings written back.
	Applied func(latency time.Duration)
}

// Sources are the parts of a running chassis that metrics read; each is
// safe to use from any goroutine.
type Sources struct {
	Engine  func() []incproc.NodeStats
	Switch  *switchd.Switch
	Pinctrl func() pinctrl.Stats
}

// integrationBridge is the bridge OVN's ports are on unless
// external_ids:ovn-bridge says otherwise.
const integrationBridge = "br-int"

// features are the Chassis other_config features govn chassis
// supports: conntrack marks and labels without masks, reporting a port
// up in Port_Binding.up once its flows are in, and ct_lb_mark's options
// with NAT of related traffic (ct_commit_nat). ovn-northd writes the
// newer forms of its flows only when every chassis has a feature, so a
// real chassis next to govn's gets them too.
var features = map[string]string{
	"ct-no-masked-label": "true",
	"port-up-notif":      "true",
	"ovn-ct-lb-related":  "true",
}

// chassis is the running state of Run.
type chassis struct {
	cfg   Config
	log   *slog.Logger
	local *client.Client
	sw    *switchd.Switch
	eng   *Engine
	// kick wakes the loop (inc-engine/recompute).
	kick chan struct{}

	sbRemote  string
	sb        *client.Client
	sbCancel  context.CancelFunc
	sbNow     atomic.Pointer[client.Client] // sb, for pinctrl's goroutine
	sbChanges *sbChanges
	condsSent map[string]string // per conditional table: condKey

	ifaces   map[string]*iface    // by interface name
	afpacket *port.AFPacketOpener // opens VIFs with sockets made ahead
	nextPort uint32
	tunnel   *tunnelPort
	bfd      *pinctrl.TunnelBFD // BFD over the tunnel (bfd.go)

	problems map[string]bool // logged already
	// portSeen is when each iface-id was first seen without
	// ovn-installed, to log how long it took to get there.
	portSeen map[string]time.Time
	// sbSince is when the oldest Southbound change fed to the engine but
	// not yet installed arrived (Config.Applied).
	sbSince time.Time
	// flowLimit is the megaflow cap last set from other_config (-1:
	// none yet); upcall/set-flow-limit overrides it until the setting
	// changes.
	flowLimit int
}

type iface struct {
	no  uint32
	err string
	// tap is an internal port's device, persistent while the port is in
	// the database: it keeps the host's addresses (the encap IP on the
	// underlay bridge) when govn chassis crashes and restarts, as Open
	// vSwitch's internal devices do.
	tap *port.TAP
	mtu int64 // the MTU set on tap from mtu_request; 0 for none
}

type tunnelPort struct {
	no uint32
	ip netip.Addr
}

// Run is govn chassis' controller and datapath: it programs the datapath
// from the Southbound named in the local database until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Stop == nil {
		cfg.Stop = cancel
	}
	local, err := client.New(client.Options{Endpoints: []string{cfg.LocalDB}, Database: vswitch.DatabaseName, Logger: log.With("db", "local")})
	if err != nil {
		return fmt.Errorf("local database: %w", err)
	}
	go local.Run(ctx)
	defer local.Close()
	if err := local.WaitConnected(ctx); err != nil {
		return fmt.Errorf("local database %s: %w", cfg.LocalDB, err)
	}
	tr, err := NewTranslator()
	if err != nil {
		return err
	}
	sw, err := switchd.New(switchd.Config{Logger: log})
	if err != nil {
		return err
	}
	c := &chassis{cfg: cfg, log: log, local: local, sw: sw, eng: NewEngine(tr, log.With("engine", "controller")),
		kick: make(chan struct{}, 1), ifaces: map[string]*iface{}, nextPort: 1,
		problems: map[string]bool{}, portSeen: map[string]time.Time{}, flowLimit: -1,
		afpacket: port.NewAFPacketOpener()}
	defer c.afpacket.Close()
	defer c.stopSB()
	systemID := func() string {
		if ovs := client.List[vswitch.OpenVSwitch](local.Cache()); len(ovs) > 0 {
			return ovs[0].ExternalIDs["system-id"]
		}
		return ""
	}
	pc, err := pinctrl.New(pinctrl.Config{Switch: sw.Datapath(), SB: c.sbNow.Load, Chassis: systemID, Logger: log.With("module", "pinctrl")})
	if err != nil {
		return err
	}
	c.bfd = pc.TunnelBFD()
	c.bfd.OnChange(c.wake)
	swDone := make(chan error, 1)
	go func() { swDone <- sw.Run(ctx, nil) }()
	if cfg.Commands != nil {
		cmds := sw.Commands(cfg.Stop)
		cmds["version"] = func([]string) (string, error) {
			return "govn chassis (ovn-controller of OVN 23.03, ovs-vswitchd of Open vSwitch 3.1)\n", nil
		}
		cmds["ct-zone-list"] = c.ctZoneList
		cmds["bfd/show"] = func([]string) (string, error) { return c.bfd.String() + pc.PortBFD().String(), nil }
		cmds["pinctrl/show"] = func([]string) (string, error) {
			ds := sw.Datapath().Stats()
			return pc.Stats().String() + fmt.Sprintf("datapath packet-ins: sent %d, dropped %d (queue full)\n", ds.PacketIns, ds.PacketInDrops), nil
		}
		cmds["inc-engine/verify"] = func([]string) (string, error) {
			return strings.Join(c.eng.Verify(c.sw.Pipeline().Tables().Dump(flow.NumTables)), "\n") + "\n", nil
		}
		for name, cmd := range c.eng.Commands(c.wake) {
			cmds[name] = cmd
		}
		cfg.Commands(cmds)
	}
	if cfg.Observe != nil {
		cfg.Observe(Sources{Engine: c.eng.Stats, Switch: sw, Pinctrl: pc.Stats})
	}
	go pc.Run(ctx)

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		lc := local.Cache().Changed()
		var sc <-chan struct{}
		if c.sbChanges != nil {
			sc = c.sbChanges.wake
		}
		if err := c.iterate(ctx); err != nil && ctx.Err() == nil {
			log.Warn("chassis iteration", "err", err)
		}
		select {
		case <-ctx.Done():
			return <-swDone
		case err := <-swDone:
			return err
		case <-lc:
		case <-sc:
		case <-c.kick:
		case <-tick.C:
		}
	}
}

// wake makes the loop iterate soon.
func (c *chassis) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *chassis) stopSB() {
	if c.sbCancel != nil {
		c.sbCancel()
		c.sb.Close()
		c.sb, c.sbCancel, c.sbChanges = nil, nil, nil
		c.sbNow.Store(nil)
	}
}

// iterate brings everything in line with the two databases once.
func (c *chassis) iterate(ctx context.Context) error {
	// How long each step took, at debug level: where a port's time to
	// ovn-installed goes.
	start := time.Now()
	var steps []any
	step := func(name string) { steps = append(steps, name, time.Since(start)) }
	defer func() {
		if len(steps) > 0 {
			c.log.Debug("iteration", steps...)
		}
	}()
	lc := c.local.Cache()
	ovs := client.List[vswitch.OpenVSwitch](lc)
	if len(ovs) == 0 {
		// ovs-vsctl needs the row; ovs-ctl's "ovs-vsctl init" would
		// make it.
		_, err := c.local.Do(ctx, func(t *client.Txn) error {
			if lc.Len(vswitch.OpenVSwitchTable) == 0 {
				// Only into an empty table: the cache may lag the
				// server just after connecting.
				zero := 0
				t.Add(client.Operation{Op: "wait", Table: vswitch.OpenVSwitchTable, Columns: []string{"_uuid"},
					Until: "==", Rows: []map[string]ovsdb.Datum{}, Timeout: &zero})
				t.InsertModel(&vswitch.OpenVSwitch{})
			}
			return nil
		})
		return err
	}
	root := ovs[0]
	ids := root.ExternalIDs
	c.applyFlowLimit(root.OtherConfig["flow-limit"])
	ifaceIDs := map[string]bool{}
	now := time.Now()
	for _, li := range interfaces(lc) {
		if id := li.row.ExternalIDs["iface-id"]; id != "" && li.bridge == integrationBridge {
			ifaceIDs[id] = true
			if _, ok := c.portSeen[id]; !ok && li.row.ExternalIDs["ovn-installed"] != "true" {
				c.portSeen[id] = now
			}
		}
	}
	for id := range c.portSeen {
		if !ifaceIDs[id] {
			delete(c.portSeen, id)
		}
	}
	zones, zonesChanged := allocateZones(root.ExternalIDs, c.sb, ifaceIDs)
	err := c.reconcilePorts(ctx, lc, root, zonesChanged, zones)
	step("ports")
	if err != nil {
		return err
	}
	ifaceList := make([]string, 0, len(ifaceIDs))
	for id := range ifaceIDs {
		ifaceList = append(ifaceList, id)
	}
	sort.Strings(ifaceList)
	monitorAll := ids["ovn-monitor-all"] == "true"
	remote := ids["ovn-remote"]
	if remote != c.sbRemote {
		c.stopSB()
		c.sbRemote = remote
		if remote != "" {
			conds := monitorConditions(ids["system-id"], ovsdb.UUID{}, ifaceList, nil, nil, monitorAll)
			if err := c.startSB(ctx, remote, conds); err != nil {
				return err
			}
		}
	}
	if c.sb == nil {
		return nil
	}
	name := ids["system-id"]
	if name == "" {
		return nil
	}
	chUUID, err := c.register(ctx, name, ids)
	if err != nil {
		return fmt.Errorf("registering chassis %s: %w", name, err)
	}
	if err := c.ensureTunnel(ids); err != nil {
		c.problemOnce(err.Error())
	}
	c.configureBFD(name)
	if err := c.compute(ctx, name, chUUID, zones, ifaceList, monitorAll); err != nil {
		return err
	}
	step("engine")
	for _, p := range c.eng.Problems() {
		c.problemOnce(p)
	}
	if _, err := c.eng.Commit(func(b flow.Bundle) error { _, err := c.sw.Pipeline().Apply(b); return err }); err != nil {
		return fmt.Errorf("installing flows: %w", err)
	}
	step("install")
	err = c.writeBack(ctx, name, chUUID, c.eng.Bind())
	step("writeback")
	if err == nil && !c.sbSince.IsZero() {
		if c.cfg.Applied != nil {
			c.cfg.Applied(time.Since(c.sbSince))
		}
		c.sbSince = time.Time{}
	}
	return err
}

// applyFlowLimit sets the datapath's megaflow cap from the local
// database's other_config:flow-limit, as ovs-vswitchd takes it (absent
// or not a number ≥ 0: the default).
func (c *chassis) applyFlowLimit(text string) {
	limit := megaflow.DefaultFlowLimit
	if n, err := strconv.Atoi(text); err == nil && n >= 0 {
		limit = n
	} else if text != "" {
		c.problemOnce(fmt.Sprintf("other_config:flow-limit=%q is not a number of flows; using %d", text, limit))
	}
	if limit == c.flowLimit {
		return
	}
	evicted, err := c.sw.Datapath().SetFlowLimit(limit)
	if err != nil {
		c.problemOnce(err.Error())
		return
	}
	c.flowLimit = limit
	if evicted > 0 || text != "" {
		c.log.Info("flow limit", "limit", limit, "evicted", evicted)
	}
}

// compute runs the engine on the Southbound's changes and the local
// state; when that changes which datapaths are local, it monitors their
// rows and runs again.
func (c *chassis) compute(ctx context.Context, name string, chUUID ovsdb.UUID, zones map[string]uint16, ifaceList []string, monitorAll bool) error {
	for pass := 0; pass < 16; pass++ {
		dps, groups := c.eng.LocalDatapaths()
		changed, err := c.updateMonitor(ctx, monitorConditions(name, chUUID, ifaceList, dps, groups, monitorAll))
		if err != nil {
			c.problemOnce(err.Error())
		}
		if pass > 0 && !changed {
			return nil
		}
		if since := c.eng.feed(c.sb.Cache(), c.sbChanges); !since.IsZero() && (c.sbSince.IsZero() || since.Before(c.sbSince)) {
			c.sbSince = since
		}
		c.eng.SetLocal(c.input(name, chUUID, zones))
		if c.eng.NeedsRun() {
			if err := c.eng.Run(ctx); err != nil {
				return fmt.Errorf("controller engine: %w", err)
			}
		}
	}
	return nil
}

func (c *chassis) problemOnce(p string) {
	if !c.problems[p] {
		c.problems[p] = true
		c.log.Warn("skipped", "what", p)
	}
}

func (c *chassis) startSB(ctx context.Context, remote string, conds map[string][]client.Condition) error {
	eps := strings.Split(remote, ",")
	sctx, cancel := context.WithCancel(ctx)
	changes := newSBChanges()
	initial := map[string][]client.Condition{}
	sent := map[string]string{}
	for t, cs := range conds {
		if cs != nil {
			initial[t] = cs
		}
		sent[t] = condKey(cs)
	}
	cl, err := client.New(client.Options{Endpoints: eps, Database: sb.DatabaseName, Logger: c.log.With("db", "sb"),
		Conditions: initial, OnChange: changes.onChange})
	if err != nil {
		cancel()
		return fmt.Errorf("southbound %s: %w", remote, err)
	}
	go cl.Run(sctx)
	c.sb, c.sbCancel, c.sbChanges, c.condsSent = cl, cancel, changes, sent
	c.sbNow.Store(cl)
	c.log.Info("connecting to the southbound", "remote", remote)
	return nil
}

// register makes this chassis' Chassis, Encap and Chassis_Private rows
// and returns the Chassis row's UUID (zero until it exists).
func (c *chassis) register(ctx context.Context, name string, ids map[string]string) (ovsdb.UUID, error) {
	cache := c.sb.Cache()
	if cache.Schema() == nil {
		return ovsdb.UUID{}, nil
	}
	encapIP := ids["ovn-encap-ip"]
	encapType := ids["ovn-encap-type"]
	if encapType == "" {
		encapType = "geneve"
	}
	other := map[string]string{"datapath-type": "netdev", "iface-types": "afpacket,internal,geneve",
		"ovn-bridge-mappings": ids["ovn-bridge-mappings"], "ovn-cms-options": ids["ovn-cms-options"]}
	for k, v := range features {
		other[k] = v
	}
	find := func() (sb.Chassis, bool) {
		for _, ch := range client.List[sb.Chassis](cache) {
			if ch.Name == name {
				return ch, true
			}
		}
		return sb.Chassis{}, false
	}
	ch, ok := find()
	upToDate := ok && ch.Hostname == ids["hostname"] && sameMap(ch.OtherConfig, other) && c.encapUpToDate(ch, encapType, encapIP)
	if !upToDate {
		_, err := c.sb.Do(ctx, func(t *client.Txn) error {
			ch, ok := find()
			var encaps []ovsdb.UUID
			for _, ty := range strings.Split(encapType, ",") {
				encaps = append(encaps, t.InsertModel(&sb.Encap{ChassisName: name, IP: encapIP, Type: ty, Options: map[string]string{"csum": "true"}}))
			}
			row := &sb.Chassis{Name: name, Hostname: ids["hostname"], Encaps: encaps, OtherConfig: other, ExternalIDs: ch.ExternalIDs}
			if ok {
				t.UpdateModel(row, ch.UUID, "hostname", "encaps", "other_config")
			} else {
				t.InsertModel(row)
			}
			return nil
		})
		if err != nil {
			return ovsdb.UUID{}, err
		}
		if ch, ok = find(); !ok {
			return ovsdb.UUID{}, errors.New("chassis row missing after insert")
		}
		c.log.Info("registered chassis", "name", name, "encap", encapType+":"+encapIP)
	}
	var priv *sb.ChassisPrivate
	for _, p := range client.List[sb.ChassisPrivate](cache) {
		if p.Name == name {
			priv = &p
			break
		}
	}
	if priv == nil || priv.Chassis == nil || *priv.Chassis != ch.UUID {
		id := ch.UUID
		_, err := c.sb.Do(ctx, func(t *client.Txn) error {
			row := &sb.ChassisPrivate{Name: name, Chassis: &id}
			if priv != nil {
				t.UpdateModel(row, priv.UUID, "chassis")
			} else {
				t.InsertModel(row)
			}
			return nil
		})
		if err != nil {
			return ovsdb.UUID{}, err
		}
	}
	return ch.UUID, nil
}

func (c *chassis) encapUpToDate(ch sb.Chassis, ty, ip string) bool {
	types := strings.Split(ty, ",")
	if len(ch.Encaps) != len(types) {
		return false
	}
	for _, id := range ch.Encaps {
		e, ok := client.Get[sb.Encap](c.sb.Cache(), id)
		if !ok || e.IP != ip || !strings.Contains(","+ty+",", ","+e.Type+",") {
			return false
		}
	}
	return true
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// ensureTunnel opens the Geneve port on the encap IP.
func (c *chassis) ensureTunnel(ids map[string]string) error {
	if !strings.Contains(ids["ovn-encap-type"], "geneve") && ids["ovn-encap-type"] != "" {
		return fmt.Errorf("encap type %q: only geneve is supported", ids["ovn-encap-type"])
	}
	ip, err := netip.ParseAddr(ids["ovn-encap-ip"])
	if err != nil {
		return nil // no tunnel until the encap IP is set
	}
	if c.tunnel != nil && c.tunnel.ip == ip {
		return nil
	}
	if c.tunnel != nil {
		_ = c.sw.Datapath().RemovePort(c.tunnel.no)
		c.tunnel = nil
	}
	p, err := port.NewUDPTunnel(port.EncapGeneve, netip.AddrPortFrom(ip, port.GenevePort), port.GenevePort)
	if err != nil {
		return fmt.Errorf("geneve port on %s: %w", ip, err)
	}
	no := c.allocPort()
	if err := c.sw.Datapath().AddPort(no, p); err != nil {
		p.Close()
		return err
	}
	c.tunnel = &tunnelPort{no: no, ip: ip}
	c.log.Info("geneve port open", "ip", ip, "port", no)
	return nil
}

// applyMTU sets an internal port's device MTU to the interface's
// mtu_request, as ovs-vswitchd does: the underlay bridge's internal port
// carries the tunnel's datagrams, which a 1500-byte default would
// fragment. A failure is logged and tried again on the next change.
func (c *chassis) applyMTU(ifc *iface, row vswitch.Interface) {
	if ifc.tap == nil || row.MTURequest == nil || *row.MTURequest == ifc.mtu {
		return
	}
	if err := ifc.tap.SetMTU(int(*row.MTURequest)); err != nil {
		c.log.Warn("cannot set mtu_request", "interface", row.Name, "mtu", *row.MTURequest, "err", err)
		return
	}
	ifc.mtu = *row.MTURequest
}

func (c *chassis) allocPort() uint32 {
	no := c.nextPort
	c.nextPort++
	return no
}

// localIface is one interface of the local database.
type localIface struct {
	row    vswitch.Interface
	bridge string
}

// interfaces lists the local database's interfaces with their bridges.
func interfaces(lc *client.Cache) []localIface {
	var out []localIface
	for _, br := range client.List[vswitch.Bridge](lc) {
		for _, pid := range br.Ports {
			p, ok := client.Get[vswitch.Port](lc, pid)
			if !ok {
				continue
			}
			for _, iid := range p.Interfaces {
				if i, ok := client.Get[vswitch.Interface](lc, iid); ok {
					out = append(out, localIface{row: i, bridge: br.Name})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].row.Name < out[j].row.Name })
	return out
}

// reconcilePorts opens and closes the datapath's ports to match the
// local database's interfaces and writes back their ofport, the ct zones
// and cur_cfg.
func (c *chassis) reconcilePorts(ctx context.Context, lc *client.Cache, root vswitch.OpenVSwitch, zonesChanged bool, zones map[string]uint16) error {
	list := interfaces(lc)
	seen := map[string]bool{}
	for _, li := range list {
		name := li.row.Name
		seen[name] = true
		if cur := c.ifaces[name]; cur != nil && cur.err == "" {
			c.applyMTU(cur, li.row)
			continue
		}
		var p port.Port
		var tap *port.TAP
		var err error
		opening := time.Now()
		switch li.row.Type {
		case "internal":
			if tap, err = port.NewInternal(name); err == nil {
				if err = tap.SetPersistent(true); err != nil {
					tap.Close()
				}
				p = tap
			}
		case "", "system", "afpacket":
			p, err = c.afpacket.Open(name)
		default:
			err = fmt.Errorf("interface type %q is not supported", li.row.Type)
		}
		if err == nil {
			opened := time.Since(opening)
			no := c.allocPort()
			if err = c.sw.Datapath().AddPort(no, p); err != nil {
				p.Close()
			} else {
				c.ifaces[name] = &iface{no: no, tap: tap}
				c.applyMTU(c.ifaces[name], li.row)
				c.log.Info("port added", "interface", name, "bridge", li.bridge, "port", no,
					"open", opened, "add", time.Since(opening)-opened)
				continue
			}
		}
		if c.ifaces[name] == nil {
			c.log.Warn("cannot open interface", "interface", name, "err", err)
		}
		c.ifaces[name] = &iface{err: err.Error()}
	}
	for name, ifc := range c.ifaces {
		if !seen[name] {
			switch {
			case ifc.err != "":
			case ifc.tap != nil:
				// Gone from the database: the device goes with the port.
				_ = ifc.tap.SetPersistent(false)
				_ = c.sw.Datapath().RemovePort(ifc.no)
			default:
				// Closing an AF_PACKET port waits for the kernel (an RCU
				// grace period per socket and ring: 50-80 ms on a loaded
				// machine) and for its receive goroutine to notice: in
				// the background, so that the ports added and the flows
				// installed in this iteration do not wait. Port numbers
				// are not reused, and a device opened again meanwhile
				// gets sockets of its own.
				go func(no uint32) {
					start := time.Now()
					err := c.sw.Datapath().RemovePort(no)
					c.log.Debug("port closed", "interface", name, "port", no, "took", time.Since(start), "err", err)
				}(ifc.no)
			}
			delete(c.ifaces, name)
			c.log.Info("port removed", "interface", name)
		}
	}
	_, err := c.local.Do(ctx, func(t *client.Txn) error {
		for _, li := range list {
			ifc := c.ifaces[li.row.Name]
			if ifc == nil {
				continue
			}
			row := li.row
			if ifc.err != "" {
				if row.Error == nil || *row.Error != ifc.err {
					no := int64(-1)
					row.Error, row.Ofport = &ifc.err, &no
					t.UpdateModel(&row, row.UUID, "error", "ofport")
				}
				continue
			}
			if row.Ofport == nil || *row.Ofport != int64(ifc.no) || row.Error != nil {
				no := int64(ifc.no)
				row.Ofport, row.Error = &no, nil
				t.UpdateModel(&row, row.UUID, "ofport", "error")
			}
		}
		r := root
		cols := []string{}
		if r.CurCfg != r.NextCfg {
			r.CurCfg = r.NextCfg
			cols = append(cols, "cur_cfg")
		}
		if zonesChanged {
			ids := map[string]string{}
			for k, v := range r.ExternalIDs {
				if !strings.HasPrefix(k, zonePrefix) {
					ids[k] = v
				}
			}
			for k, z := range zones {
				ids[zonePrefix+k] = strconv.Itoa(int(z))
			}
			r.ExternalIDs = ids
			cols = append(cols, "external_ids")
		}
		if len(cols) > 0 {
			t.Verify(vswitch.OpenVSwitchTable, r.UUID, "external_ids", "next_cfg")
			t.UpdateModel(&r, r.UUID, cols...)
		}
		return nil
	})
	return err
}

// zonePrefix names the ct zones in Open_vSwitch external_ids, as
// ovn-controller keeps them: ct-zone-LPORT, ct-zone-DPUUID_dnat, _snat.
const zonePrefix = "ct-zone-"

// allocateZones reads the stored zones and gives one to every local
// logical port (an iface-id here) and every router the Southbound holds
// that has none (a first simple allocation: zones are never freed).
func allocateZones(ids map[string]string, sbc *client.Client, local map[string]bool) (map[string]uint16, bool) {
	zones := map[string]uint16{}
	used := map[uint16]bool{0: true}
	for k, v := range ids {
		if name, ok := strings.CutPrefix(k, zonePrefix); ok {
			if z, err := strconv.ParseUint(v, 10, 16); err == nil {
				zones[name] = uint16(z)
				used[uint16(z)] = true
			}
		}
	}
	if sbc == nil || sbc.Cache().Schema() == nil {
		return zones, false
	}
	var want []string
	for _, p := range client.List[sb.PortBinding](sbc.Cache()) {
		if isVIF(&p) && (local[p.LogicalPort] || p.Type == "virtual" && p.VirtualParent != nil && local[*p.VirtualParent]) {
			want = append(want, p.LogicalPort)
		}
	}
	for _, d := range client.List[sb.DatapathBinding](sbc.Cache()) {
		if isRouter(&d) {
			want = append(want, d.UUID.String()+"_dnat", d.UUID.String()+"_snat")
		}
	}
	sort.Strings(want)
	changed := false
	next := uint16(1)
	for _, w := range want {
		if _, ok := zones[w]; ok {
			continue
		}
		for used[next] {
			next++
		}
		zones[w] = next
		used[next] = true
		changed = true
	}
	return zones, changed
}

// input is the Engine's local input: the Input's fields other than the
// Southbound tables that the Engine follows row by row (UpdateRow).
func (c *chassis) input(name string, chUUID ovsdb.UUID, zones map[string]uint16) *Input {
	sc := c.sb.Cache()
	in := &Input{
		Chassis: name, ChassisUUID: chUUID,
		VIFs:  map[string]uint32{},
		Zones: map[string]uint16{},

		// Tables the Engine has no node for: a change recomputes the
		// physical rules.
		HAChassisGroups:   client.List[sb.HAChassisGroup](sc),
		HAChassis:         client.List[sb.HAChassis](sc),
		GatewayChassis:    client.List[sb.GatewayChassis](sc),
		MACBindings:       client.List[sb.MACBinding](sc),
		StaticMACBindings: client.List[sb.StaticMACBinding](sc),
		FDBs:              client.List[sb.FDB](sc),
		LoadBalancers:     client.List[sb.LoadBalancer](sc),
	}
	for k, z := range zones {
		if dp, ok := strings.CutSuffix(k, "_dnat"); ok {
			in.Zones["dnat:"+dp] = z
		} else if dp, ok := strings.CutSuffix(k, "_snat"); ok {
			in.Zones["snat:"+dp] = z
		} else {
			in.Zones[k] = z
		}
	}
	// Bridges named in ovn-bridge-mappings carry provider networks.
	var mappings map[string]string
	if ovs := client.List[vswitch.OpenVSwitch](c.local.Cache()); len(ovs) > 0 {
		var err error
		if mappings, err = ParseBridgeMappings(ovs[0].ExternalIDs["ovn-bridge-mappings"]); err != nil {
			c.problemOnce(err.Error())
		}
	}
	mapped := map[string]bool{}
	for _, br := range mappings {
		mapped[br] = true
	}
	hubs := map[string][]uint32{}
	var bridges []string
	for _, li := range interfaces(c.local.Cache()) {
		ifc := c.ifaces[li.row.Name]
		if ifc == nil || ifc.err != "" {
			continue
		}
		if li.bridge != integrationBridge {
			if hubs[li.bridge] == nil {
				bridges = append(bridges, li.bridge)
			}
			hubs[li.bridge] = append(hubs[li.bridge], ifc.no)
			continue
		}
		if id := li.row.ExternalIDs["iface-id"]; id != "" {
			in.VIFs[id] = ifc.no
		}
	}
	sort.Strings(bridges)
	for _, b := range bridges {
		if !mapped[b] {
			in.Hubs = append(in.Hubs, hubs[b])
		}
	}
	in.Physnets = map[string][]uint32{}
	for net, br := range mappings {
		if len(hubs[br]) > 0 {
			in.Physnets[net] = hubs[br]
		}
	}
	if c.tunnel != nil {
		in.TunnelPort = c.tunnel.no
	}
	in.BFD = c.bfdUp()
	return in
}

func ruleKey(r *flow.Rule) string {
	return fmt.Sprintf("%d/%d/%s", r.Table, r.Priority, r.Match.String())
}

// writeBack claims and releases Port_Bindings, reports ports up and
// ovn-installed once their flows are in, and acknowledges nb_cfg.
func (c *chassis) writeBack(ctx context.Context, name string, chUUID ovsdb.UUID, bindings map[string]ovsdb.UUID) error {
	if chUUID == (ovsdb.UUID{}) {
		return nil
	}
	sc := c.sb.Cache()
	_, err := c.sb.Do(ctx, func(t *client.Txn) error {
		for _, p := range client.List[sb.PortBinding](sc) {
			_, bind := bindings[p.LogicalPort]
			mine := p.Chassis != nil && *p.Chassis == chUUID
			up := p.Up != nil && *p.Up
			switch {
			case bind && (!mine || !up):
				id, yes := chUUID, true
				p.Chassis, p.Up = &id, &yes
				t.UpdateModel(&p, p.UUID, "chassis", "up")
				c.log.Info("claiming port", "lport", p.LogicalPort)
			case !bind && mine && claimable(&p):
				t.UpdateModel(&p, p.UUID, release(&p)...)
				c.log.Info("releasing port", "lport", p.LogicalPort)
			}
		}
		var global int64
		if g := client.List[sb.SBGlobal](sc); len(g) > 0 {
			global = g[0].NBCfg
		}
		for _, p := range client.List[sb.ChassisPrivate](sc) {
			if p.Name == name && p.NBCfg != global {
				p.NBCfg, p.NBCfgTimestamp = global, time.Now().UnixMilli()
				t.UpdateModel(&p, p.UUID, "nb_cfg", "nb_cfg_timestamp")
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// ovn-installed: the interface's flows are in the datapath.
	_, err = c.local.Do(ctx, func(t *client.Txn) error {
		for _, li := range interfaces(c.local.Cache()) {
			row := li.row
			id := row.ExternalIDs["iface-id"]
			_, bound := bindings[id]
			installed := row.ExternalIDs["ovn-installed"] == "true"
			if bound == installed || id == "" {
				continue
			}
			ids := map[string]string{}
			for k, v := range row.ExternalIDs {
				ids[k] = v
			}
			if bound {
				ids["ovn-installed"] = "true"
				if seen, ok := c.portSeen[id]; ok {
					c.log.Info("port installed", "lport", id, "interface", row.Name, "took", time.Since(seen))
					delete(c.portSeen, id)
				}
			} else {
				delete(ids, "ovn-installed")
			}
			row.ExternalIDs = ids
			t.UpdateModel(&row, row.UUID, "external_ids")
		}
		return nil
	})
	return err
}

// ctZoneList is ct-zone-list: each logical port's or router's zone.
func (c *chassis) ctZoneList([]string) (string, error) {
	ovs := client.List[vswitch.OpenVSwitch](c.local.Cache())
	if len(ovs) == 0 {
		return "", nil
	}
	var lines []string
	for k, v := range ovs[0].ExternalIDs {
		if name, ok := strings.CutPrefix(k, zonePrefix); ok {
			lines = append(lines, name+" "+v+"\n")
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, ""), nil
}
