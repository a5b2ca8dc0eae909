package incproc_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/govn/govn/incproc"
)

func nop(*incproc.Run) error { return nil }

// Graph construction errors are programming errors: they panic, naming
// the node.
func TestAddNodeMisuse(t *testing.T) {
	other := incproc.New(incproc.Options{}).AddInput("foreign")
	for _, tc := range []struct {
		name, want string
		f          func(e *incproc.Engine, a *incproc.Node)
	}{
		{"duplicate", `duplicate node "a"`, func(e *incproc.Engine, _ *incproc.Node) { e.AddInput("a") }},
		{"no compute", `node "n" has inputs but no Compute`, func(e *incproc.Engine, a *incproc.Node) {
			e.AddNode("n", incproc.NodeFuncs{}, incproc.Input{Node: a})
		}},
		{"foreign input", `node "n": input 0 is not a node of this engine`, func(e *incproc.Engine, _ *incproc.Node) {
			e.AddNode("n", incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: other})
		}},
		{"nil input", `node "n": input 1 is not a node of this engine`, func(e *incproc.Engine, a *incproc.Node) {
			e.AddNode("n", incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: a}, incproc.Input{})
		}},
		{"repeated input", `node "n": input "a" given twice`, func(e *incproc.Engine, a *incproc.Node) {
			e.AddNode("n", incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: a}, incproc.Input{Node: a})
		}},
		{"mark a view", `MarkUpdated("n"): not an input node`, func(e *incproc.Engine, a *incproc.Node) {
			e.MarkUpdated(e.AddNode("n", incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: a}))
		}},
		{"add during run", "AddNode during Run", func(e *incproc.Engine, a *incproc.Node) {
			e.AddNode("n", incproc.NodeFuncs{Compute: func(*incproc.Run) error { e.AddInput("x"); return nil }},
				incproc.Input{Node: a})
			e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true})
		}},
		{"run during run", "Run called from inside a Run", func(e *incproc.Engine, a *incproc.Node) {
			e.AddNode("n", incproc.NodeFuncs{Compute: func(*incproc.Run) error {
				e.Run(context.Background(), incproc.RunOptions{})
				return nil
			}}, incproc.Input{Node: a})
			e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := incproc.New(incproc.Options{})
			a := e.AddInput("a")
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.want) {
					t.Errorf("panic %q, want one containing %q", msg, tc.want)
				}
			}()
			tc.f(e, a)
		})
	}
}

// A run whose changes are all handled allocates nothing in the engine.
func TestRunAllocations(t *testing.T) {
	e := incproc.New(incproc.Options{})
	a := e.AddInput("a")
	handle := func(r *incproc.Run) (bool, error) { r.SetUpdated(); return true, nil }
	prev := a
	for _, name := range []string{"n1", "n2", "n3"} {
		prev = e.AddNode(name, incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: prev, Handler: handle})
	}
	ctx := context.Background()
	opts := incproc.RunOptions{AllowRecompute: true}
	e.Run(ctx, opts)
	allocs := testing.AllocsPerRun(100, func() {
		e.MarkUpdated(a)
		if res, err := e.Run(ctx, opts); err != nil || res.Handled != 3 {
			t.Fatalf("run: %+v %v", res, err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

// Stats, ShowStats, ClearStats and ForceRecompute may be called while
// another goroutine runs the engine (go test -race checks it).
func TestStatsFromAnotherGoroutine(t *testing.T) {
	e := incproc.New(incproc.Options{})
	a := e.AddInput("a")
	e.AddNode("n", incproc.NodeFuncs{Compute: nop},
		incproc.Input{Node: a, Handler: func(*incproc.Run) (bool, error) { return true, nil }})
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			var b strings.Builder
			e.ShowStats(&b, "", "")
			e.Stats()
			e.ClearStats()
			e.ForceRecompute()
		}
	})
	for range 1000 {
		e.MarkUpdated(a)
		if _, err := e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}
