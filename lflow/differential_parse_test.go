package lflow

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/govn/govn/lflow/internal/ovnparse"
)

// parseReport, when set, names a file that TestDifferentialParser fills
// with one tab-separated line per input: where it came from, its kind,
// govn's and OVN's verdicts, the input, govn's and OVN's errors.
var parseReport = flag.String("ovnparse.report", "", "write every input's govn and OVN verdicts to this file")

// TestDifferentialParser feeds the same matches and actions to this
// package's parser and to the real OVN 23.03 parser (through ovn-trace,
// see package ovnparse) and requires the same accept/refuse on every one:
// the inputs of testdata/ovnparse/matches.txt and actions.txt, the cases
// of testdata/exprs.txt, and matches generated from the symbol table with
// a fixed seed.
func TestDifferentialParser(t *testing.T) {
	if err := ovnparse.Available(); err != nil {
		t.Skip(err)
	}
	st := testSymtab(t)
	var ins []ovnparse.Input
	for _, f := range []struct {
		path string
		kind ovnparse.Kind
	}{
		{"testdata/ovnparse/matches.txt", ovnparse.Match},
		{"testdata/ovnparse/actions.txt", ovnparse.Actions},
	} {
		more, err := ovnparse.ReadInputs(f.path, f.kind)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, more...)
	}
	// The golden cases of exprs.txt: OVN must agree with each.
	for _, c := range readCases(t, "testdata/exprs.txt") {
		ins = append(ins, ovnparse.Input{Kind: ovnparse.Match, Text: c[1], Where: "exprs.txt " + c[0]})
	}
	ins = append(ins, generateActions(st)...)
	var actionTexts []string
	for _, in := range ins {
		if in.Kind == ovnparse.Actions {
			actionTexts = append(actionTexts, in.Text)
		}
	}
	ins = append(ins, mutateActions(actionTexts, 1, 3000)...)
	for i, m := range generateMatches(st, 1, 3000) {
		ins = append(ins, ovnparse.Input{Kind: ovnparse.Match, Text: m, Where: fmt.Sprintf("generated #%d", i)})
	}
	// Actions apart: ovn-trace never aborts on them, so their batch needs
	// no splitting when it aborts on a match.
	var matches, actions []ovnparse.Input
	for _, in := range ins {
		if in.Kind == ovnparse.Actions {
			actions = append(actions, in)
		} else {
			matches = append(matches, in)
		}
	}
	n, agree := compareWithOVN(t, st, matches, "testdata/ovnparse/known.txt")
	na, agreeA := compareWithOVN(t, st, actions, "testdata/ovnparse/known.txt")
	t.Logf("%d matches, %d agree with OVN; %d actions, %d agree", n, agree, na, agreeA)
}

// readKnown reads a list of inputs on which govn and OVN are known to
// disagree, one "KIND<TAB>TEXT" per line (KIND is match or actions).
// The list only shrinks: an input on it that agrees is an error too.
func readKnown(t *testing.T, path string) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	if path == "" {
		return known
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(line, "match\t") && !strings.HasPrefix(line, "actions\t") {
			t.Fatalf("%s: want KIND<TAB>TEXT, got %q", path, line)
		}
		known[line] = true
	}
	return known
}

// compareWithOVN asks OVN and this package about each input and reports
// every disagreement as a test error, except those listed in the file
// knownPath (see readKnown; "" for none), which are logged. It returns the
// number of inputs and of agreements (an input that crashes OVN is
// neither; each is logged). Matches are checked with ParseExpr
// followed by CheckRefs against differentialEnv; actions with ParseActions.
func compareWithOVN(t *testing.T, st *Symtab, ins []ovnparse.Input, knownPath string) (n, agree int) {
	t.Helper()
	crashes := 0
	defer func() {
		if crashes > 0 {
			t.Logf("%d inputs crash ovn-trace; they count as neither agreeing nor disagreeing", crashes)
		}
	}()
	known := readKnown(t, knownPath)
	ovnEnv := differentialEnv()
	verdicts, err := ovnparse.Check(context.Background(), t.TempDir(), ovnEnv, ins)
	if err != nil {
		t.Fatal(err)
	}
	env := envFrom(t, st, ovnEnv)
	var table *bufio.Writer
	if *parseReport != "" {
		f, err := os.Create(*parseReport)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		table = bufio.NewWriter(f)
		defer table.Flush()
		fmt.Fprintf(table, "where\tkind\tgovn\tOVN\tinput\tgovn error\tOVN error\n")
	}
	verdict := func(ok bool) string {
		if ok {
			return "accept"
		}
		return "refuse"
	}
	for i, in := range ins {
		gerr := govnVerdict(st, env, in)
		ov := verdicts[i]
		if table != nil {
			fmt.Fprintf(table, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", in.Where, in.Kind, verdict(gerr == nil), verdict(ov.OK), in.Text, errText(gerr), ov.Err)
		}
		report := t.Errorf
		key := in.Kind.String() + "\t" + in.Text
		if known[key] {
			report = t.Logf
		}
		switch {
		case ov.Crash != "":
			// Neither verdict is wrong for a flow that crashes OVN.
			crashes++
			t.Logf("%s: %s %q: ovn-trace aborts on it (%s); govn %ss it", in.Where, in.Kind, in.Text, ov.Crash, verdict(gerr == nil))
		case (gerr == nil) == ov.OK:
			agree++
			if known[key] {
				t.Errorf("%s: %s %q: now agrees with OVN; remove it from %s", in.Where, in.Kind, in.Text, knownPath)
			}
		case ov.OK:
			report("%s: %s %q: OVN accepts, govn refuses: %v", in.Where, in.Kind, in.Text, gerr)
		default:
			report("%s: %s %q: govn accepts, OVN refuses: %s", in.Where, in.Kind, in.Text, ov.Err)
		}
	}
	return len(ins), agree
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// govnVerdict is this package's answer for one input: nil if accepted.
func govnVerdict(st *Symtab, env Env, in ovnparse.Input) error {
	if in.Kind == ovnparse.Actions {
		_, err := st.ParseActions(in.Text)
		return err
	}
	e, err := st.ParseExpr(in.Text)
	if err != nil {
		return err
	}
	return st.CheckRefs(e, env)
}

// differentialEnv is ovnparse.DefaultEnv plus the address sets and port
// groups that testdata/exprs.txt names (as newTestEnv has them).
func differentialEnv() ovnparse.Env {
	e := ovnparse.DefaultEnv()
	e.AddressSets["as_clients"] = []string{"10.0.0.11", "10.0.0.12", "20.0.0.0/24"}
	e.AddressSets["as_v6"] = []string{"aef0::11", "aef0::12"}
	e.AddressSets["pg_web_ip4"] = []string{"10.0.0.11", "10.0.0.12"}
	e.PortGroups["pg_web"] = []string{"sw0-p1", "sw0-p2"}
	// The DHCP options ovn-northd writes (TestDHCPOptionsDifferential
	// checks this package's tables against a real ovn-northd's).
	for _, t := range []struct {
		opts []Option
		to   *[]ovnparse.DHCPOption
	}{{DHCPv4Options(), &e.DHCPOptions}, {DHCPv6Options(), &e.DHCPv6Options}} {
		for _, o := range t.opts {
			*t.to = append(*t.to, ovnparse.DHCPOption{Name: o.Name, Code: o.Code, Type: o.Type.String()})
		}
	}
	return e
}

// envFrom turns the Southbound environment of the OVN side into an Env.
func envFrom(t *testing.T, st *Symtab, e ovnparse.Env) *mapEnv {
	env := &mapEnv{sets: map[string][]Const{}, groups: map[string][]string{}, keys: map[string]uint32{}, autoKeys: true}
	for name, addrs := range e.AddressSets {
		// The Southbound holds addresses as a set, which OVSDB keeps
		// sorted; OVN reads them in that order (which matters for
		// f < $set: the first address must not be masked).
		addrs = slices.Sorted(slices.Values(addrs))
		cs, err := st.ParseAddresses(addrs)
		if err != nil {
			t.Fatalf("address set %s: %v", name, err)
		}
		env.sets[name] = cs
	}
	for name, ports := range e.PortGroups {
		env.groups[name] = ports
	}
	return env
}

// generateMatches returns n matches built from the symbol table by a
// generator seeded with seed: every kind of symbol, every operator,
// constants of every format (some too wide, some of the wrong type), sets,
// address sets and port groups (known and unknown), negations, ranges,
// bit selections (some out of range) and combinations of these with and
// without parentheses. Most are plausible; many are wrong in one way.
func generateMatches(st *Symtab, seed uint64, n int) []string {
	g := &matchGen{r: rand.New(rand.NewPCG(seed, 0x6c666c6f77)), syms: st.Symbols()}
	seen := map[string]bool{}
	var out []string
	for tries := 0; len(out) < n && tries < 20*n; tries++ {
		m := g.expr(0)
		if g.r.IntN(8) == 0 {
			m = g.mutate(m)
		}
		if !seen[m] && utf8.ValidString(m) {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

type matchGen struct {
	r    *rand.Rand
	syms []*Symbol
}

func (g *matchGen) pick(options ...string) string { return options[g.r.IntN(len(options))] }

func (g *matchGen) expr(depth int) string {
	switch k := g.r.IntN(20); {
	case depth < 2 && k < 3:
		op := g.pick(" && ", " || ")
		a, b := g.expr(depth+1), g.expr(depth+1)
		if g.r.IntN(6) == 0 {
			// mixed && and || without parentheses
			return a + op + b + g.pick(" && ", " || ") + g.expr(depth+1)
		}
		return a + op + b
	case depth < 2 && k < 5:
		return "(" + g.expr(depth+1) + ")" + g.pick(" && ", " || ") + g.expr(depth+1)
	case depth < 3 && k < 7:
		return "!" + g.pick("", "(") + g.expr(depth+1) + ")"[:g.r.IntN(2)]
	case k < 8:
		return g.pick("0", "1", "2", "0x1", "true", "is_chassis_resident(\"p1\")", "is_chassis_resident(p1)", "is_chassis_resident()",
			"is_chassis_resident(\"p1\", \"p2\")", "is_chassis_resident (\"p1\")", "ip4(", "00", "01", "1/1", "{1}", "{0, 1}")
	case k < 9:
		n := 98 + g.r.IntN(4)
		return strings.Repeat("(", n) + g.cmp() + strings.Repeat(")", n)
	default:
		return g.cmp()
	}
}

func (g *matchGen) sym() *Symbol { return g.syms[g.r.IntN(len(g.syms))] }

// field returns a field reference, sometimes with a bit selection.
func (g *matchGen) field() (string, *Symbol) {
	s := g.sym()
	name := s.Name
	if s.Kind != KindPredicate && g.r.IntN(5) == 0 {
		w := max(s.Width, 1)
		lo := g.r.IntN(w + 1)
		switch g.r.IntN(5) {
		case 0:
			name += fmt.Sprintf("[%d]", lo)
		case 1:
			name += fmt.Sprintf("[0..%d]", w-1)
		case 2:
			name += g.pick("[ 0 ]", "[0 .. 1]", "[0x1]", "[-1]", "[1..]", "[]", "[0..1", "[00]", "[0...1]")
		default:
			hi := lo + g.r.IntN(w-lo+2)
			name += fmt.Sprintf("[%d..%d]", lo, hi)
		}
	}
	return name, s
}

func (g *matchGen) cmp() string {
	f, s := g.field()
	op := g.pick("==", "!=", "<", "<=", ">", ">=", "==", "==", "!=")
	switch g.r.IntN(10) {
	case 0:
		return f // alone: fine for 1-bit fields and predicates
	case 1:
		return g.value(s) + " " + op + " " + f
	case 2:
		// a range, or a chain OVN refuses
		return g.value(s) + " " + g.pick("<", "<=", ">", ">=", "==") + " " + f + " " + g.pick("<", "<=", ">", ">=", "==", "!=") + " " + g.value(s)
	case 3:
		return "!" + g.value(s) + " " + op + " " + f
	}
	return f + " " + op + " " + g.rhs(s)
}

func (g *matchGen) rhs(s *Symbol) string {
	switch g.r.IntN(8) {
	case 0:
		return g.pick("$set4", "$set6", "$setmac", "$nope", "@pg1", "@pg2", "@nope", "$", "@", "$4", "$set4.x", "@pg1-x", "$ set4")
	case 1, 2:
		k := 1 + g.r.IntN(3)
		var elems []string
		for i := 0; i < k; i++ {
			if g.r.IntN(4) == 0 {
				elems = append(elems, g.pick("$set4", "$set6", "$nope", "@pg1", "@nope"))
			} else {
				elems = append(elems, g.value(s))
			}
		}
		return "{" + strings.Join(elems, g.pick(", ", " ", ",")) + "}"
	}
	return g.value(s)
}

// mutate changes the text of a match lexically: spacing, a stray token,
// a character dropped or doubled.
func (g *matchGen) mutate(m string) string {
	switch g.r.IntN(5) {
	case 0:
		return strings.ReplaceAll(m, " ", "")
	case 1:
		return strings.ReplaceAll(m, " ", g.pick("\t", "  ", "\t \t"))
	case 2:
		i := g.r.IntN(len(m) + 1)
		return m[:i] + g.pick(" = ", "===", "=>", "<>", "<->", "--", "..", "&", "|", ";", ":", "\\", "'", "#", "-", "+", "~", "!", "(", ")", "{", "}", "[", "]", ",", "$", "@", "\"", "0x", "é") + m[i:]
	case 3:
		if len(m) < 2 {
			return m
		}
		i := g.r.IntN(len(m))
		return m[:i] + m[i+1:]
	}
	i := g.r.IntN(len(m))
	return m[:i+1] + m[i:]
}

// value returns a constant, usually in the symbol's own format.
func (g *matchGen) value(s *Symbol) string {
	format := s.Format
	if s.Kind == KindString || g.r.IntN(4) == 0 {
		if s.Kind == KindString && g.r.IntN(3) != 0 {
			return g.pick(`"p1"`, `"eth0"`, `"sw0-port1"`, `""`, `"a\"b"`, `"a\\b"`, `"\n"`, `"\x41"`, `"\u00e9"`, `"é"`, `'p1'`, `"p1`)
		}
		format = Format(g.r.IntN(5))
		if g.r.IntN(5) == 0 {
			return g.pick(`"p1"`, `"10.0.0.1"`)
		}
	}
	switch format {
	case FmtIPv4:
		return g.pick("10.0.0.1", "0.0.0.0", "255.255.255.255", "10.0.0.0/8", "10.0.0.1/24", "10.0.0.0/255.0.0.0", "10.0.0.0/33", "192.168.1.0/24",
			"10.0.0.0/0", "10.0.0.0/32", "10.0.0.1/0.0.0.255", "10.0.0.0/24.0", "1.2.3", "256.1.1.1", "010.0.0.1", "10.0.0.0/0x8")
	case FmtIPv6:
		return g.pick("fe80::1", "::", "::1", "fe80::/10", "aef0::1/64", "::ffff:10.0.0.1", "ff02::1:ff00:0/104", "fe80::/129",
			"FE80::1", "fe80::1/ffff::", "fe80:::1", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "::/0", "fe80::1%eth0")
	case FmtMAC:
		return g.pick("00:00:00:00:00:01", "ff:ff:ff:ff:ff:ff", "01:00:00:00:00:00/01:00:00:00:00:00", "0a:58:0a:f4:00:01",
			"AA:BB:CC:DD:EE:FF", "0:0:0:0:0:1", "00:00:00:00:00", "00:00:00:00:00:01/ff:ff:ff:00:00:00", "00:00:00:00:00:01/24")
	case FmtHex:
		return g.pick("0x0", "0x1", "0x800", "0x86dd", "0xffff", "0x10000", "0xffffffff", "0x100000000", "0x1234567890abcdef1234", "0x8/0x8", "0x800/0xf00", "0xff/0xf",
			"0X800", "0xABC", "0x", "0xg", "0x00000000000000000000000000000000001", "0xffffffffffffffffffffffffffffffff", "0x1ffffffffffffffffffffffffffffffff", "0x8/8")
	}
	w := max(s.Width, 1)
	return g.pick("0", "1", "2", "6", "80", "255", "256", "65535", "65536", "4294967296",
		fmt.Sprint(uint64(1)<<min(w, 63)-1), fmt.Sprint(uint64(1)<<min(w, 63)), "5/7", "8/8",
		"00", "07", "1e3", "340282366920938463463374607431768211455", "340282366920938463463374607431768211456", "1/0x1", "18446744073709551616")
}
