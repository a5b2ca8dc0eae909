package incproc_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/govn/govn/incproc"
)

// benchGraph builds 30 nodes: 10 input nodes, 10 views of two inputs
// each, 9 views of two of those, and one output reading the 9, all with
// handlers that report a change. It returns the engine and its inputs.
func benchGraph(b *testing.B) (*incproc.Engine, []*incproc.Node) {
	e := incproc.New(incproc.Options{})
	compute := func(r *incproc.Run) error { r.SetUpdated(); return nil }
	handle := func(r *incproc.Run) (bool, error) { r.SetUpdated(); return true, nil }
	funcs := incproc.NodeFuncs{Compute: compute}
	var inputs, mid, top []*incproc.Node
	for i := range 10 {
		inputs = append(inputs, e.AddInput(fmt.Sprintf("in%d", i)))
	}
	for i := range 10 {
		mid = append(mid, e.AddNode(fmt.Sprintf("mid%d", i), funcs,
			incproc.Input{Node: inputs[i], Handler: handle},
			incproc.Input{Node: inputs[(i+1)%10], Handler: handle}))
	}
	for i := range 9 {
		top = append(top, e.AddNode(fmt.Sprintf("top%d", i), funcs,
			incproc.Input{Node: mid[i], Handler: handle},
			incproc.Input{Node: mid[i+1], Handler: handle}))
	}
	var outIn []incproc.Input
	for _, n := range top {
		outIn = append(outIn, incproc.Input{Node: n, Handler: handle})
	}
	e.AddNode("out", funcs, outIn...)
	if len(e.Nodes()) != 30 {
		b.Fatalf("%d nodes, want 30", len(e.Nodes()))
	}
	if _, err := e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true}); err != nil {
		b.Fatal(err)
	}
	return e, inputs
}

// BenchmarkRun30 is the engine's own cost per run of a 30-node graph:
// no input changed (the idle loop), one input changed (its change handled
// through three levels), every input changed, and a full recompute.
func BenchmarkRun30(b *testing.B) {
	ctx := context.Background()
	opts := incproc.RunOptions{AllowRecompute: true}
	for _, bc := range []struct {
		name string
		mark func(e *incproc.Engine, inputs []*incproc.Node)
	}{
		{"idle", func(*incproc.Engine, []*incproc.Node) {}},
		{"one-change", func(e *incproc.Engine, in []*incproc.Node) { e.MarkUpdated(in[3]) }},
		{"all-changed", func(e *incproc.Engine, in []*incproc.Node) {
			for _, n := range in {
				e.MarkUpdated(n)
			}
		}},
		{"recompute", func(e *incproc.Engine, _ []*incproc.Node) { e.ForceRecompute() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e, inputs := benchGraph(b)
			b.ReportAllocs()
			for b.Loop() {
				bc.mark(e, inputs)
				if _, err := e.Run(ctx, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
