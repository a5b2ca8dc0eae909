package incproc

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// NodeStats are one node's counters since the engine started or since
// ClearStats.
type NodeStats struct {
	Name string
	// Recompute counts the runs of the node's Compute that completed. An
	// input node counts one per Run, as ovn-northd counts each refresh of
	// an input node from its database.
	Recompute uint64
	// Compute counts the runs in which the node was brought up to date by
	// its handlers alone.
	Compute uint64
	// Cancel counts the runs cancelled at this node: by Run.Cancel, by a
	// recompute that was not allowed, or by an error. ovn-northd 23.03
	// shows it as "abort".
	Cancel uint64
	// RecomputeTime and HandleTime are the time spent in Compute and in
	// the handlers.
	RecomputeTime, HandleTime time.Duration
	// Inputs are the counters of each input, in the order given to
	// AddNode.
	Inputs []InputStats
}

// InputStats count what became of one input's changes at one node.
type InputStats struct {
	Name string
	// Handled counts the changes the handler handled; Unhandled those
	// that made the node recompute (no handler, or the handler returned
	// false) or failed.
	Handled, Unhandled uint64
	// Time is the time spent in the handler.
	Time time.Duration
}

// Stats returns every node's counters, in the order Run visits the nodes.
func (e *Engine) Stats() []NodeStats {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	out := make([]NodeStats, len(e.order))
	for i, n := range e.order {
		out[i] = n.stats
		out[i].Inputs = append([]InputStats(nil), n.stats.Inputs...)
	}
	return out
}

// ClearStats zeroes every counter (inc-engine/clear-stats).
func (e *Engine) ClearStats() {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	for _, n := range e.order {
		inputs := n.stats.Inputs
		for i := range inputs {
			inputs[i] = InputStats{Name: inputs[i].Name}
		}
		n.stats = NodeStats{Name: n.name, Inputs: inputs}
	}
}

// ShowStats writes the counters as ovn-northd 23.03 answers
// inc-engine/show-stats [NODE [STAT]], byte for byte; an empty node or
// stat stands for one not given. Without a node, it writes every node's
// block ("Node: NAME" and its recompute, compute and abort lines); with a
// node, that node's block, or nothing if there is no such node; with a
// stat too, that counter's value alone, or "Invalid stat type : STAT" for
// a stat other than recompute, compute and abort.
func (e *Engine) ShowStats(w io.Writer, node, stat string) error {
	if node == "" && stat != "" {
		return nil // as for any node that does not exist
	}
	return e.showStats(w, node != "", node, stat != "", stat)
}

// ShowStatsCommand is inc-engine/show-stats as a unixctl.Command: at most
// two arguments, NODE and STAT, answered as ovn-northd 23.03 answers
// (where an empty argument is a given one: no node is named "", and ""
// is an invalid stat type).
func (e *Engine) ShowStatsCommand(args []string) (string, error) {
	if len(args) > 2 {
		return "", fmt.Errorf("%q command takes at most 2 arguments", "inc-engine/show-stats")
	}
	n := len(args)
	args = append(args, "", "")
	var b strings.Builder
	err := e.showStats(&b, n > 0, args[0], n > 1, args[1])
	return b.String(), err
}

func (e *Engine) showStats(w io.Writer, byNode bool, node string, byStat bool, stat string) error {
	var b strings.Builder
	for _, s := range e.Stats() {
		if byNode && s.Name != node {
			continue
		}
		if !byStat {
			fmt.Fprintf(&b, "Node: %s\n- recompute: %12d\n- compute:   %12d\n- abort:     %12d\n",
				s.Name, s.Recompute, s.Compute, s.Cancel)
		} else {
			switch stat {
			case "recompute":
				fmt.Fprintf(&b, "%d\n", s.Recompute)
			case "compute":
				fmt.Fprintf(&b, "%d\n", s.Compute)
			case "abort":
				fmt.Fprintf(&b, "%d\n", s.Cancel)
			default:
				fmt.Fprintf(&b, "Invalid stat type : %s\n", stat)
			}
		}
		if byNode {
			break
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Commands returns the engine's control socket commands, named and
// answered as ovn-northd 23.03's: inc-engine/show-stats,
// inc-engine/clear-stats, inc-engine/recompute and
// inc-engine/compute-log-timeout MSEC (SetSlowThreshold). Each has the
// shape of a unixctl.Command. wake, if
// not nil, is called after inc-engine/recompute so that the caller's loop
// runs the engine soon rather than at its next change.
func (e *Engine) Commands(wake func()) map[string]func(args []string) (string, error) {
	noArgs := func(name string, f func()) func([]string) (string, error) {
		return func(args []string) (string, error) {
			if len(args) > 0 {
				return "", fmt.Errorf("%q command takes at most 0 arguments", name)
			}
			f()
			return "", nil
		}
	}
	return map[string]func([]string) (string, error){
		"inc-engine/show-stats":          e.ShowStatsCommand,
		"inc-engine/clear-stats":         noArgs("inc-engine/clear-stats", e.ClearStats),
		"inc-engine/compute-log-timeout": e.logTimeoutCommand,
		"inc-engine/recompute": noArgs("inc-engine/recompute", func() {
			e.ForceRecompute()
			if wake != nil {
				wake()
			}
		}),
	}
}

func (e *Engine) logTimeoutCommand(args []string) (string, error) {
	const name = "inc-engine/compute-log-timeout"
	switch {
	case len(args) < 1:
		return "", fmt.Errorf("%q command requires at least 1 arguments", name)
	case len(args) > 1:
		return "", fmt.Errorf("%q command takes at most 1 arguments", name)
	}
	// As ovn-northd reads it: a decimal integer from 0 to 2^32-1, after
	// optional leading white space.
	ms, err := strconv.ParseInt(strings.TrimLeft(args[0], " \t\n\v\f\r"), 10, 64)
	if err != nil || ms < 0 || ms > math.MaxUint32 {
		return "", errors.New("unsigned integer required")
	}
	e.SetSlowThreshold(time.Duration(ms) * time.Millisecond)
	return "", nil
}
