package incproc_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/govn/govn/incproc"
)

// A caller feeds an input node (a table of ports), a view counts ports per
// switch, and an output node turns the view's changes into operations for
// the caller to commit.
func Example() {
	e := incproc.New(incproc.Options{})

	// The input: port → switch, and the ports changed since the engine
	// last consumed them.
	ports := map[string]string{}
	changedPorts := map[string]bool{}
	nbPorts := e.AddNode("NB_port", incproc.NodeFuncs{ClearTracked: func() { clear(changedPorts) }})

	// The view: switch → number of ports, tracking changed switches.
	count := map[string]int{}
	oldSwitch := map[string]string{} // port → switch, as counted
	changedSwitches := map[string]bool{}
	bump := func(sw string, d int) {
		if count[sw] += d; count[sw] == 0 {
			delete(count, sw)
		}
		changedSwitches[sw] = true
	}
	perSwitch := e.AddNode("per_switch", incproc.NodeFuncs{
		Compute: func(r *incproc.Run) error {
			for sw := range count {
				changedSwitches[sw] = true
			}
			clear(count)
			clear(oldSwitch)
			for p, sw := range ports {
				bump(sw, 1)
				oldSwitch[p] = sw
			}
			r.SetUpdated()
			return nil
		},
		ClearTracked: func() { clear(changedSwitches) },
	}, incproc.Input{Node: nbPorts, Handler: func(r *incproc.Run) (bool, error) {
		for p := range changedPorts {
			if sw, ok := oldSwitch[p]; ok {
				bump(sw, -1)
				delete(oldSwitch, p)
			}
			if sw, ok := ports[p]; ok {
				bump(sw, 1)
				oldSwitch[p] = sw
			}
		}
		if len(changedSwitches) > 0 {
			r.SetUpdated()
		}
		return true, nil
	}})

	// The output: operations that bring a remote copy up to date.
	var ops []string
	op := func(sw string) {
		if n, ok := count[sw]; ok {
			ops = append(ops, fmt.Sprintf("set %s=%d", sw, n))
		} else {
			ops = append(ops, "delete "+sw)
		}
	}
	sync := e.AddNode("sync", incproc.NodeFuncs{
		Compute: func(r *incproc.Run) error {
			ops = ops[:0]
			for _, sw := range slices.Sorted(maps.Keys(count)) {
				op(sw)
			}
			r.SetUpdated()
			return nil
		},
		ClearTracked: func() { ops = ops[:0] },
	}, incproc.Input{Node: perSwitch, Handler: func(r *incproc.Run) (bool, error) {
		for _, sw := range slices.Sorted(maps.Keys(changedSwitches)) {
			op(sw)
		}
		r.SetUpdated()
		return true, nil
	}})

	cycle := func(change func()) {
		change()
		e.MarkUpdated(nbPorts)
		res, err := e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true})
		if err != nil || res.Cancelled {
			fmt.Println("not committed:", err, res.Reason)
			return
		}
		if e.Updated(sync) {
			fmt.Println("commit:", strings.Join(ops, ", "))
		}
	}
	cycle(func() {
		ports["p1"], ports["p2"] = "sw0", "sw0"
		changedPorts["p1"], changedPorts["p2"] = true, true
	})
	cycle(func() {
		ports["p3"] = "sw1"
		changedPorts["p3"] = true
	})
	cycle(func() {
		delete(ports, "p1")
		ports["p2"] = "sw1"
		changedPorts["p1"], changedPorts["p2"] = true, true
	})
	e.ShowStats(os.Stdout, "per_switch", "")
	// Output:
	// commit: set sw0=2
	// commit: set sw1=1
	// commit: delete sw0, set sw1=2
	// Node: per_switch
	// - recompute:            1
	// - compute:              2
	// - abort:                0
}
