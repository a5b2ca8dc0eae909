package northd

import (
	"github.com/govn/govn/ovsdb"
)

// Tunnel key ranges (ovn-architecture(7), "Tunnel Encapsulations"): a
// datapath's key is its Geneve VNI (24 bits); a logical port's key is 15
// bits, and multicast groups take the keys from 32768 up.
const (
	maxDatapathKey = 1<<24 - 1
	maxPortKey     = 1<<15 - 1
	mcastKeyBase   = 1 << 15
)

// keySpace is one space of tunnel keys: the datapaths', or one datapath's
// ports'. Keys are handed out after the last one given (as ovn-northd does),
// so that a key freed by a deleted port is not at once reused by the next
// new port, whose packets a chassis that has not caught up would deliver to
// the old one.
type keySpace struct {
	max  uint32
	used map[uint32]string // key -> holder
	held map[string]uint32 // holder -> key
	hint uint32
}

func newKeySpace(max uint32) *keySpace {
	return &keySpace{max: max, used: make(map[uint32]string), held: make(map[string]uint32)}
}

// claim returns holder's key: the one it holds, else requested if that is
// free (0 for none), else the next free one; 0 when the space is full.
func (k *keySpace) claim(holder string, requested uint32) uint32 {
	if key, ok := k.held[holder]; ok && (requested == 0 || requested == key) {
		return key
	}
	if requested != 0 && requested <= k.max {
		if h, taken := k.used[requested]; !taken || h == holder {
			k.release(holder)
			k.take(holder, requested)
			return requested
		}
	}
	if key, ok := k.held[holder]; ok {
		return key
	}
	for i := uint32(0); i < k.max; i++ {
		key := (k.hint+i)%k.max + 1
		if _, taken := k.used[key]; !taken {
			k.take(holder, key)
			k.hint = key
			return key
		}
	}
	return 0
}

// seed records a key found in the Southbound, so that it stays its
// holder's across restarts. A key already held by another holder is left.
func (k *keySpace) seed(holder string, key uint32) {
	if key == 0 || key > k.max {
		return
	}
	if _, taken := k.used[key]; taken {
		return
	}
	if _, ok := k.held[holder]; ok {
		return
	}
	k.take(holder, key)
}

func (k *keySpace) take(holder string, key uint32) {
	k.used[key] = holder
	k.held[holder] = key
}

func (k *keySpace) release(holder string) {
	if key, ok := k.held[holder]; ok {
		delete(k.used, key)
		delete(k.held, holder)
	}
}

// keyClaim is a key an owner holds: holder in the space of datapath space
// (zero UUID for the datapaths' own space).
type keyClaim struct {
	space  ovsdb.UUID
	holder string
}

func (s *State) keySpace(space ovsdb.UUID) *keySpace {
	ks := s.keys[space]
	if ks == nil {
		max := uint32(maxPortKey)
		if space.IsZero() {
			max = maxDatapathKey
		}
		ks = newKeySpace(max)
		s.keys[space] = ks
	}
	return ks
}

// DatapathKey returns the tunnel key of the datapath for Northbound row dp
// (requested: options:requested-tnl-key, or 0), held by the owner. The key
// may go nowhere but into a column of the owner's records (Record): a
// speculative generation gets a placeholder that the commit replaces there
// (parallel.go).
func (g *gen) DatapathKey(dp ovsdb.UUID, requested uint32) uint32 {
	return g.claimKey(ovsdb.UUID{}, dp.String(), requested)
}

// PortKey returns the tunnel key of logical port name in the datapath for
// Northbound row dp, held by the owner. As for DatapathKey, the key may go
// nowhere but into the owner's records.
func (g *gen) PortKey(dp ovsdb.UUID, name string, requested uint32) uint32 {
	return g.claimKey(dp, name, requested)
}

func (g *gen) claimKey(space ovsdb.UUID, holder string, requested uint32) uint32 {
	if g.x != nil {
		return g.specClaimKey(space, holder, requested)
	}
	ks := g.s.keySpace(space)
	before := ks.held[holder]
	key := ks.claim(holder, requested)
	if key != before {
		if space.IsZero() {
			g.s.touch(datapathKeyDep(holder))
		} else {
			g.s.touch(portKeyDep(space, holder))
		}
	}
	if requested != 0 && key != requested {
		g.Warn("requested tunnel key is taken or out of range", "holder", holder, "requested", requested, "assigned", key)
	}
	g.o.keys = append(g.o.keys, keyClaim{space, holder})
	return key
}

// datapathKeyDep is the dependency of an owner that reads a datapath's
// tunnel key without holding it (a port group's Southbound name has it).
func datapathKeyDep(holder string) depKey {
	return depKey{kind: depDerived, name: "datapath-key/" + holder}
}

// DatapathKeyOf returns the tunnel key of the datapath for Northbound row
// dp, held by that datapath's owner (0 if it has none yet), and makes the
// owner depend on it.
func (g *gen) DatapathKeyOf(dp ovsdb.UUID) uint32 {
	if g.x != nil {
		return g.specKeyOf(ovsdb.UUID{}, dp.String(), datapathKeyDep(dp.String()))
	}
	g.dep(datapathKeyDep(dp.String()))
	return g.s.keySpace(ovsdb.UUID{}).held[dp.String()]
}

// portKeyDep is the dependency of an owner that reads a port's tunnel key
// without holding it (a router's symmetric ECMP replies mark conntrack
// entries with it).
func portKeyDep(dp ovsdb.UUID, name string) depKey {
	return depKey{kind: depDerived, name: "port-key/" + dp.String() + "/" + name}
}

// PortKeyOf returns the tunnel key of logical port name in the datapath for
// Northbound row dp, held by the port's owner (0 if it has none yet), and
// makes the owner depend on it.
func (g *gen) PortKeyOf(dp ovsdb.UUID, name string) uint32 {
	if g.x != nil {
		return g.specKeyOf(dp, name, portKeyDep(dp, name))
	}
	g.dep(portKeyDep(dp, name))
	return g.s.keySpace(dp).held[name]
}
