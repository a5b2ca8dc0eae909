package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/govn/govn/lflow"
)

// lflowCommand is "govn lflow check [--normalize] [--compile]", which
// reads "ovn-sbctl lflow-list" output on stdin and parses every match and
// action, and "govn lflow symbols", which prints the symbol table.
func lflowCommand() *command {
	return &command{
		name:    "lflow",
		summary: "parse and check OVN's logical flows",
		usage:   "check [FLAGS] < lflow-list\nsymbols",
		subs: []*command{{
			name:    "check",
			summary: "parse every match and action of ovn-sbctl lflow-list output on standard input",
			usage:   "[--normalize] [--compile] [--address-set NAME=A,B...] [--port-group NAME=P,Q...] [--resident PORT...] < lflow-list",
			setup: func(fs *flag.FlagSet) leaf {
				normalize := fs.Bool("normalize", false, "print each match's normalized form")
				compile := fs.Bool("compile", false, "print each flow's datapath rules (ports get keys in order of appearance)")
				env := newCLIEnv()
				fs.Func("address-set", "NAME=ADDR,ADDR,... (repeatable)", env.addList(env.sets))
				fs.Func("port-group", "NAME=PORT,PORT,... (repeatable)", env.addList(env.groups))
				fs.Func("resident", "a port is_chassis_resident() holds for (repeatable)", func(s string) error {
					env.resident[s] = true
					return nil
				})
				return leaf{run: func(_ context.Context, s stdio, _ []string) error {
					return lflowCheck(s.in, s.out, env, *normalize, *compile)
				}}
			},
		}, {
			name:    "symbols",
			summary: "print the symbol table: every field a logical flow may name",
			setup: noFlags(func(_ context.Context, s stdio, _ []string) error {
				st, err := lflow.NewSymtab()
				if err != nil {
					return err
				}
				return st.WriteTable(s.out)
			}),
		}},
	}
}

// lflowCheck is govn lflow check: it parses the listing in and writes
// what it found to out.
func lflowCheck(in io.Reader, out io.Writer, env *cliEnv, normalize, compile bool) error {
	st, err := lflow.NewSymtab()
	if err != nil {
		return err
	}
	env.symtab = st
	opts := lflow.CheckOptions{Normalize: normalize, Env: env}
	if compile {
		if opts.Compiler, err = lflow.NewCompiler(st, lflow.DefaultLayout()); err != nil {
			return err
		}
		env.keys = map[string]uint32{}
	}
	res, err := st.CheckListing(in, out, opts)
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return errFailed
	}
	return nil
}

// newCLIEnv returns an environment with no address sets, port groups or
// resident ports.
func newCLIEnv() *cliEnv {
	return &cliEnv{sets: map[string][]string{}, groups: map[string][]string{}, resident: map[string]bool{}}
}

// cliEnv resolves names from command-line flags.
type cliEnv struct {
	symtab   *lflow.Symtab
	sets     map[string][]string
	groups   map[string][]string
	resident map[string]bool
	// keys numbers logical ports in order of appearance (for --compile,
	// which has no Port_Binding table to read them from).
	keys map[string]uint32
}

func (e *cliEnv) addList(m map[string][]string) func(string) error {
	return func(s string) error {
		name, list, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return fmt.Errorf("want NAME=A,B,..., got %q", s)
		}
		m[name] = strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })
		return nil
	}
}

func (e *cliEnv) AddressSet(name string) ([]lflow.Const, bool) {
	addrs, ok := e.sets[name]
	if !ok {
		return nil, false
	}
	cs, err := e.symtab.ParseAddresses(addrs)
	if err != nil {
		return nil, false
	}
	return cs, true
}

func (e *cliEnv) PortGroup(name string) ([]string, bool) {
	g, ok := e.groups[name]
	return g, ok
}

func (e *cliEnv) PortKey(name string) (uint32, bool) {
	if e.keys == nil {
		return 0, false
	}
	k, ok := e.keys[name]
	if !ok {
		k = uint32(len(e.keys) + 1)
		e.keys[name] = k
	}
	return k, true
}

func (e *cliEnv) ChassisResident(port string) bool { return e.resident[port] }
