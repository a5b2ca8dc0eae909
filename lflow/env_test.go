package lflow

import (
	"fmt"
	"testing"
)

// mapEnv is an Env backed by maps, for tests.
type mapEnv struct {
	sets     map[string][]Const
	groups   map[string][]string
	keys     map[string]uint32
	resident map[string]bool
	// autoKeys gives every unknown port a new key, as if the datapath
	// had it (the corpus names more ports than the tests list).
	autoKeys bool
}

func (e *mapEnv) AddressSet(name string) ([]Const, bool) { c, ok := e.sets[name]; return c, ok }
func (e *mapEnv) PortGroup(name string) ([]string, bool) { g, ok := e.groups[name]; return g, ok }
func (e *mapEnv) ChassisResident(port string) bool       { return e.resident[port] }
func (e *mapEnv) PortKey(name string) (uint32, bool) {
	if k, ok := e.keys[name]; ok {
		return k, true
	}
	if e.autoKeys {
		k := uint32(1000 + len(e.keys))
		e.keys[name] = k
		return k, true
	}
	return 0, false
}

// newTestEnv returns an environment with the address sets and port groups
// the tests and the reference corpus use: as1000 holds 1,000 IPv4
// addresses in one subnet, as1000spread 1,000 all over the IPv4 space, and
// pg10 ten ports.
func newTestEnv(t testing.TB, st *Symtab) *mapEnv {
	t.Helper()
	env := &mapEnv{
		sets:     map[string][]Const{},
		groups:   map[string][]string{},
		keys:     map[string]uint32{},
		resident: map[string]bool{"cr-lr0-public": true},
	}
	add := func(name string, addrs ...string) {
		cs, err := st.ParseAddresses(addrs)
		if err != nil {
			t.Fatal(err)
		}
		env.sets[name] = cs
	}
	add("svc_monitor_mac", "0a:58:0a:f4:00:01")
	add("as_clients", "10.0.0.11", "10.0.0.12", "20.0.0.0/24")
	add("as_v6", "aef0::11", "aef0::12")
	add("pg_web_ip4", "10.0.0.11", "10.0.0.12")
	add("pg_web_ip6", "aef0::11")
	add("pg_db_ip4", "10.0.0.13")
	add("pg_db_ip6", "aef0::13")
	var big []string
	for i := 0; i < 1000; i++ {
		big = append(big, fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256))
	}
	add("as1000", big...)
	// as1000spread: 1,000 addresses spread over the whole IPv4 space
	// (a multiplicative walk), the worst case for a negated set.
	big = big[:0]
	for i := uint32(1); len(big) < 1000; i++ {
		a := i * 2654435761
		big = append(big, fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&0xff, a>>8&0xff, a&0xff))
	}
	add("as1000spread", big...)
	env.groups["pg_web"] = []string{"sw0-p1", "sw0-p2"}
	env.groups["pg_db"] = []string{"sw1-p1"}
	for i := 0; i < 10; i++ {
		env.groups["pg10"] = append(env.groups["pg10"], fmt.Sprintf("p%d", i))
	}
	// Port keys in order of first use, as a datapath would number them.
	for i, p := range []string{"sw0-p1", "sw0-p2", "sw1-p1", "gr0-public", "lr0-sw0", "lr0-sw1", "lr0-public", "sw0-lr0", "sw1-lr0", "public-lr0", "ln-public", "sw0-vip", "cr-lr0-public", "_MC_flood", "_MC_unknown", "_MC_mrouter_flood", "_MC_flood_l2", "_MC_mrouter_static", "_MC_static", "p1", "p2", "p3"} {
		env.keys[p] = uint32(i + 1)
	}
	for i := 0; i < 10; i++ {
		env.keys[fmt.Sprintf("p%d", i)] = uint32(100 + i)
	}
	return env
}
