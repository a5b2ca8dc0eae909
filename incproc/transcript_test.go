package incproc_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/govn/govn/incproc"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

// TestTranscripts runs the scenarios in testdata/. A transcript is a list
// of blocks: a command line, a "----" line, and the output the command
// must produce, up to a blank line; lines starting with # are comments.
// "go test ./incproc -run TestTranscripts -args -rewrite" rewrites the
// outputs. Commands:
//
//	add-input NAME
//	add-node NAME [compute=MODE] INPUT[:MODE]...  handler modes: ok (the
//	                default), none, unhandled, cancel, error
//	set-handler NODE INPUT MODE
//	set-compute NODE MODE                         compute modes: ok, cancel, error
//	feed INPUT KEY=VALUE|KEY=-...                 change an input node and mark it
//	mark INPUT                                    mark it without a change
//	add-source NAME                               a node with no inputs and a Compute
//	tick SOURCE                                   its next Compute changes its data
//	run [recompute] [no-recompute] [stop-after=NODE]  stop-after cancels the
//	                                              run's context when NODE runs
//	data NODE...                                  a node's data
//	check                                         every node against a fresh compute,
//	                                              every output node's committed changes
//	                                              against its data
//	stats [NODE [STAT]]                           inc-engine/show-stats
//	inputs NODE                                   a node's per-input counters
//	times NODE                                    a node's time counters
//	clear-stats | force-recompute | needs-run | order
//
// A test node's data maps keys to the values of its inputs for that key,
// joined by "+" in input order. Its handler re-derives the keys its input
// tracked; its Compute rebuilds everything. Both track the keys whose
// value changed, and say updated only then.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runTranscript(t, file)
		})
	}
}

func runTranscript(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	f.Close()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	h := newHarness()
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", file, i+1, line)
		}
		cmdLine := i + 1
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got := h.do(t, line)
		out.WriteString(line + "\n----\n")
		for _, g := range got {
			out.WriteString(g + "\n")
		}
		if i < len(lines) {
			out.WriteString("\n")
		}
		if !*rewrite && !slices.Equal(got, want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, cmdLine, line,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness is the state of one transcript: the engine and its test nodes.
type harness struct {
	e     *incproc.Engine
	nodes map[string]*tnode
	list  []*tnode
	trace []string // what the nodes and the logger said during a command
	// stop cancels the context of the current run when the node named
	// stopAfter runs.
	stopAfter string
	stop      func()
	changes   int // the number of the last change made by any node
	doubles   int // changes handed to a handler twice
}

// tnode is a test node: a view that merges its inputs' keys.
type tnode struct {
	h       *harness
	name    string
	node    *incproc.Node
	inputs  []*tnode
	handler map[string]string // input name → handler mode
	compute string
	data    map[string]string
	// tracked maps each changed key to the number of its latest change
	// (numbered across the harness), so that a handler given a change it
	// already handled notices.
	tracked map[string]int
	// handledUpTo is, per input, the number of the latest change of each
	// key the node consumed.
	handledUpTo map[*tnode]map[string]int
	ticks       int // a source's pending clock ticks
	// committed is, for an output node, its data as the caller knows it
	// from the changes it was given after each completed run.
	committed map[string]string
}

func newHarness() *harness {
	h := &harness{nodes: make(map[string]*tnode)}
	clock := time.Unix(0, 0)
	logger := slog.New(slog.NewTextHandler(traceWriter{h}, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	h.e = incproc.New(incproc.Options{
		Logger: logger,
		// Every reading of the clock is 1ms after the last, so each
		// Compute or Handler call takes 1ms.
		Now: func() time.Time { clock = clock.Add(time.Millisecond); return clock },
	})
	return h
}

type traceWriter struct{ h *harness }

func (w traceWriter) Write(p []byte) (int, error) {
	w.h.trace = append(w.h.trace, "log: "+strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ran is called by every test Compute and Handler.
func (h *harness) ran(n *tnode) {
	if n.name == h.stopAfter {
		h.say("(context cancelled)")
		h.stop()
	}
}

func (h *harness) say(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf(format, args...))
}

func (h *harness) node(t *testing.T, name string) *tnode {
	n, ok := h.nodes[name]
	if !ok {
		t.Fatalf("no node %q", name)
	}
	return n
}

var (
	handlerModes = []string{"ok", "none", "unhandled", "cancel", "error"}
	computeModes = []string{"ok", "cancel", "error"}
)

func checkMode(t *testing.T, mode string, modes []string) {
	if !slices.Contains(modes, mode) {
		t.Fatalf("mode %q is not one of %v", mode, modes)
	}
}

func (h *harness) do(t *testing.T, line string) []string {
	h.trace = nil
	f := strings.Fields(line)
	cmd, args := f[0], f[1:]
	switch cmd {
	case "add-input":
		for _, name := range args {
			n := &tnode{h: h, name: name, data: map[string]string{}, tracked: map[string]int{}}
			n.node = h.e.AddNode(name, incproc.NodeFuncs{ClearTracked: n.clearTracked})
			h.add(n)
		}
	case "add-source":
		n := &tnode{h: h, name: args[0], compute: "ok", data: map[string]string{}, tracked: map[string]int{}}
		n.node = h.e.AddNode(n.name, incproc.NodeFuncs{Compute: n.sourceCompute, ClearTracked: n.clearTracked})
		h.add(n)
	case "tick":
		h.node(t, args[0]).ticks++
	case "add-node":
		n := &tnode{h: h, name: args[0], compute: "ok", handler: map[string]string{},
			data: map[string]string{}, tracked: map[string]int{}, committed: map[string]string{}}
		var inputs []incproc.Input
		for _, a := range args[1:] {
			if mode, ok := strings.CutPrefix(a, "compute="); ok {
				checkMode(t, mode, computeModes)
				n.compute = mode
				continue
			}
			name, mode, _ := strings.Cut(a, ":")
			if mode == "" {
				mode = "ok"
			}
			checkMode(t, mode, handlerModes)
			in := h.node(t, name)
			in.committed = nil // read by n: no longer an output node
			n.inputs = append(n.inputs, in)
			n.handler[name] = mode
			var hf incproc.Handler
			if mode != "none" {
				hf = n.handlerFor(in)
			}
			inputs = append(inputs, incproc.Input{Node: in.node, Handler: hf})
		}
		n.node = h.e.AddNode(n.name, incproc.NodeFuncs{Compute: n.recompute, ClearTracked: n.clearTracked}, inputs...)
		h.add(n)
	case "set-handler":
		n := h.node(t, args[0])
		if _, ok := n.handler[args[1]]; !ok {
			t.Fatalf("%s has no input %s", args[0], args[1])
		}
		checkMode(t, args[2], slices.DeleteFunc(slices.Clone(handlerModes), func(m string) bool { return m == "none" }))
		if n.handler[args[1]] == "none" {
			t.Fatalf("%s has no handler for %s to change", args[0], args[1])
		}
		n.handler[args[1]] = args[2]
	case "set-compute":
		checkMode(t, args[1], computeModes)
		h.node(t, args[0]).compute = args[1]
	case "feed":
		n := h.node(t, args[0])
		for _, kv := range args[1:] {
			k, v, _ := strings.Cut(kv, "=")
			if v == "-" {
				delete(n.data, k)
			} else {
				n.data[k] = v
			}
			n.tracked[k] = h.change()
		}
		h.e.MarkUpdated(n.node)
	case "mark":
		h.e.MarkUpdated(h.node(t, args[0]).node)
	case "run":
		opts := incproc.RunOptions{AllowRecompute: true}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.stopAfter, h.stop = "", cancel
		for _, a := range args {
			switch a {
			case "recompute":
				opts.Recompute = true
			case "no-recompute":
				opts.AllowRecompute = false
			default:
				node, ok := strings.CutPrefix(a, "stop-after=")
				if !ok {
					t.Fatalf("run: unknown option %q", a)
				}
				h.stopAfter = h.node(t, node).name
			}
		}
		res, err := h.e.Run(ctx, opts)
		switch {
		case err != nil:
			h.say("error: %v", err)
		case res.Cancelled:
			h.say("cancelled at %s: %s", res.Node, res.Reason)
		default:
			var updated []string
			for _, n := range h.list {
				if h.e.Updated(n.node) && !n.node.IsInput() {
					updated = append(updated, n.name)
				}
				n.commit()
			}
			h.say("done: recomputed %d, handled %d, updated [%s]", res.Recomputed, res.Handled, strings.Join(updated, " "))
		}
	case "data":
		for _, name := range args {
			h.say("%s: %s", name, formatData(h.node(t, name).data))
		}
	case "check":
		ok := true
		for _, n := range h.list {
			if n.node.IsInput() {
				continue
			}
			if want := n.fresh(); !maps.Equal(n.data, want) {
				h.say("%s: %s, fresh compute says %s", n.name, formatData(n.data), formatData(want))
				ok = false
			}
			if n.committed != nil && !maps.Equal(n.committed, n.data) {
				h.say("%s: %s, the caller was told %s", n.name, formatData(n.data), formatData(n.committed))
				ok = false
			}
		}
		if h.doubles > 0 {
			h.say("%d changes were handed to a handler twice", h.doubles)
			ok = false
		}
		if ok {
			h.say("ok")
		}
	case "stats":
		var node, stat string
		if len(args) > 0 {
			node = args[0]
		}
		if len(args) > 1 {
			stat = args[1]
		}
		var b strings.Builder
		if err := h.e.ShowStats(&b, node, stat); err != nil {
			t.Fatal(err)
		}
		if b.Len() > 0 {
			h.trace = append(h.trace, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")...)
		}
	case "inputs", "times":
		for _, s := range h.e.Stats() {
			if s.Name != args[0] {
				continue
			}
			if cmd == "times" {
				h.say("recompute %v, handlers %v", s.RecomputeTime, s.HandleTime)
				break
			}
			for _, in := range s.Inputs {
				h.say("%s: handled %d, unhandled %d, time %v", in.Name, in.Handled, in.Unhandled, in.Time)
			}
		}
	case "clear-stats":
		h.e.ClearStats()
	case "force-recompute":
		h.e.ForceRecompute()
	case "needs-run":
		h.say("%v", h.e.NeedsRun())
	case "order":
		var names []string
		for _, n := range h.e.Nodes() {
			names = append(names, n.Name())
		}
		h.say("%s", strings.Join(names, " "))
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	return h.trace
}

func (h *harness) change() int {
	h.changes++
	return h.changes
}

func (h *harness) add(n *tnode) {
	h.nodes[n.name] = n
	h.list = append(h.list, n)
}

func formatData(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return "{" + strings.Join(kv, " ") + "}"
}

func (n *tnode) clearTracked() { clear(n.tracked) }

// commit applies an output node's tracked changes to what the caller
// knows of it, as a caller commits them after a completed run.
func (n *tnode) commit() {
	if n.committed == nil || !n.h.e.Updated(n.node) {
		return
	}
	for k := range n.tracked {
		if v, ok := n.data[k]; ok {
			n.committed[k] = v
		} else {
			delete(n.committed, k)
		}
	}
}

// value derives key k from the inputs' current data; ok is false when no
// input has k.
func (n *tnode) value(k string) (v string, ok bool) {
	var parts []string
	for _, in := range n.inputs {
		if iv, has := in.data[k]; has {
			parts = append(parts, iv)
		}
	}
	return strings.Join(parts, "+"), len(parts) > 0
}

// set makes key k what the inputs say, tracking it if it changed.
func (n *tnode) set(r *incproc.Run, k string) {
	v, ok := n.value(k)
	old, had := n.data[k]
	switch {
	case ok && (!had || old != v):
		n.data[k] = v
	case !ok && had:
		delete(n.data, k)
	default:
		return
	}
	n.tracked[k] = n.h.change()
	r.SetUpdated()
}

func (n *tnode) recompute(r *incproc.Run) error {
	n.h.say("%s: recompute", n.name)
	n.h.ran(n)
	switch n.compute {
	case "cancel":
		r.Cancel(n.name + " cannot commit now")
		return nil
	case "error":
		return errors.New("compute failed")
	}
	keys := map[string]bool{}
	for k := range n.data {
		keys[k] = true
	}
	for _, in := range n.inputs {
		for k := range in.data {
			keys[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		n.set(r, k)
	}
	for _, in := range n.inputs {
		n.consume(in, false)
	}
	n.h.say("%s: -> tracked %s", n.name, formatKeys(n.tracked))
	return nil
}

// sourceCompute counts the ticks in key t, updated only when there were
// some since the last Compute.
func (n *tnode) sourceCompute(r *incproc.Run) error {
	if n.ticks == 0 {
		return nil
	}
	n.h.say("%s: %d ticks", n.name, n.ticks)
	prev := 0
	if v, ok := n.data["t"]; ok {
		fmt.Sscan(v, &prev)
	}
	n.data["t"] = fmt.Sprint(prev + n.ticks)
	n.ticks = 0
	n.tracked["t"] = n.h.change()
	r.SetUpdated()
	return nil
}

func (n *tnode) handlerFor(in *tnode) incproc.Handler {
	return func(r *incproc.Run) (bool, error) {
		mode := n.handler[in.name]
		n.h.say("%s: handle %s %s: %s", n.name, in.name, formatKeys(in.tracked), mode)
		n.h.ran(n)
		switch mode {
		case "unhandled":
			return false, nil
		case "cancel":
			r.Cancel(n.name + " cannot commit now")
			return true, nil
		case "error":
			return false, errors.New("handler failed")
		}
		n.consume(in, true)
		for _, k := range slices.Sorted(maps.Keys(in.tracked)) {
			n.set(r, k)
		}
		n.h.say("%s: -> tracked %s", n.name, formatKeys(n.tracked))
		return true, nil
	}
}

// consume records that n consumed in's tracked changes; a handler
// (strict) must not be given one it consumed before.
func (n *tnode) consume(in *tnode, strict bool) {
	if n.handledUpTo == nil {
		n.handledUpTo = map[*tnode]map[string]int{}
	}
	up := n.handledUpTo[in]
	if up == nil {
		up = map[string]int{}
		n.handledUpTo[in] = up
	}
	for k, c := range in.tracked {
		if strict && up[k] >= c {
			n.h.say("%s: ERROR: given change %d of %s's key %s again", n.name, c, in.name, k)
			n.h.doubles++
		}
		up[k] = max(up[k], c)
	}
}

func formatKeys(m map[string]int) string {
	return "[" + strings.Join(slices.Sorted(maps.Keys(m)), " ") + "]"
}

// fresh is what a full compute from the input nodes' data gives for n.
func (n *tnode) fresh() map[string]string {
	if len(n.inputs) == 0 {
		return n.data // an input node, or a source
	}
	ins := make([]map[string]string, len(n.inputs))
	keys := map[string]bool{}
	for i, in := range n.inputs {
		ins[i] = in.fresh()
		for k := range ins[i] {
			keys[k] = true
		}
	}
	out := map[string]string{}
	for k := range keys {
		var parts []string
		for _, m := range ins {
			if v, ok := m[k]; ok {
				parts = append(parts, v)
			}
		}
		out[k] = strings.Join(parts, "+")
	}
	return out
}
