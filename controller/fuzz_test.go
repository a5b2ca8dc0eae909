package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/schema/sb"
)

// FuzzTranslate adds one logical flow of any text to a small switch:
// the translation never panics, reports a flow it cannot use as a
// problem, and what it produces installs in the datapath.
func FuzzTranslate(f *testing.F) {
	for _, s := range [][2]string{
		{"1", "next;"},
		{`inport == "vm1" && ip4.src == 10.0.0.0/8`, `outport = "vm2"; output;`},
		{"tcp.dst == {80, 443} && ip4.dst == {10.0.0.1, 10.0.0.2}", "ct_next;"},
		{"ip4", "ct_lb_mark(backends=10.0.0.12:80,10.0.0.13:80);"},
		{"arp.op == 1", "eth.dst <-> eth.src; arp.op = 2; output;"},
		{"eth.dst ==", "next;"},
		{"ip4.dst == $bad", "drop;"},
	} {
		f.Add(s[0], s[1], uint8(1))
	}
	tr, err := NewTranslator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, match, actions string, table uint8) {
		in := oneSwitch()
		ls := in.Datapaths[0].UUID
		in.Flows = append(in.Flows, sb.LogicalFlow{UUID: id(200), LogicalDatapath: &ls, Pipeline: "ingress",
			TableID: int64(table % 30), Priority: 100, Match: match, Actions: actions})
		out := tr.Translate(in)
		p := dp.NewPipeline()
		var b flow.Bundle
		for _, g := range out.Groups {
			b.AddGroup(g)
		}
		for _, r := range out.Rules {
			b.Add(r)
		}
		if _, err := p.Apply(b); err != nil {
			t.Fatalf("match %q actions %q: the translation does not install: %v", match, actions, err)
		}
	})
}

// FuzzTranslatePorts adds a port of any type, options, tag and port
// security, a MAC binding, an FDB entry, a load balancer and a chassis
// with an encap of any kind to a provider switch, and maps any bridge
// mappings' networks: the translation (and the engine) never panics, and
// what it produces installs in the datapath.
func FuzzTranslatePorts(f *testing.F) {
	f.Add("localnet", "network_name=physnet1", int64(5), "0a:00:00:00:00:09 10.0.0.9", "0a:00:00:00:00:09", "10.0.0.9", "172.16.0.1:80", "10.0.0.9:8080", "geneve", "physnet1")
	f.Add("chassisredirect", "distributed-port=vm1", int64(0), "", "zz", "10.0.0.300", "[fd00::1]:80", "[fd00::2]:80", "vxlan", "")
	f.Add("l3gateway", "peer=ln;l3gateway-chassis=hv1", int64(-1), "bad", "", "", "x", "y", "", "other")
	f.Add("patch", "peer=nosuch", int64(4096), "0a:00:00:00:00:09 fd00::9/64", "0a:00:00:00:00:01", "fd00::1", "10.0.0.1", "", "stt", "physnet1")
	f.Add("", "requested-chassis=hv2", int64(0), "0a:00:00:00:00:09 10.0.0.0/24", "ff:ff:ff:ff:ff:ff", "0.0.0.0", "10.0.0.1:0", "10.0.0.2", "geneve,vxlan", "")
	tr, err := NewTranslator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, typ, opts string, tag int64, portSec, mac, ip, vip, backends, encap, net string) {
		in := providerSwitch(0)
		ls := in.Datapaths[0].UUID
		p := sb.PortBinding{UUID: id(60), LogicalPort: "fz", Datapath: ls, TunnelKey: 9, Type: typ, Options: map[string]string{}}
		for _, kv := range strings.Split(opts, ";") {
			k, v, _ := strings.Cut(kv, "=")
			p.Options[k] = v
		}
		if tag != 0 {
			p.Tag = &tag
		}
		if portSec != "" {
			p.PortSecurity = []string{portSec}
		}
		grp := id(61)
		p.HAChassisGroup = &grp
		in.Ports = append(in.Ports, p)
		in.VIFs = map[string]uint32{"vm1": 1, "lp": 3, "fz": 4}
		hv3, enc3, ha := id(62), id(63), id(64)
		in.HAChassisGroups = []sb.HAChassisGroup{{UUID: grp, HAChassis: []ovsdb.UUID{ha}}}
		in.HAChassis = []sb.HAChassis{{UUID: ha, Chassis: &hv3, Priority: tag}}
		in.AllChassis = append(in.AllChassis, sb.Chassis{UUID: hv3, Name: "hv3", Encaps: []ovsdb.UUID{enc3}})
		in.Encaps = append(in.Encaps, sb.Encap{UUID: enc3, ChassisName: "hv3", IP: ip, Type: encap})
		in.MACBindings = []sb.MACBinding{{UUID: id(65), Datapath: ls, LogicalPort: "fz", IP: ip, MAC: mac}}
		in.StaticMACBindings = []sb.StaticMACBinding{{UUID: id(66), Datapath: ls, LogicalPort: "vm1", IP: ip, MAC: mac, OverrideDynamicMAC: tag > 0}}
		in.FDBs = []sb.FDB{{UUID: id(67), DPKey: 1, MAC: mac, PortKey: tag}}
		proto := "tcp"
		in.LoadBalancers = []sb.LoadBalancer{{UUID: id(68), Name: "fz", Datapaths: []ovsdb.UUID{ls}, Protocol: &proto,
			VIPs: map[string]string{vip: backends}, Options: map[string]string{"hairpin_orig_tuple": fmt.Sprint(tag%2 == 0), "hairpin_snat_ip": ip}}}
		if net != "" {
			in.Physnets[net] = []uint32{30, 32}
		}
		out := tr.Translate(in)
		pipe := dp.NewPipeline()
		var b flow.Bundle
		for _, g := range out.Groups {
			b.AddGroup(g)
		}
		for _, r := range out.Rules {
			b.Add(r)
		}
		if _, err := pipe.Apply(b); err != nil {
			t.Fatalf("the translation does not install: %v", err)
		}
		e := NewEngine(tr, nil)
		e.Load(in)
		if err := e.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
