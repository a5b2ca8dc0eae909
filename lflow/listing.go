package lflow

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ListedFlow is one logical flow as "ovn-sbctl lflow-list" prints it.
type ListedFlow struct {
	Line     int // 1-based line number in the listing
	Datapath string
	Pipeline string // "ingress" or "egress"
	Table    int
	Stage    string
	Priority int
	Match    string
	Actions  string
}

// ReadListing reads "ovn-sbctl lflow-list" output. Lines that are neither a
// datapath header nor a flow are ignored; a flow line that cannot be split
// into its parts is returned as an error with its line number, and reading
// goes on (errs collects them).
func ReadListing(r io.Reader) (flows []ListedFlow, errs []error, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var dp, pipeline string
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "Datapath:"):
			dp, pipeline = parseDatapathHeader(trimmed)
		case strings.HasPrefix(trimmed, "table="):
			f, perr := parseFlowLine(trimmed)
			if perr != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", n, perr))
				continue
			}
			f.Line, f.Datapath, f.Pipeline = n, dp, pipeline
			flows = append(flows, f)
		}
	}
	if err := sc.Err(); err != nil {
		return flows, errs, fmt.Errorf("reading lflow listing: %w", err)
	}
	return flows, errs, nil
}

func parseDatapathHeader(s string) (dp, pipeline string) {
	rest := strings.TrimSpace(strings.TrimPrefix(s, "Datapath:"))
	if i := strings.Index(rest, "Pipeline:"); i >= 0 {
		pipeline = strings.TrimSpace(rest[i+len("Pipeline:"):])
		rest = strings.TrimSpace(rest[:i])
	}
	if uq, err := strconv.Unquote(strings.Fields(rest + " x")[0]); err == nil {
		rest = uq
	}
	return rest, pipeline
}

// parseFlowLine splits
//
//	table=3 (lr_in_ip_input     ), priority=90   , match=(...), action=(...)
func parseFlowLine(s string) (ListedFlow, error) {
	var f ListedFlow
	rest := strings.TrimPrefix(s, "table=")
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	t, err := strconv.Atoi(rest[:i])
	if err != nil {
		return f, fmt.Errorf("bad table number in %q", s)
	}
	f.Table = t
	rest = strings.TrimSpace(rest[i:])
	if strings.HasPrefix(rest, "(") {
		j := strings.IndexByte(rest, ')')
		if j < 0 {
			return f, fmt.Errorf("unterminated stage name")
		}
		f.Stage = strings.TrimSpace(rest[1:j])
		rest = rest[j+1:]
	}
	const pri = "priority="
	j := strings.Index(rest, pri)
	if j < 0 {
		return f, fmt.Errorf("no priority")
	}
	rest = rest[j+len(pri):]
	k := 0
	for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
		k++
	}
	if f.Priority, err = strconv.Atoi(rest[:k]); err != nil {
		return f, fmt.Errorf("bad priority")
	}
	const m, a = "match=(", "), action=("
	mi := strings.Index(rest, m)
	ai := strings.LastIndex(rest, a)
	if mi < 0 || ai < mi || !strings.HasSuffix(rest, ")") {
		return f, fmt.Errorf("cannot find match=(...) and action=(...)")
	}
	f.Match = rest[mi+len(m) : ai]
	f.Actions = rest[ai+len(a) : len(rest)-1]
	return f, nil
}
