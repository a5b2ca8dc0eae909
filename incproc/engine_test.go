package incproc_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
// another goroutine runs the engine and adds nodes (go test -race checks
// it).
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
	for i := range 1000 {
		if i%100 == 0 {
			e.AddNode(fmt.Sprint("late", i), incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: a})
		}
		e.MarkUpdated(a)
		if _, err := e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}

func TestCommands(t *testing.T) {
	var logs strings.Builder
	clock := time.Unix(0, 0)
	e := incproc.New(incproc.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Now:    func() time.Time { clock = clock.Add(time.Millisecond); return clock },
	})
	a := e.AddInput("a")
	e.AddNode("n", incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: a})
	run := func() {
		t.Helper()
		if _, err := e.Run(context.Background(), incproc.RunOptions{AllowRecompute: true}); err != nil {
			t.Fatal(err)
		}
	}
	run()
	cmds := e.Commands(func() { logs.WriteString("woken\n") })
	call := func(args ...string) string {
		t.Helper()
		out, err := cmds[args[0]](args[1:])
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return out
	}

	// Recomputes take 1ms here: below the default threshold, not logged
	// at info level; at or above 1ms, they are.
	call("inc-engine/recompute")
	if !e.NeedsRun() || !strings.Contains(logs.String(), "woken") {
		t.Fatalf("recompute: NeedsRun %v, log %q", e.NeedsRun(), logs.String())
	}
	run()
	if strings.Contains(logs.String(), "msg=recompute") {
		t.Errorf("a fast recompute logged at info level: %q", logs.String())
	}
	call("inc-engine/compute-log-timeout", "1")
	call("inc-engine/recompute")
	run()
	if !strings.Contains(logs.String(), `level=INFO msg=recompute node=n reason=forced took=1ms`) {
		t.Errorf("a slow recompute was not logged at info level: %q", logs.String())
	}

	if got := call("inc-engine/show-stats", "n", "recompute"); got != "3\n" {
		t.Errorf("recomputes: %q, want 3", got)
	}
	call("inc-engine/clear-stats")
	if got := call("inc-engine/show-stats", "n", "recompute"); got != "0\n" {
		t.Errorf("recomputes after clear-stats: %q, want 0", got)
	}
}

// FuzzCommands: whatever the arguments, the control socket commands answer
// or fail, and never panic.
func FuzzCommands(f *testing.F) {
	for _, s := range []string{"", "n", "recompute", "abort", "500", "-0", " +7", "4294967296"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		e := incproc.New(incproc.Options{})
		in := e.AddInput("a")
		e.AddNode("n", incproc.NodeFuncs{Compute: nop}, incproc.Input{Node: in})
		for name, cmd := range e.Commands(nil) {
			for _, args := range [][]string{nil, {a}, {a, b}, {a, b, a}} {
				out, err := cmd(args)
				if err != nil && out != "" {
					t.Errorf("%s %q: output %q with error %v", name, args, out, err)
				}
			}
		}
	})
}

// What a handler learns from its Run: the node, which inputs have changes
// for it, whether it is a recompute, and whether recomputing is allowed.
func TestRunAccessors(t *testing.T) {
	e := incproc.New(incproc.Options{})
	a, b := e.AddInput("a"), e.AddInput("b")
	var log []string
	var n *incproc.Node
	n = e.AddNode("n", incproc.NodeFuncs{Compute: func(r *incproc.Run) error {
		log = append(log, fmt.Sprintf("compute node=%s recomputing=%v", r.Node().Name(), r.Recomputing()))
		return nil
	}}, incproc.Input{Node: a, Handler: func(r *incproc.Run) (bool, error) {
		log = append(log, fmt.Sprintf("handle a: node=%s a=%v b=%v recomputing=%v allow=%v",
			r.Node().Name(), r.Updated(a), r.Updated(b), r.Recomputing(), r.AllowRecompute()))
		return true, nil
	}}, incproc.Input{Node: b, Handler: func(r *incproc.Run) (bool, error) { return true, nil }})
	ctx := context.Background()
	e.Run(ctx, incproc.RunOptions{AllowRecompute: true})
	e.MarkUpdated(a)
	e.Run(ctx, incproc.RunOptions{AllowRecompute: false})
	e.MarkUpdated(a)
	e.MarkUpdated(b)
	e.Run(ctx, incproc.RunOptions{AllowRecompute: true})
	want := []string{
		"compute node=n recomputing=true",
		"handle a: node=n a=true b=false recomputing=false allow=false",
		"handle a: node=n a=true b=true recomputing=false allow=true",
	}
	if !slices.Equal(log, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if e.Node("n") != n || e.Node("nosuch") != nil {
		t.Error("Node does not find nodes by name")
	}
	if got := e.Nodes(); len(got) != 3 || got[0] != a || got[1] != b || got[2] != n {
		t.Errorf("Nodes: %v", got)
	}
}
