package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/govn/govn/datapath/dp"
	"github.com/govn/govn/datapath/flow"
	"github.com/govn/govn/schema/sb"
)

// bigWorld is a switch of n ports with flows in the manner of
// ovn-northd's: per port, port security in and out and the MAC lookup;
// per switch, ACLs on a port group and an address set.
func bigWorld(n int) *world {
	w := newWorld(3)
	w.in.Flows = nil
	ls := uid(wLS1)
	add := func(pipeline string, table, prio int64, match, actions string) {
		w.in.Flows = append(w.in.Flows, sb.LogicalFlow{UUID: w.uuid(), LogicalDatapath: &ls, Pipeline: pipeline,
			TableID: table, Priority: prio, Match: match, Actions: actions})
	}
	pg := &w.in.PortGroups[0]
	for i := 7; i < 7+n; i++ {
		name := fmt.Sprintf("vm%d", i)
		mac := fmt.Sprintf("0a:00:00:00:%02x:%02x", i>>8, i&0xff)
		w.in.Ports = append(w.in.Ports, sb.PortBinding{UUID: uid(100000 + i), LogicalPort: name, Datapath: ls, TunnelKey: int64(i)})
		add("ingress", 0, 50, fmt.Sprintf(`inport == "%s" && eth.src == {%s}`, name, mac), "next;")
		add("ingress", 1, 90, fmt.Sprintf(`inport == "%s" && eth.src == %s && ip4.src == {10.0.%d.%d}`, name, mac, i>>8, i&0xff), "next;")
		add("ingress", 1, 80, fmt.Sprintf(`inport == "%s" && eth.src == %s && ip4`, name, mac), "drop;")
		add("ingress", 20, 50, fmt.Sprintf(`eth.dst == %s`, mac), fmt.Sprintf(`outport = "%s"; output;`, name))
		add("egress", 8, 50, fmt.Sprintf(`outport == "%s" && eth.dst == {%s}`, name, mac), "next;")
		if i%4 == 0 {
			pg.Ports = append(pg.Ports, name)
		}
	}
	for i := 0; i < 20; i++ {
		add("ingress", 9, int64(2000+i), fmt.Sprintf(`inport == @pg1 && ip4 && ip4.dst == $as1 && tcp.dst == %d`, 1000+i), "reg0[1] = 1; next;")
		add("egress", 4, int64(2000+i), fmt.Sprintf(`outport == @pg1 && ip4 && ip4.src == $as2 && udp.dst == %d`, 1000+i), "drop;")
	}
	for i := range w.in.Multicast {
		w.in.Multicast[i].Ports = nil
	}
	w.fixMulticast()
	return w
}

// BenchmarkPortBind is the controller's work when a port is bound (its
// interface appears) and unbound, in turn, on a switch of 400 ports with
// 2,040 logical flows:
// "full" is Translate and installing its difference, as govn chassis did
// before the Engine; "engine" is the Engine's run and commit, fed the one
// changed Port_Binding as Run feeds it.
func BenchmarkPortBind(b *testing.B) {
	tr, err := NewTranslator()
	if err != nil {
		b.Fatal(err)
	}
	newBig := func() *world { return bigWorld(400) }
	b.Run("full", func(b *testing.B) {
		w := newBig()
		pipe := dp.NewPipeline()
		installed := map[string]flow.Rule{}
		for i := 0; i < b.N; i++ {
			w.bind(9, i%2 == 0)
			out := tr.Translate(w.snapshot())
			var bd flow.Bundle
			want := map[string]flow.Rule{}
			for _, r := range out.Rules {
				want[ruleKey(&r)] = r
			}
			for k, r := range want {
				if old, ok := installed[k]; !ok {
					bd.Add(r)
				} else if flow.ActionsString(old.Actions) != flow.ActionsString(r.Actions) {
					bd.Modify(r)
				}
			}
			for k, r := range installed {
				if _, ok := want[k]; !ok {
					bd.Delete(r)
				}
			}
			if _, err := pipe.Apply(bd); err != nil {
				b.Fatal(err)
			}
			installed = want
		}
	})
	b.Run("engine", func(b *testing.B) {
		w := newBig()
		e := NewEngine(tr, nil)
		pipe := dp.NewPipeline()
		apply := func(bd flow.Bundle) error { _, err := pipe.Apply(bd); return err }
		e.Load(w.snapshot())
		if err := e.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Commit(apply); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			w.bind(9, i%2 == 0)
			p := *w.port(9)
			e.ports.put(e.eng, p.UUID, &p)
			e.SetLocal(w.in)
			if err := e.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			if _, err := e.Commit(apply); err != nil {
				b.Fatal(err)
			}
		}
	})
}
