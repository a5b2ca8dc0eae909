package difftrace

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/govn/govn/ovsdb"
	"github.com/govn/govn/ovsdb/client"
	"github.com/govn/govn/schema/sb"
)

// southbound is what the harness learns from a finished Southbound while
// it works around ovn-trace's abort (see normalize.go).
type southbound struct {
	marks  map[int64]string // put_nd_ra_opts marker → its options
	stages map[string]bool  // every stage with a flow that does something
	flows  int
}

// prepareSouthbound rewrites the actions ovn-trace 23.03 cannot trace in
// the Southbound at remote, in one transaction, and reads the stage names
// of its logical flows. Northd must be stopped.
func prepareSouthbound(ctx context.Context, remote string) (*southbound, error) {
	c, err := client.Connect(ctx, client.Options{
		Endpoints: []string{remote},
		Database:  sb.DatabaseName,
		Tables:    map[string][]string{sb.LogicalFlowTable: {"actions", "match", "external_ids"}},
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("read the Southbound at %s: %w", remote, err)
	}
	defer c.Close()
	s := &southbound{marks: map[int64]string{}, stages: map[string]bool{}}
	byOpts := map[string]int64{}
	txn := c.Txn()
	changed := 0
	for _, f := range client.List[sb.LogicalFlow](c.Cache()) {
		s.flows++
		// A stage whose only flow is "1 → next;" is one ovn-trace skips.
		if st := f.ExternalIDs["stage-name"]; st != "" && (f.Match != "1" || f.Actions != "next;") {
			s.stages[st] = true
		}
		actions, ok := rewriteActions(f.Actions, func(opts string) int64 {
			m, ok := byOpts[opts]
			if !ok {
				m = raOptsMark + int64(len(byOpts))
				byOpts[opts] = m
				s.marks[m] = opts
			}
			return m
		})
		if !ok {
			continue
		}
		txn.Update(sb.LogicalFlowTable, f.UUID, map[string]ovsdb.Datum{"actions": ovsdb.Scalar(ovsdb.String(actions))})
		changed++
	}
	if changed > 0 {
		if _, err := txn.Commit(ctx); err != nil {
			return nil, fmt.Errorf("rewrite %d logical flows for ovn-trace: %w", changed, err)
		}
	}
	return s, nil
}

// rewriteActions replaces nd_na_router and put_nd_ra_opts as normalize.go
// describes; mark gives the marker of a put_nd_ra_opts's options. It
// reports whether anything changed.
func rewriteActions(actions string, mark func(opts string) int64) (string, bool) {
	out := actions
	if strings.Contains(out, "nd_na_router {") {
		out = strings.ReplaceAll(out, "nd_na_router {", fmt.Sprintf("nd_na { pkt.mark = %d;", ndRouterMark))
	}
	const call = "put_nd_ra_opts("
	for {
		i := strings.Index(out, call)
		if i < 0 {
			break
		}
		end := closingParen(out, i+len(call))
		if end < 0 {
			break // unbalanced: leave it for ovn-trace to complain about
		}
		opts := strings.Join(strings.Fields(out[i+len(call):end]), " ")
		out = out[:i] + fmt.Sprintf("1; pkt.mark = %d", mark(opts)) + out[end+1:]
	}
	return out, out != actions
}

// closingParen is the index of the parenthesis that closes the one opened
// just before s[from:], skipping quoted strings; -1 if there is none.
func closingParen(s string, from int) int {
	depth, quoted := 1, false
	for i := from; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}
