package ovsdb

import (
	"encoding/binary"
	"maps"
	"math/bits"
	"slices"
)

// ovsdb-server keeps the members of a JSON object in a hash table and
// visits them in the table's bucket order, so when several members of an
// object are wrong (two bad columns of a "row"), the one it visits first
// is the one its error names. serverOrder gives that order, so that govn
// names the same member, whatever order Go's maps iterate in. (Learned
// from the behaviour of ovsdb-server 3.1: the table is a chained hash
// table of a power-of-two number of buckets, string keys hashed with the
// 32-bit MurmurHash3 mixing steps, new entries pushed at the front of
// their bucket's chain, and the bucket array grown as entries arrive.)

// serverOrder returns the keys of m in the order ovsdb-server visits the
// members of a JSON object with those names. govn's parser keeps no
// member order, so the members are taken as arriving in byte order of
// their names; the result differs from ovsdb-server's only for members
// whose hashes share a bucket and that a client sent out of byte order.
func serverOrder[V any](m map[string]V) []string {
	keys := slices.Sorted(maps.Keys(m))
	if len(keys) < 2 {
		return keys
	}
	return hashTableOrder(keys)
}

// hashTableOrder inserts keys, in order, into a model of ovsdb-server's
// hash table and returns them in its iteration order.
func hashTableOrder(keys []string) []string {
	type node struct {
		key  string
		hash uint32
		next *node
	}
	mask := 0
	buckets := make([]*node, 1)
	for i, k := range keys {
		n := &node{key: k, hash: murmurString(k)}
		b := int(n.hash) & mask
		n.next, buckets[b] = buckets[b], n
		count := i + 1
		if count/2 <= mask {
			continue
		}
		newMask := bucketMask(count)
		if newMask <= mask {
			continue
		}
		grown := make([]*node, newMask+1)
		for _, head := range buckets {
			for n := head; n != nil; {
				next := n.next
				b := int(n.hash) & newMask
				n.next, grown[b] = grown[b], n
				n = next
			}
		}
		buckets, mask = grown, newMask
	}
	out := make([]string, 0, len(keys))
	for _, head := range buckets {
		for n := head; n != nil; n = n.next {
			out = append(out, n.key)
		}
	}
	return out
}

// bucketMask is the bucket mask the table grows to for count entries:
// the next power of two above count/2, less one, and at least 3.
func bucketMask(count int) int {
	m := count / 2
	if m == 0 {
		return 0
	}
	m = 1<<bits.Len(uint(m)) - 1
	return m | (m&1)<<1
}

// murmurString hashes s as ovsdb-server hashes member names: 32-bit
// MurmurHash3 with seed 0 over the bytes, a final partial word padded
// with zeros, the length mixed in at the end.
func murmurString(s string) uint32 {
	var h uint32
	b := []byte(s)
	for len(b) >= 4 {
		h = murmurAdd(h, binary.LittleEndian.Uint32(b))
		b = b[4:]
	}
	if len(b) > 0 {
		var tail [4]byte
		copy(tail[:], b)
		h = murmurAdd(h, binary.LittleEndian.Uint32(tail[:]))
	}
	h ^= uint32(len(s))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func murmurAdd(h, k uint32) uint32 {
	k *= 0xcc9e2d51
	k = bits.RotateLeft32(k, 15)
	k *= 0x1b873593
	h ^= k
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

// ServerOrder returns names in the order ovsdb-server's hash table visits
// them (see serverOrder): for replies that list what it keeps in one,
// such as list_dbs.
func ServerOrder(names []string) []string {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return serverOrder(m)
}
