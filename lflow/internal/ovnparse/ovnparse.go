// Package ovnparse asks the real OVN parser whether it accepts logical
// flow matches and actions, for differential tests of package lflow.
//
// The real parser is reached through ovn-trace: Check writes every input
// as a row of Logical_Flow into a fresh Southbound served by a real
// ovsdb-server, runs ovn-trace once against it, and reads back the flows
// ovn-trace logs as unparsable, with OVN's reason:
//
//	MATCH: parsing expression failed (REASON)
//	ACTIONS: parsing actions failed (REASON)
//
// A match is put in a row whose actions are "next;", and an action in a
// row whose match is "1", so each row tests one input. Hundreds of inputs
// take well under a second.
//
// How to use it from a test (package lflow's TestDifferentialParser is the
// example; compareWithOVN there does the govn side):
//
//	if err := ovnparse.Available(); err != nil {
//		t.Skip(err)
//	}
//	ins, err := ovnparse.ReadInputs("testdata/ovnparse/actions.txt", ovnparse.Actions)
//	verdicts, err := ovnparse.Check(ctx, t.TempDir(), ovnparse.DefaultEnv(), ins)
//	// verdicts[i] is OVN's answer for ins[i].
//
// Inputs files hold one input per line; blank lines and lines starting
// with "#" are skipped. Add a line to testdata/ovnparse/matches.txt or
// actions.txt and the differential test checks it.
package ovnparse

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Kind says whether an input is a match or actions.
type Kind uint8

// Input kinds.
const (
	Match Kind = iota
	Actions
)

func (k Kind) String() string {
	if k == Match {
		return "match"
	}
	return "actions"
}

// Input is one text for the parser.
type Input struct {
	Kind Kind
	Text string
	// Where says where the input came from ("matches.txt:12",
	// "generated #40"), for reports.
	Where string
}

// Verdict is OVN's answer for one input.
type Verdict struct {
	OK  bool
	Err string // OVN's reason, when !OK
	// Crash, when set, says that ovn-trace aborted on the flow after
	// parsing it (OK is then true), with its last words.
	Crash string
}

// Env is what the Southbound holds besides the flows: address sets and
// port groups (by name, as a match refers to them) and their members, and
// the options put_dhcp_opts and put_dhcpv6_opts take (ovn-controller
// reads them from the Southbound, where ovn-northd writes them).
type Env struct {
	AddressSets   map[string][]string
	PortGroups    map[string][]string
	DHCPOptions   []DHCPOption
	DHCPv6Options []DHCPOption
}

// DHCPOption is a row of the Southbound's DHCP_Options or DHCPv6_Options.
type DHCPOption struct {
	Name string
	Code int
	Type string // "ipv4", "str", "mac" ...
}

// DefaultEnv returns the environment the lflow differential tests use:
// address sets set4 (IPv4), set6 (IPv6) and setmac (MAC addresses), and
// port groups pg1 and pg2.
func DefaultEnv() Env {
	return Env{
		AddressSets: map[string][]string{
			"set4":   {"10.0.0.1", "10.0.0.2", "192.168.0.0/24"},
			"set6":   {"fe80::1", "aef0::/64"},
			"setmac": {"00:00:00:00:00:01", "0a:58:0a:f4:00:01"},
		},
		PortGroups: map[string][]string{
			"pg1": {"p1", "p2"},
			"pg2": {"p3"},
		},
	}
}

const schema = "/usr/share/ovn/ovn-sb.ovsschema"

// Available reports why Check cannot run here, or nil.
func Available() error {
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovn-trace"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s: %w", tool, err)
		}
	}
	if _, err := os.Stat(schema); err != nil {
		return fmt.Errorf("needs the Southbound schema: %w", err)
	}
	return nil
}

// ReadInputs reads inputs of one kind from a file, one per line.
func ReadInputs(path string, kind Kind) ([]Input, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ins []Input
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ins = append(ins, Input{Kind: kind, Text: line, Where: fmt.Sprintf("%s:%d", filepath.Base(path), n)})
	}
	return ins, sc.Err()
}

// sentinel is a match every OVN refuses; Check adds it to prove that
// ovn-trace read the flows at all.
const sentinel = "ovnparse_sentinel_is_not_a_field"

// Check returns OVN's verdict on each input, in order. dir is a scratch
// directory (the database and sockets live there); every process Check
// starts is stopped before it returns.
func Check(ctx context.Context, dir string, env Env, inputs []Input) ([]Verdict, error) {
	for _, in := range inputs {
		if strings.ContainsAny(in.Text, "\n\r") {
			return nil, fmt.Errorf("%s: input holds a line break", in.Where)
		}
		if !utf8.ValidString(in.Text) {
			// OVSDB holds only UTF-8: no Southbound can hold this flow.
			return nil, fmt.Errorf("%s: input is not UTF-8", in.Where)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	db := filepath.Join(dir, "sb.db")
	sock := filepath.Join(dir, "sb.sock")
	if out, err := exec.CommandContext(ctx, "ovsdb-tool", "create", db, schema).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	srv := exec.CommandContext(ctx, "ovsdb-server", "--no-chdir", "--remote=punix:"+sock,
		"--unixctl="+filepath.Join(dir, "sb.ctl"), "--log-file="+filepath.Join(dir, "sb.log"), db)
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start ovsdb-server: %w", err)
	}
	defer func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	}()
	conn, err := dial(ctx, sock)
	if err != nil {
		return nil, fmt.Errorf("ovsdb-server: %w (%s)", err, srvErr.String())
	}
	defer conn.Close()
	c := &checker{conn: conn, sock: sock, env: env}
	return c.check(ctx, inputs)
}

// checker runs batches of inputs through one Southbound.
type checker struct {
	conn net.Conn
	sock string
	env  Env
}

// check returns the verdicts on inputs. When ovn-trace crashes on some
// flow (23.03 aborts on a few that it parses), the batch is split in
// halves until the inputs that crash it are found.
func (c *checker) check(ctx context.Context, inputs []Input) ([]Verdict, error) {
	all := append(inputs[:len(inputs):len(inputs)], Input{Kind: Match, Text: sentinel, Where: "sentinel"})
	if err := fill(c.conn, c.env, all); err != nil {
		return nil, err
	}
	// Trace a packet through a datapath without flows: ovn-trace parses
	// every flow of the Southbound first, and logs those it cannot.
	trace := exec.CommandContext(ctx, "ovn-trace", "--db=unix:"+c.sock, "--minimal", "trace", "eth.type == 0x800")
	var stderr bytes.Buffer
	trace.Stderr = &stderr
	out, err := trace.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ProcessState.Sys().(syscall.WaitStatus).Signaled() && ctx.Err() == nil {
		if len(inputs) == 1 {
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			return []Verdict{{OK: true, Crash: lines[len(lines)-1]}}, nil
		}
		half := len(inputs) / 2
		first, err := c.check(ctx, inputs[:half])
		if err != nil {
			return nil, err
		}
		second, err := c.check(ctx, inputs[half:])
		if err != nil {
			return nil, err
		}
		return append(first, second...), nil
	}
	if err != nil {
		return nil, fmt.Errorf("ovn-trace: %v: %s%s", err, out, stderr.String())
	}
	return verdicts(all, stderr.String())
}

// verdicts matches ovn-trace's log lines against the inputs.
func verdicts(all []Input, log string) ([]Verdict, error) {
	byText := [2]map[string][]int{{}, {}}
	for i, in := range all {
		byText[in.Kind][in.Text] = append(byText[in.Kind][in.Text], i)
	}
	out := make([]Verdict, len(all))
	for i := range out {
		out[i].OK = true
	}
	markers := [2]string{": parsing expression failed (", ": parsing actions failed ("}
	for _, line := range strings.Split(log, "\n") {
		_, rest, ok := strings.Cut(line, "|ovntrace|WARN|")
		if !ok {
			continue
		}
		found, failure := false, false
		for k, marker := range markers {
			failure = failure || strings.Contains(rest, marker)
			// The input may itself contain the marker: try each place.
			for off := 0; !found; {
				j := strings.Index(rest[off:], marker)
				if j < 0 {
					break
				}
				j += off
				if idx, ok := byText[k][rest[:j]]; ok && strings.HasSuffix(rest, ")") {
					reason := rest[j+len(marker) : len(rest)-1]
					for _, i := range idx {
						out[i] = Verdict{Err: reason}
					}
					found = true
				}
				off = j + 1
			}
		}
		if failure && !found {
			return nil, fmt.Errorf("ovn-trace reported a failure for no input: %s", rest)
		}
	}
	last := out[len(out)-1]
	if last.OK {
		return nil, fmt.Errorf("ovn-trace did not report the sentinel flow as unparsable; its log:\n%s", log)
	}
	return out[:len(out)-1], nil
}

func dial(ctx context.Context, sock string) (net.Conn, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to %s: %w", sock, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fill writes the Southbound rows in one transaction: a datapath for the
// flows, an empty one to trace through, the environment and one flow per
// input.
func fill(conn net.Conn, env Env, all []Input) error {
	type row = map[string]any
	set := func(vs []string) []any {
		elems := make([]any, len(vs))
		for i, v := range vs {
			elems[i] = v
		}
		return []any{"set", elems}
	}
	insert := func(table string, r row, name string) row {
		op := row{"op": "insert", "table": table, "row": r}
		if name != "" {
			op["uuid-name"] = name
		}
		return op
	}
	ops := []any{"OVN_Southbound"}
	// Rows of an earlier batch go first.
	for _, table := range []string{"Logical_Flow", "Address_Set", "Port_Group", "Datapath_Binding"} {
		ops = append(ops, row{"op": "delete", "table": table, "where": []any{}})
	}
	ops = append(ops,
		insert("Datapath_Binding", row{"tunnel_key": 1, "external_ids": []any{"map", []any{[]any{"name", "flows"}}}}, "dp"),
		insert("Datapath_Binding", row{"tunnel_key": 2, "external_ids": []any{"map", []any{[]any{"name", "trace"}}}}, ""),
	)
	for _, name := range sortedKeys(env.AddressSets) {
		ops = append(ops, insert("Address_Set", row{"name": name, "addresses": set(env.AddressSets[name])}, ""))
	}
	for _, name := range sortedKeys(env.PortGroups) {
		ops = append(ops, insert("Port_Group", row{"name": name, "ports": set(env.PortGroups[name])}, ""))
	}
	for _, t := range []struct {
		table string
		opts  []DHCPOption
	}{{"DHCP_Options", env.DHCPOptions}, {"DHCPv6_Options", env.DHCPv6Options}} {
		for _, o := range t.opts {
			ops = append(ops, insert(t.table, row{"name": o.Name, "code": o.Code, "type": o.Type}, ""))
		}
	}
	for i, in := range all {
		match, actions := in.Text, "next;"
		if in.Kind == Actions {
			match, actions = "1", in.Text
		}
		ops = append(ops, insert("Logical_Flow", row{
			"logical_datapath": []any{"named-uuid", "dp"},
			"pipeline":         "ingress", "table_id": 0, "priority": i % 65536,
			"match": match, "actions": actions,
		}, ""))
	}
	req, err := json.Marshal(map[string]any{"method": "transact", "params": ops, "id": 1})
	if err != nil {
		return err
	}
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return err
	}
	if _, err := conn.Write(req); err != nil {
		return fmt.Errorf("transact: %w", err)
	}
	dec := json.NewDecoder(conn)
	for {
		var reply struct {
			ID     any               `json:"id"`
			Method string            `json:"method"`
			Result []json.RawMessage `json:"result"`
			Error  any               `json:"error"`
		}
		if err := dec.Decode(&reply); err != nil {
			return fmt.Errorf("transact reply: %w", err)
		}
		if reply.Method != "" {
			continue // an echo or notification; not ours
		}
		if reply.Error != nil {
			return fmt.Errorf("transact: %v", reply.Error)
		}
		for _, r := range reply.Result {
			if bytes.Contains(r, []byte(`"error"`)) {
				return fmt.Errorf("transact: %s", r)
			}
		}
		if len(reply.Result) != len(ops)-1 {
			return errors.New("transact: short reply")
		}
		return nil
	}
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
