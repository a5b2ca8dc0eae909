package lflow

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// CheckOptions configures CheckListing.
type CheckOptions struct {
	// Normalize prints each match's normal form.
	Normalize bool
	// Env resolves address sets, port groups and chassis residency for
	// normalization; references it does not know are reported but do not
	// count as failures, since a listing does not carry their contents.
	Env Env
	// Compiler, when set, also compiles each flow and prints its datapath
	// rules (datapath keys are numbered in order of appearance).
	Compiler *Compiler
}

// ErrNoFlows is CheckListing's error for input that holds no logical flow
// at all, such as a wrong file.
var ErrNoFlows = errors.New("no logical flows in the input; want the output of ovn-sbctl lflow-list")

// CheckResult counts what CheckListing saw.
type CheckResult struct {
	Parsed, Failed int
	Unresolved     int // matches not normalized for want of a set's contents
}

// CheckListing parses the match and actions of every flow of an
// "ovn-sbctl lflow-list" listing read from r, writing to w one line per
// failure (with its line number and what is wrong) and, with
// opts.Normalize, each match's normal form. It ends with the line
// "N parsed, M failed". Input without a single flow line is ErrNoFlows,
// and nothing is written.
func (t *Symtab) CheckListing(r io.Reader, w io.Writer, opts CheckOptions) (CheckResult, error) {
	var res CheckResult
	flows, lineErrs, err := ReadListing(r)
	if err != nil {
		return res, err
	}
	if len(flows) == 0 && len(lineErrs) == 0 {
		return res, ErrNoFlows
	}
	for _, e := range lineErrs {
		fmt.Fprintf(w, "%v\n", e)
		res.Failed++
	}
	p := &parser{symtab: t}
	dpKeys := map[string]uint32{}
	ctx := &Context{Env: opts.Env, NextConjID: 1, NextGroupID: 1}
	for _, f := range flows {
		ok := true
		e, err := p.parseExpr(f.Match)
		if err != nil {
			fmt.Fprintf(w, "line %d: match: %v\n    match=(%s)\n", f.Line, err, f.Match)
			ok = false
		}
		if _, aerr := t.ParseActions(f.Actions); aerr != nil {
			fmt.Fprintf(w, "line %d: actions: %v\n    action=(%s)\n", f.Line, aerr, f.Actions)
			ok = false
		}
		if ok && opts.Normalize {
			nf, nerr := t.Normalize(e, opts.Env)
			var unres *UnresolvedError
			switch {
			case errors.As(nerr, &unres):
				fmt.Fprintf(w, "line %d: not normalized: %v\n", f.Line, nerr)
				res.Unresolved++
			case nerr != nil:
				fmt.Fprintf(w, "line %d: normalize: %v\n    match=(%s)\n", f.Line, nerr, f.Match)
				ok = false
			default:
				fmt.Fprintf(w, "line %d: %s table=%d priority=%d match=(%s)\n", f.Line, f.Pipeline, f.Table, f.Priority, f.Match)
				for _, c := range nf {
					fmt.Fprintf(w, "    %s\n", c.String())
				}
				if len(nf) == 0 {
					fmt.Fprintf(w, "    0\n")
				}
			}
		}
		if ok && opts.Compiler != nil {
			if _, seen := dpKeys[f.Datapath]; !seen {
				dpKeys[f.Datapath] = uint32(len(dpKeys) + 1)
			}
			ctx.Datapath = dpKeys[f.Datapath]
			// The listing does not say what a datapath is; its stage
			// names do (lr_in_..., ls_in_...).
			ctx.Router = strings.HasPrefix(f.Stage, "lr_")
			var out Result
			lf := Lflow{Pipeline: f.Pipeline, Table: f.Table, Priority: f.Priority, Match: f.Match, Actions: f.Actions}
			cerr := opts.Compiler.Compile(&lf, ctx, &out)
			var unres *UnresolvedError
			var unsup *UnsupportedError
			switch {
			case errors.As(cerr, &unres) || errors.As(cerr, &unsup):
				fmt.Fprintf(w, "line %d: not compiled: %v\n", f.Line, cerr)
			case cerr != nil:
				fmt.Fprintf(w, "line %d: compile: %v\n", f.Line, cerr)
				ok = false
			default:
				fmt.Fprintf(w, "line %d: %s table=%d priority=%d: %d rules\n", f.Line, f.Pipeline, f.Table, f.Priority, len(out.Rules))
				for i := range out.Rules {
					fmt.Fprintf(w, "    %s\n", out.Rules[i].String())
				}
				for _, g := range out.Groups {
					fmt.Fprintf(w, "    group %d: %d buckets\n", g.ID, len(g.Buckets))
				}
			}
		}
		if ok {
			res.Parsed++
		} else {
			res.Failed++
		}
	}
	if res.Unresolved > 0 {
		fmt.Fprintf(w, "%d matches not normalized (unresolved address sets or port groups)\n", res.Unresolved)
	}
	fmt.Fprintf(w, "%d parsed, %d failed\n", res.Parsed, res.Failed)
	return res, nil
}
