package controller

import (
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/pinctrl"
	"github.com/govn/govn/schema/sb"
)

// BFD on the tunnels, for gateway liveness (ovn-architecture(7), "High
// Availability for Distributed Gateway Ports").
//
// Whom a chassis runs BFD with (BFDPeers): for every HA_Chassis_Group
// of two chassis or more, a member runs it with the other members and
// with the group's ref_chassis (the chassis that send traffic to the
// gateway; the real ovn-northd fills the column, govn northd does not,
// and then a member runs it with every chassis); a chassis in
// ref_chassis, or any chassis when ref_chassis is empty, runs it with
// the members. The sessions themselves are pinctrl.TunnelBFD's,
// with SB_Global's options bfd-min-rx, bfd-min-tx and bfd-mult (Open
// vSwitch's defaults otherwise: 1000 ms, 100 ms, 3).
//
// Input.BFD says which peers are up; gateway.go's activeGateway reads it.

// BFDPeers returns the chassis that chassis me runs BFD with, by name,
// with their encap IPs (IPv4 only).
func BFDPeers(me string, groups []sb.HAChassisGroup, members []sb.HAChassis, chassis []sb.Chassis, encaps []sb.Encap) []pinctrl.TunnelPeer {
	byID := map[ovsdb.UUID]*sb.Chassis{}
	for i := range chassis {
		byID[chassis[i].UUID] = &chassis[i]
	}
	hc := map[ovsdb.UUID]*sb.HAChassis{}
	for i := range members {
		hc[members[i].UUID] = &members[i]
	}
	byName := map[string]ovsdb.UUID{}
	for _, ch := range chassis {
		byName[ch.Name] = ch.UUID
	}
	meID, ok := byName[me]
	if !ok {
		return nil
	}
	peers := map[ovsdb.UUID]bool{}
	for _, g := range groups {
		var ms []ovsdb.UUID
		isMember := false
		for _, id := range g.HAChassis {
			if h := hc[id]; h != nil && h.Chassis != nil && byID[*h.Chassis] != nil {
				ms = append(ms, *h.Chassis)
				isMember = isMember || *h.Chassis == meID
			}
		}
		if len(ms) < 2 {
			continue
		}
		refs, isRef := g.RefChassis, len(g.RefChassis) == 0
		for _, r := range refs {
			isRef = isRef || r == meID
		}
		switch {
		case isMember:
			for _, m := range ms {
				peers[m] = true
			}
			if len(refs) == 0 {
				for id := range byID {
					peers[id] = true
				}
			}
			for _, r := range refs {
				peers[r] = true
			}
		case isRef:
			for _, m := range ms {
				peers[m] = true
			}
		}
	}
	delete(peers, meID)
	ipOf := map[ovsdb.UUID]netip.Addr{}
	for _, e := range encaps {
		ip, err := netip.ParseAddr(e.IP)
		if err != nil || !ip.Is4() || e.Type != "geneve" {
			continue
		}
		if id, ok := byName[e.ChassisName]; ok {
			ipOf[id] = ip
		}
	}
	var out []pinctrl.TunnelPeer
	for id := range peers {
		if ip, ok := ipOf[id]; ok && byID[id] != nil {
			out = append(out, pinctrl.TunnelPeer{Chassis: byID[id].Name, IP: ip})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Chassis < out[j].Chassis })
	return out
}

// BFDSessionConfig reads SB_Global's BFD options (milliseconds; a bad
// or missing value takes Open vSwitch's default).
func BFDSessionConfig(options map[string]string) pinctrl.BFDConfig {
	ms := func(k string) time.Duration {
		n, err := strconv.Atoi(options[k])
		if err != nil || n < 1 {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	var c pinctrl.BFDConfig
	c.MinRx, c.MinTx = ms("bfd-min-rx"), ms("bfd-min-tx")
	if n, err := strconv.Atoi(options["bfd-mult"]); err == nil && n >= 1 && n <= 255 {
		c.DetectMult = uint8(n)
	}
	return c
}

// bfdRule sends BFD control packets from the tunnel (VNI 0, which no
// logical datapath has, and UDP to 3784) to pinctrl's TunnelBFD.
func (tr *translation) bfdRule() {
	tr.rule("table=%d,priority=110,in_port=%d,tun_id=0,udp,tp_dst=%d actions=%s",
		tablePhysToLog, tr.in.TunnelPort, pinctrl.BFDPort, flow.Controller{UserData: []byte(pinctrl.TunnelBFDUserData)})
}

// configureBFD gives pinctrl's TunnelBFD its peers and parameters from
// the Southbound.
func (c *chassis) configureBFD(name string) {
	if c.bfd == nil {
		return
	}
	var cfg pinctrl.TunnelBFDConfig
	if c.tunnel != nil && c.sb != nil {
		sc := c.sb.Cache()
		cfg.Port, cfg.LocalIP = c.tunnel.no, c.tunnel.ip
		cfg.Peers = BFDPeers(name, client.List[sb.HAChassisGroup](sc), client.List[sb.HAChassis](sc),
			client.List[sb.Chassis](sc), client.List[sb.Encap](sc))
		if g := client.List[sb.SBGlobal](sc); len(g) > 0 {
			cfg.Session = BFDSessionConfig(g[0].Options)
		}
	}
	c.bfd.Configure(cfg, time.Now())
}

// bfdUp is Input.BFD: which sessions are up, by chassis (nil without a
// tunnel).
func (c *chassis) bfdUp() map[string]bool {
	if c.bfd == nil || c.tunnel == nil {
		return nil
	}
	st := c.bfd.Status()
	up := make(map[string]bool, len(st))
	for name, s := range st {
		up[name] = s.State == pinctrl.BFDUp
	}
	return up
}
