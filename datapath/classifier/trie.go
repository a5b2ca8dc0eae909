package classifier

import "github.com/govn/govn/datapath/flow"

// trieFields are the fields with prefix tracking, destination first (as
// OVS's default prefixes=ip_dst,ip_src): a subtable skipped by either
// costs only the first field's bits.
var trieFields = [numTries]flow.Field{flow.NWDst, flow.NWSrc, flow.IPv6Dst, flow.IPv6Src}

const numTries = 4

// trieNode is one bit position of a binary trie over address prefixes. A
// node at depth d stands for one d-bit prefix; rules counts the rules whose
// prefix ends here.
type trieNode struct {
	child [2]*trieNode
	rules int
}

// trie tracks the prefixes of one address field.
type trie struct {
	root  trieNode
	width uint
}

// bitAt returns bit d (0 = most significant) of a width-bit value.
func bitAt(v flow.U128, width, d uint) int {
	i := width - 1 - d
	if i >= 64 {
		return int(v.Hi>>(i-64)) & 1
	}
	return int(v.Lo>>i) & 1
}

func (t *trie) insert(v flow.U128, plen uint) {
	n := &t.root
	for d := uint(0); d < plen; d++ {
		b := bitAt(v, t.width, d)
		if n.child[b] == nil {
			n.child[b] = &trieNode{}
		}
		n = n.child[b]
	}
	n.rules++
}

// remove undoes one insert of the same prefix, pruning empty branches.
func (t *trie) remove(v flow.U128, plen uint) {
	path := make([]*trieNode, 0, plen+1)
	n := &t.root
	path = append(path, n)
	for d := uint(0); d < plen; d++ {
		n = n.child[bitAt(v, t.width, d)]
		if n == nil {
			return
		}
		path = append(path, n)
	}
	n.rules--
	for d := int(plen); d > 0; d-- {
		c := path[d]
		if c.rules > 0 || c.child[0] != nil || c.child[1] != nil {
			break
		}
		path[d-1].child[bitAt(v, t.width, uint(d-1))] = nil
	}
}

// plenSet is a set of prefix lengths 0..128.
type plenSet [3]uint64

func (s *plenSet) add(n uint)      { s[n/64] |= 1 << (n % 64) }
func (s *plenSet) has(n uint) bool { return s[n/64]&(1<<(n%64)) != 0 }

// lookup walks the trie along v and returns the lengths of the rule prefixes
// that match v, and how many leading bits of v the walk read: any address
// agreeing with v on those bits gets the same answer.
func (t *trie) lookup(v flow.U128) (plens plenSet, checked uint) {
	n := &t.root
	for d := uint(0); ; d++ {
		if n.rules > 0 {
			plens.add(d)
		}
		if d == t.width || (n.child[0] == nil && n.child[1] == nil) {
			return plens, d
		}
		n = n.child[bitAt(v, t.width, d)]
		if n == nil {
			return plens, d + 1
		}
	}
}

// prefixLen returns the length of m as a CIDR prefix of a width-bit field,
// or -1 if m is not one. Zero means the field is not matched.
func prefixLen(m flow.U128, width uint) int {
	for n := uint(0); n <= width; n++ {
		if flow.OnesU128(n).Shl(width-n) == m {
			return int(n)
		}
	}
	return -1
}
